#include "naive.hpp"

#include <cmath>
#include <limits>

namespace attnimpl_test {

naive_result naive_attention(const problem& p, const attnimpl::config& cfg) {
  const auto& d = p.dims;
  const double u = 0x1p-24;
  const double u_out = p.type == dtype::f32 ? 0x1p-24 : p.type == dtype::f16 ? 0x1p-11 : 0x1p-8;
  // Half the smallest subnormal of the output type: rounding there is absolute.
  const double out_floor = p.type == dtype::f32 ? 0x1p-150 : p.type == dtype::f16 ? 0x1p-25 : 0x1p-134;
  const auto gamma = [&](double n) { return n * u / (1 - n * u); };
  const double scale = p.scale != 0.0f ? p.scale : attnimpl::default_scale(d.d);
  const double nb = static_cast<double>(attnimpl::key_blocks(d.lk, cfg));
  const double c_exp = attnimpl::exp_ulps();
  const std::int64_t group = d.hq / d.hkv;
  naive_result r;
  r.o.assign(static_cast<std::size_t>(d.b * d.lq * d.hq * d.dv), 0.0);
  r.bound = r.o;
  r.lse.assign(static_cast<std::size_t>(d.b * d.hq * d.lq), -std::numeric_limits<double>::infinity());
  std::vector<double> s(static_cast<std::size_t>(d.lk)), t(s.size()), w(s.size());
  for (std::int64_t b = 0; b < d.b; ++b)
    for (std::int64_t h = 0; h < d.hq; ++h)
      for (std::int64_t i = 0; i < d.lq; ++i) {
        const std::int64_t g = h / group;
        double m = -std::numeric_limits<double>::infinity();
        for (std::int64_t j = 0; j < d.lk; ++j) {
          if (!p.visible(b, h, i, j)) continue;
          double dot = 0, mag = 0;
          for (std::int64_t e = 0; e < d.d; ++e) {
            const double x = double(p.q.get(b, i, h, e)) * double(p.k.get(b, j, g, e));
            dot += x;
            mag += std::fabs(x);
          }
          s[j] = scale * dot;
          t[j] = std::fabs(scale) * mag;
          m = std::max(m, s[j]);
        }
        if (m == -std::numeric_limits<double>::infinity()) continue;
        double l = 0;
        for (std::int64_t j = 0; j < d.lk; ++j) {
          w[j] = p.visible(b, h, i, j) ? std::exp(s[j] - m) : 0.0;
          l += w[j];
        }
        r.lse[(b * d.hq + h) * d.lq + i] = m + std::log(l);
        for (std::int64_t e = 0; e < d.dv; ++e) {
          double o = 0, weighted_v = 0, weighted = 0;
          for (std::int64_t j = 0; j < d.lk; ++j) {
            if (w[j] == 0.0) continue;
            const double pj = w[j] / l;
            const double phi = gamma(d.d + 2) * t[j] + 2 * u * (m - s[j]) + (c_exp + 2) * u * (nb + 1) +
                               gamma(d.lk + nb + 1);
            const double vv = p.v.get(b, j, g, e);
            o += pj * vv;
            weighted_v += pj * std::fabs(vv) * phi;
            weighted += pj * phi;
          }
          const std::size_t at = static_cast<std::size_t>(((b * d.lq + i) * d.hq + h) * d.dv + e);
          r.o[at] = o;
          r.bound[at] = weighted_v + std::fabs(o) * weighted + (u + u_out) * std::fabs(o) + out_floor;
        }
      }
  return r;
}

}  // namespace attnimpl_test
