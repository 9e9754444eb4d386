#include "attncheck/backward_inputs.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>

namespace attncheck {

backward_bound_params backward_bound_for(const subject& s, const attn_case& c) {
  backward_bound_params bp;
  // The backward bound takes one u: a stage-wise profile counts at its coarsest
  // stage there (sound: every rounding at that unit; docs/bound.md "Stage-wise profiles").
  const stage_profile& p = s.profile();
  bp.u_compute = s.desc().compute_unit_roundoff;
  for (double x : {p.qk_product_u, p.qk_accum_u, p.rescale_u, p.p_u, p.pv_accum_u, p.lse_u})
    bp.u_compute = std::max(bp.u_compute, x);
  bp.exp_ulps = s.exp_ulps();
  if (c.variants.has_softcap()) bp.tanh_ulps = s.tanh_ulps();
  const auto [dq, dkv] = s.backward_blocks(c);
  bp.dq_blocks = dq;
  bp.dkv_blocks = dkv;
  return bp;
}

backward_inputs handed_inputs(const attn_case& c, const std::vector<double>& o, const std::vector<double>& lse,
                              const tensor& d_o) {
  backward_inputs in;
  in.o = make_tensor(c.type, output_shape(c), c.layout);
  for (std::int64_t bi = 0; bi < c.b; ++bi)
    for (std::int64_t i = 0; i < c.lq; ++i)
      for (std::int64_t h = 0; h < c.hq; ++h)
        for (std::int64_t e = 0; e < c.dv; ++e)
          in.o.set(bi, i, h, e, o[static_cast<std::size_t>(((bi * c.lq + i) * c.hq + h) * c.dv + e)]);
  in.lse.resize(lse.size());
  for (std::size_t k = 0; k < lse.size(); ++k) in.lse[k] = static_cast<float>(lse[k]);
  in.d_o = d_o;
  return in;
}

std::string gradient_where(int g, std::int64_t x0, std::int64_t x1, std::int64_t x2, std::int64_t x3) {
  static constexpr const char* names[3] = {"dQ", "dK", "dV"};
  static constexpr const char* axes[3][3] = {{"i", "h", "d"}, {"j", "g", "d"}, {"j", "g", "e"}};
  char buf[128];
  std::snprintf(buf, sizeof buf, "%s[b=%lld,%s=%lld,%s=%lld,%s=%lld]", names[g], static_cast<long long>(x0), axes[g][0],
                static_cast<long long>(x1), axes[g][1], static_cast<long long>(x2), axes[g][2], static_cast<long long>(x3));
  return buf;
}

std::string sink_where(std::int64_t h) { return "dSink[h=" + std::to_string(h) + "]"; }

}  // namespace attncheck
