// reference_backward(): the backward oracle's public entry, mpfr50 rounded once
// to double, and draw_grad_output(): dO from a case's seed.
#include "attncheck/backward_oracle.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "../contract/prng.hpp"
#include "backward_bound.hpp"
#include "naive_backward.hpp"

namespace attncheck {

namespace {

// dO's stream: a tag of its own, far from materialize()'s small ones, so dO
// never repeats Q, K or V's draws and adding it moved none of them.
constexpr std::uint64_t tag_grad = 0x67726164'5f644f00ull;  // "grad_dO"

// The rows of an adversarial dO, one shape per row, each hostile to a
// different step of a backward kernel.
enum class adversarial_row : std::uint8_t {
  binades,      ///< +-m 2^e, e in [-24, 24]: dP and D mix magnitudes 2^48 apart
  zero,         ///< all +0: dS = 0 exactly, the row must add nothing
  tiny,         ///< near the type's smallest normal, subnormals included: products underflow
  alternating,  ///< (-1)^e (1 + k/1024): dP = dO V^T cancels when V's columns are alike
  huge,         ///< near max / (8 max(Dv, Lk)): dP and the dV sums near the type's limit
};
constexpr std::int64_t adversarial_rows = 5;

double grad_value(const attn_case& c, grad_kind kind, const detail::random_stream& r, std::int64_t bi, std::int64_t i,
                  std::int64_t h, std::int64_t e) {
  const double top = largest_finite(c.type);
  const std::uint64_t bits = r.bits({bi, i, h, e});
  const double sign = (bits & 1) ? -1.0 : 1.0;
  const double mantissa = 1.0 + static_cast<double>(bits >> 12) * 0x1p-52;  // [1, 2)
  switch (kind) {
    case grad_kind::dyadic: return static_cast<double>(r.below(17, {bi, i, h, e}) - 8) / 4.0;
    case grad_kind::normal: return r.normal(bi, i, h, e);
    case grad_kind::adversarial: break;
  }
  switch (static_cast<adversarial_row>(r.below(adversarial_rows, {bi, i, h, -1}))) {
    case adversarial_row::binades:
      return std::clamp(sign * std::ldexp(mantissa, static_cast<int>(r.below(49, {bi, i, h, e, 1})) - 24), -top, top);
    case adversarial_row::zero: return 0.0;
    case adversarial_row::tiny: {
      const int lo = (c.type == dtype::f16 ? -14 : -126) - 3;  // three binades below the smallest normal, three above
      return sign * std::ldexp(mantissa, lo + static_cast<int>(r.below(6, {bi, i, h, e, 1})));
    }
    case adversarial_row::alternating:
      return ((e & 1) ? -1.0 : 1.0) * (1.0 + static_cast<double>(r.below(8, {bi, i, h, e, 1})) / 1024.0);
    case adversarial_row::huge: return sign * 0.5 * mantissa * top / (8.0 * static_cast<double>(std::max(c.dv, c.lk)));
  }
  return 0.0;
}

void check_grad_output(const attn_case& c, const tensor& d_o) {
  if (d_o.shape != output_shape(c)) throw input_error("d_o", "shape must be (B, Lq, Hq, Dv) of the case");
  if (d_o.type != c.type) throw input_error("d_o", "storage type must be the case's " + std::string(name(c.type)));
  if (!view_in_bounds(d_o)) throw input_error("d_o", "view leaves its storage");
}

std::vector<double> rounded(const std::vector<oracle_detail::mpfr50>& x) {
  std::vector<double> out(x.size());
  for (std::size_t k = 0; k < x.size(); ++k) out[k] = static_cast<double>(x[k]);
  return out;
}

}  // namespace

tensor draw_grad_output(const attn_case& c, grad_kind kind) {
  tensor d_o = make_tensor(c.type, output_shape(c), c.layout);
  const detail::random_stream r(c.seed, tag_grad);
  for (std::int64_t bi = 0; bi < c.b; ++bi)
    for (std::int64_t i = 0; i < c.lq; ++i)
      for (std::int64_t h = 0; h < c.hq; ++h)
        for (std::int64_t e = 0; e < c.dv; ++e) d_o.set(bi, i, h, e, grad_value(c, kind, r, bi, i, h, e));
  return d_o;
}

namespace {

backward_result run_backward(const attn_case& c, const tensor& d_o, const backward_bound_params* bound) {
  validate(c);
  check_grad_output(c, d_o);
  if (bound) oracle_detail::check_backward_bound_params(*bound);
  using oracle_detail::mpfr50;
  const auto fwd = oracle_detail::naive_attention<mpfr50>(c);
  const auto g = oracle_detail::naive_backward<mpfr50>(c, d_o, fwd);
  backward_result r;
  r.dq_shape = {c.b, c.lq, c.hq, c.d};
  r.dk_shape = {c.b, c.lk, c.hkv, c.d};
  r.dv_shape = {c.b, c.lk, c.hkv, c.dv};
  r.dq = rounded(g.dq);
  r.dk = rounded(g.dk);
  r.dv = rounded(g.dv);
  r.d_sinks = rounded(g.d_sinks);
  r.o = rounded(fwd.o);
  r.lse = rounded(fwd.lse);
  if (bound) oracle_detail::fill_backward_bounds(c, d_o, fwd, *bound, r);
  return r;
}

}  // namespace

backward_result reference_backward(const attn_case& c, const tensor& d_o) { return run_backward(c, d_o, nullptr); }

backward_result reference_backward(const attn_case& c, const tensor& d_o, const backward_bound_params& bound) {
  return run_backward(c, d_o, &bound);
}

}  // namespace attncheck
