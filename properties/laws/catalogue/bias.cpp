// The ALiBi and bias laws (docs/spec.md, "ALiBi" and "Additive bias"):
// ALiBi equals the bias tensor of its values (and slope 0 equals none), a
// constant added to a whole bias row changes nothing, a -inf bias entry
// equals the boolean mask, and a broadcast bias equals the bias materialized.
#include <algorithm>
#include <cmath>
#include <limits>

#include "law_support.hpp"
#include "registry.hpp"

namespace attncheck::laws {

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

// A bias on every case where the generator drew none: a broadcast shape and
// a storage type from the case's seed (one the subject takes), N(0, 1)
// values (or the masking recipe).
void ensure_bias(attn_case& c, bias_kind values, const subject& s) {
  score_variants& w = c.variants;
  law_rng rng(c, 0xb1a5);
  if (!w.has_bias()) {
    const std::int64_t dims = rng.below(16);
    w.bias_shape = {(dims & 1) ? c.b : 1, (dims & 2) ? c.hq : 1, (dims & 4) ? c.lq : 1, (dims & 8) ? c.lk : 1};
    w.bias_type = s.limits().bias_type_taken(static_cast<dtype>(rng.below(3)));
    w.bias_values = values;
  }
  if (values == bias_kind::masking) w.bias_values = values;
}

// The bias of c as a tensor of the full shape (B, Hq, Lq, Lk) in `type` (f32
// unless the subject's limits take the bias in another type only), each
// entry value(b, h, i, j) rounded to it; the largest rounding |fl(x) - x| of
// a visible entry of row (b, h, i) goes to gap.
tensor full_bias(const attn_case& c, dtype type,
                 const std::function<double(std::int64_t, std::int64_t, std::int64_t, std::int64_t)>& value,
                 std::vector<double>& gap) {
  tensor t = tensor::contiguous(type, {c.b, c.hq, c.lq, c.lk});
  gap.assign(static_cast<std::size_t>(c.b * c.hq * c.lq), 0.0);
  for (std::int64_t bi = 0; bi < c.b; ++bi)
    for (std::int64_t h = 0; h < c.hq; ++h)
      for (std::int64_t i = 0; i < c.lq; ++i)
        for (std::int64_t j = 0; j < c.lk; ++j) {
          const double x = value(bi, h, i, j);
          const double f = type == dtype::f32 ? static_cast<double>(static_cast<float>(x)) : decode(type, encode(type, x));
          t.set(bi, h, i, j, f);
          if (std::isfinite(x) && c.visible(bi, h, i, j)) {
            double& g = gap[static_cast<std::size_t>((bi * c.hq + h) * c.lq + i)];
            g = std::max(g, std::fabs(f - x));
          }
        }
  return t;
}

void set_bias(attn_case& c, tensor t) {
  c.variants.bias_shape = t.shape;
  c.variants.bias_type = t.type;
  c.variants.bias = std::move(t);
}

std::size_t row_of(const attn_case& c, std::int64_t bi, std::int64_t h, std::int64_t i) {
  return static_cast<std::size_t>((bi * c.hq + h) * c.lq + i);
}

}  // namespace

// ALiBi on every case (standard slopes or both signs, as the subject's limits
// take them), no bias (the law builds its own).
void prepare_alibi(attn_case& c, const subject& s) {
  if (!c.variants.has_alibi()) c.variants.alibi = law_rng(c, 0xa11b1).below(2) ? alibi_kind::standard : alibi_kind::random;
  c.variants.bias_shape = {};
  s.limits().fit_variants(c);
}

law_outcome alibi_equals_explicit_bias(const subject& s, const attn_case& c) {
  law_outcome o;
  if (!c.variants.has_alibi() || c.variants.has_bias()) return o.nothing_to_judge("needs ALiBi and no bias");
  law_rng rng(c, 0xa11b2);
  attn_case a = c, b = without_variant(c, ATTNCHECK_FEATURE3_ALIBI);
  std::vector<double> gap(row_of(c, c.b, 0, 0), 0.0);
  std::string what;
  const dtype type = s.limits().bias_type_taken(dtype::f32);
  score_variants zero_slopes;
  zero_slopes.alibi = alibi_kind::zero;
  if (rng.below(4) == 0 && s.limits().takes_alibi(zero_slopes)) {  // slope 0 against no ALiBi
    a.variants.alibi = alibi_kind::zero;
    a.variants.alibi_max_bias = 8;
    std::fill(a.variants.alibi_slopes.begin(), a.variants.alibi_slopes.end(), 0.0f);
    what = "ALiBi with every slope 0 against no ALiBi";
  } else {  // the slopes' terms m_h (j - p), exact in binary64, as an f32 bias
    set_bias(b, full_bias(
                    c, type, [&](auto bi, auto h, auto i, auto j) { return c.alibi_at(bi, h, i, j); }, gap));
    what = "ALiBi against the " + std::string(name(type)) + " bias of its terms m_h (j - p)";
  }
  const double vmax = max_abs_v(c);
  within_bounds_options opt;
  opt.o_gap = [&](std::int64_t bi, std::int64_t h, std::int64_t i) { return 2 * vmax * gap[row_of(c, bi, h, i)]; };
  opt.lse_gap = [&](std::int64_t bi, std::int64_t h, std::int64_t i) { return gap[row_of(c, bi, h, i)]; };
  add_runs_within_bounds(o, s, a, "ALiBi", b, "explicit", what, opt);
  return o;
}

// A bias on every case, no sinks (a sink does not move with the bias row).
void prepare_row_constant(attn_case& c, const subject& s) {
  ensure_bias(c, bias_kind::normal, s);
  c.variants.sinks = sink_kind::none;
}

law_outcome row_constant_changes_nothing(const subject& s, const attn_case& c) {
  law_outcome o;
  if (!c.variants.has_bias() || c.variants.has_sinks()) return o.nothing_to_judge("needs a bias and no sinks");
  // Per row a constant t: small dyadic in half the cases, 1e3..1e4 in the other.
  law_rng rng(c, 0xc0457);
  const bool big = rng.below(2) == 1;
  std::vector<double> t(row_of(c, c.b, 0, 0));
  for (auto& x : t) {
    x = static_cast<double>(rng.below(33) - 16) / 2;
    if (big) x = std::round(1e3 + 9e3 * static_cast<double>(rng.below(1024)) / 1024.0) * (rng.below(2) ? -1 : 1);
  }
  attn_case b = c;
  std::vector<double> gap;
  const dtype type = s.limits().bias_type_taken(dtype::f32);
  set_bias(b,
           full_bias(
               c, type, [&](auto bi, auto h, auto i, auto j) { return c.bias_at(bi, h, i, j) + t[row_of(c, bi, h, i)]; }, gap));
  const double vmax = max_abs_v(c);
  within_bounds_options opt;
  opt.o_gap = [&](std::int64_t bi, std::int64_t h, std::int64_t i) { return 2 * vmax * gap[row_of(c, bi, h, i)]; };
  opt.lse_gap = [&](std::int64_t bi, std::int64_t h, std::int64_t i) { return gap[row_of(c, bi, h, i)]; };
  opt.lse_offset = [&](std::int64_t bi, std::int64_t h, std::int64_t i) { return t[row_of(c, bi, h, i)]; };
  add_runs_within_bounds(o, s, c, "bias", b, "bias plus a row constant",
                         std::string("a constant per bias row") + (big ? " (1e3..1e4)" : "") + ", the bias made " +
                             std::string(name(type)) + " and full",
                         opt);
  return o;
}

void prepare_masking(attn_case& c, const subject& s) { ensure_bias(c, bias_kind::masking, s); }

law_outcome minus_inf_equals_mask(const subject& s, const attn_case& c) {
  law_outcome o;
  if (!c.variants.has_bias()) return o.nothing_to_judge("no bias");
  // The same visibility from a boolean mask (the case's own AND the bias's
  // -inf entries), with each -inf entry replaced by +4096: a kernel that
  // reads the bias where the mask hides the key is seen.
  const tensor& bias = c.variants.bias;
  attn_case b = c;
  std::int64_t holes = 0;
  for (auto& bits : b.variants.bias.bits)
    if (decode(bias.type, bits) == -inf) bits = encode(bias.type, 4096.0), ++holes;
  if (holes == 0) return o.nothing_to_judge("no -inf bias entry");
  b.mask_shape = {c.b, c.hq, c.lq, c.lk};
  b.mask.assign(static_cast<std::size_t>(c.b * c.hq * c.lq * c.lk), 0);
  for (std::int64_t bi = 0; bi < c.b; ++bi)
    for (std::int64_t h = 0; h < c.hq; ++h)
      for (std::int64_t i = 0; i < c.lq; ++i)
        for (std::int64_t j = 0; j < c.lk; ++j)
          b.mask[static_cast<std::size_t>(((bi * c.hq + h) * c.lq + i) * c.lk + j)] =
              c.mask_allows(bi, h, i, j) && c.bias_at(bi, h, i, j) != -inf;
  add_runs_within_bounds(o, s, c, "-inf bias", b, "boolean mask",
                         std::to_string(holes) + " -inf bias entries against the boolean mask");
  return o;
}

// A bias broadcast over at least one dim of size > 1 where the case allows one.
void prepare_broadcast(attn_case& c, const subject& s) {
  ensure_bias(c, c.variants.bias_values, s);
  auto& shape = c.variants.bias_shape;
  const std::int64_t full[] = {c.b, c.hq, c.lq, c.lk};
  bool broadcast = false;
  for (int a = 0; a < 4; ++a) broadcast = broadcast || (shape[a] == 1 && full[a] > 1);
  if (broadcast) return;
  for (int a = 0; a < 4; ++a)
    if (full[a] > 1) {
      shape[a] = 1;
      return;
    }
}

law_outcome broadcast_equals_materialized(const subject& s, const attn_case& c) {
  law_outcome o;
  if (!c.variants.has_bias()) return o.nothing_to_judge("no bias");
  const auto& shape = c.variants.bias_shape;
  if (shape == dims4{c.b, c.hq, c.lq, c.lk}) return o.nothing_to_judge("the bias has no broadcast dim");
  attn_case b = c;
  tensor t = tensor::contiguous(c.variants.bias_type, {c.b, c.hq, c.lq, c.lk});
  for (std::int64_t bi = 0; bi < c.b; ++bi)
    for (std::int64_t h = 0; h < c.hq; ++h)
      for (std::int64_t i = 0; i < c.lq; ++i)
        for (std::int64_t j = 0; j < c.lk; ++j)
          t.set_bits(bi, h, i, j,
                     c.variants.bias.bits_at(shape[0] == 1 ? 0 : bi, shape[1] == 1 ? 0 : h, shape[2] == 1 ? 0 : i,
                                             shape[3] == 1 ? 0 : j));
  set_bias(b, std::move(t));
  add_runs_within_bounds(o, s, c, "broadcast bias", b, "materialized bias",
                         "bias of shape " + std::to_string(shape[0]) + "x" + std::to_string(shape[1]) + "x" +
                             std::to_string(shape[2]) + "x" + std::to_string(shape[3]) + " against it materialized");
  return o;
}

std::string alibi_and_bias(const subject& s) {
  const std::uint32_t f = s.features_v3();
  if (!(f & ATTNCHECK_FEATURE3_ALIBI)) return "subject does not declare alibi";
  return (f & ATTNCHECK_FEATURE3_BIAS) ? "" : "subject does not declare bias";
}

std::string bias_and_mask(const subject& s) {
  if (!(s.features_v3() & ATTNCHECK_FEATURE3_BIAS)) return "subject does not declare bias";
  return s.has(ATTNCHECK_FEATURE_MASK) ? "" : "subject takes no boolean mask";
}

}  // namespace attncheck::laws
