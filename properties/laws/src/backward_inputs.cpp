#include "attncheck/backward_inputs.hpp"

#include <cstddef>
#include <cstdint>

namespace attncheck {

backward_bound_params backward_bound_for(const subject& s, const attn_case& c) {
  backward_bound_params bp;
  bp.u_compute = s.desc().compute_unit_roundoff;
  bp.exp_ulps = s.desc().exp_ulps;
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

}  // namespace attncheck
