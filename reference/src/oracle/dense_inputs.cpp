#include "dense_inputs.hpp"

#include <algorithm>
#include <cmath>

namespace attncheck::oracle_detail {

dense_inputs decode_dense(const attn_case& c) {
  const auto n = [](std::int64_t x) { return static_cast<std::size_t>(x); };
  dense_inputs x;
  x.d = c.d;
  x.dv = c.dv;
  x.q.resize(n(c.b * c.lq * c.hq * c.d));
  x.k.resize(n(c.b * c.hkv * c.lk * c.d));
  x.v.resize(n(c.b * c.hkv * c.lk * c.dv));
  x.k_abs_sum.assign(n(c.b * c.hkv * c.lk), 0.0);
  x.k_abs_max.assign(n(c.b * c.hkv * c.lk), 0.0);
  std::size_t at = 0;
  for (std::int64_t bi = 0; bi < c.b; ++bi)
    for (std::int64_t i = 0; i < c.lq; ++i)
      for (std::int64_t h = 0; h < c.hq; ++h)
        for (std::int64_t dd = 0; dd < c.d; ++dd) x.q[at++] = c.q_value(bi, i, h, dd);
  for (std::int64_t bi = 0; bi < c.b; ++bi)
    for (std::int64_t g = 0; g < c.hkv; ++g)
      for (std::int64_t j = 0; j < c.lk; ++j) {
        const std::size_t key = x.key_base(c, bi, g) + n(j);
        double sum = 0, mx = 0;
        for (std::int64_t dd = 0; dd < c.d; ++dd) {
          const double kd = c.k_value(bi, j, g, dd);
          x.k[key * n(c.d) + n(dd)] = kd;
          sum += std::fabs(kd);
          mx = std::max(mx, std::fabs(kd));
        }
        x.k_abs_sum[key] = sum;
        x.k_abs_max[key] = mx;
        for (std::int64_t e = 0; e < c.dv; ++e) x.v[key * n(c.dv) + n(e)] = c.v_value(bi, j, g, e);
      }
  return x;
}

void visible_keys(const attn_case& c, std::int64_t bi, std::int64_t h, std::int64_t i, std::vector<std::int64_t>& keys) {
  keys.clear();
  for (std::int64_t j = 0; j < c.lk; ++j)
    if (c.visible(bi, h, i, j)) keys.push_back(j);
}

}  // namespace attncheck::oracle_detail
