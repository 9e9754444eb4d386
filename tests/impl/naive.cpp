#include "naive.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "attncheck/oracle.hpp"

namespace attnimpl_test {

namespace {

attncheck::dtype suite_type(dtype t) {
  return t == dtype::f32 ? attncheck::dtype::f32 : t == dtype::f16 ? attncheck::dtype::f16 : attncheck::dtype::bf16;
}

// The buffer's logical (d0, d1, d2, d3) elements as a dense tensor of the same bits.
attncheck::tensor as_tensor(const buffer& x) {
  attncheck::tensor t = attncheck::tensor::contiguous(suite_type(x.type), {x.dims[0], x.dims[1], x.dims[2], x.dims[3]});
  std::size_t at = 0;
  for (std::int64_t a = 0; a < x.dims[0]; ++a)
    for (std::int64_t b = 0; b < x.dims[1]; ++b)
      for (std::int64_t c = 0; c < x.dims[2]; ++c)
        for (std::int64_t d = 0; d < x.dims[3]; ++d) {
          const float v = x.get(a, b, c, d);
          t.bits[at++] = x.type == dtype::f32 ? std::bit_cast<std::uint32_t>(v) : bits16(x.type, v);
        }
  return t;
}

}  // namespace

naive_result naive_attention(const problem& p, const attnimpl::config& cfg) {
  const auto& d = p.dims;
  if (d.lk == 0) {  // the kernel takes Lk = 0 (the contract's cases start at 1): every row sees no key
    const auto n_o = static_cast<std::size_t>(d.b * d.lq * d.hq * d.dv), n_lse = static_cast<std::size_t>(d.b * d.hq * d.lq);
    return {std::vector<double>(n_o, 0.0), std::vector<double>(n_o, 0.0),
            std::vector<double>(n_lse, -std::numeric_limits<double>::infinity()), std::vector<double>(n_lse, 0.0)};
  }
  attncheck::attn_case c;
  c.b = d.b, c.hq = d.hq, c.hkv = d.hkv, c.lq = d.lq, c.lk = d.lk, c.d = d.d, c.dv = d.dv;
  if (p.scale != 0.0f) c.scale = p.scale;
  c.causal = p.causal;
  c.key_len = p.key_len;
  c.mask_shape = p.mask_dims;
  c.mask = p.mask;
  c.type = suite_type(p.type);
  c.q = as_tensor(p.q), c.k = as_tensor(p.k), c.v = as_tensor(p.v);
  attncheck::oracle_options opt;
  opt.precision = attncheck::oracle_precision::auto_tier;
  opt.out_type = c.type;
  opt.bound.exp_ulps = attnimpl::exp_ulps();
  opt.bound.key_blocks = std::max<std::int64_t>(1, attnimpl::key_blocks(d.lk, cfg));
  attncheck::oracle_result ref = attncheck::reference(c, opt);
  return {std::move(ref.o), std::move(ref.o_bound), std::move(ref.lse), std::move(ref.lse_bound)};
}

testing::AssertionResult o_within_bound(const problem& p, const naive_result& ref) {
  const auto& d = p.dims;
  for (std::int64_t b = 0; b < d.b; ++b)
    for (std::int64_t i = 0; i < d.lq; ++i)
      for (std::int64_t h = 0; h < d.hq; ++h)
        for (std::int64_t e = 0; e < d.dv; ++e) {
          const std::size_t at = static_cast<std::size_t>(((b * d.lq + i) * d.hq + h) * d.dv + e);
          const double got = p.o.get(b, i, h, e);
          const auto where = [&] {
            return testing::AssertionFailure() << p.line() << " O[" << b << "," << i << "," << h << "," << e << "]";
          };
          if (!std::isfinite(got)) return where() << " is " << got;
          if (!std::isfinite(ref.bound[at])) return where() << " has the bound " << ref.bound[at];
          if (!(std::fabs(got - ref.o[at]) <= ref.bound[at]))  // a NaN reference fails too
            return where() << " expected " << ref.o[at] << " got " << got << " bound " << ref.bound[at];
        }
  return testing::AssertionSuccess();
}

}  // namespace attnimpl_test
