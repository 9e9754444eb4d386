// materialize(): the tensors and mask of a case, drawn from its header alone.
// Integer hashing plus exact operations (+ - * /, sqrt, ldexp, ilogb, which
// IEEE 754 rounds correctly or performs exactly), then one rounding to the
// storage type, so the bits agree on every machine and compiler.
#include <algorithm>
#include <cmath>
#include <limits>

#include "attncheck/case.hpp"
#include "prng.hpp"

namespace attncheck {

namespace {

using detail::random_stream;

// Stream tags: one per consumer, so adding a draw to one never shifts another.
enum stream_tag : std::uint64_t {
  tag_q = 1,
  tag_k,
  tag_v,
  tag_mask,
  tag_dominant,
  tag_poison,
  tag_offset,
  tag_sinks,
  tag_alibi,
  tag_bias,
  tag_descales
};

// Largest |score| large_logits aims for: ~1e4 in f32 and bf16 (exp(s)
// overflows f32 beyond 88, so any kernel without the max shift breaks, while
// gamma_(D+5) T stays below 1, so the analytic bound is finite and O is judged,
// not only held to the hull); just under f16's 65504 for f16, where Q and K
// are stored near their own limits. Magnitudes up to 1e30 come from far_below
// and far_above.
double logit_target(dtype t) { return per_dtype(t, 1e4, 6e4, 1e4, 1e4, 1e4); }

// Offset of far_below / far_above rows: |scores| ~ 2^13 .. 2^100 (8e3 .. 1e30)
// in f32 and bf16 (f32's range, with room for the D-term sums), 2^13 .. 2^15
// in f16 (up to ~6e4, where Q and K stay well inside f16).
int offset_exponent_max(dtype t) { return t == dtype::f16 ? 15 : 100; }

// Score gap of the dominant key: exp(-30) ~ 1e-13 is below f32 resolution.
constexpr double dominant_gap = 30.0;

// Smallest normal exponent of the type: -126 (f32, bf16), -14 (f16).
int min_normal_exponent(dtype t) { return t == dtype::f16 ? -14 : -126; }

double clip(double x, dtype t) {
  const double m = largest_finite(t);
  return std::clamp(x, -m, m);
}

double sign_of(std::uint64_t bits) { return (bits & 1) ? -1.0 : 1.0; }

class value_source {
 public:
  explicit value_source(const attn_case& c)
      : c_(c), q_(c.seed, tag_q), k_(c.seed, tag_k), v_(c.seed, tag_v), dom_(c.seed, tag_dominant) {
    const double s = std::fabs(static_cast<double>(c.effective_scale()));
    const double dd = static_cast<double>(c.d);
    if (s > 0) {
      logit_amp_ = std::min(std::sqrt(logit_target(c.type) / (s * dd)), largest_finite(c.type));
      dominant_amp_ = std::min(2.0 * (dominant_gap / (s * dd) + 1.0), largest_finite(c.type));
    }
    if (c.effective_scale() < 0) dominant_amp_ = -dominant_amp_;
    if (s > 0) {
      // far_below / far_above / masked_lead: dimension 0 of every Q row is a,
      // of every K row -+b, with scale * a * b = C: every score is -+C plus the
      // O(1) scores of the other dimensions. C = m 2^e, m in [1, 2), e uniform.
      const random_stream off(c.seed, tag_offset);
      const int e = 13 + static_cast<int>(off.below(offset_exponent_max(c.type) - 13 + 1, {0}));
      const double target = std::ldexp(1.0 + off.uniform({1}), e);
      offset_q_ = std::min(std::sqrt(target / s), largest_finite(c.type) / 2);
      offset_k_ = std::min(target / (s * offset_q_), largest_finite(c.type) / 2);
      if (c.values == value_kind::far_below || c.values == value_kind::masked_lead) offset_k_ = -offset_k_;
      if (c.effective_scale() < 0) offset_k_ = -offset_k_;
      // underflow_gaps: dimension 0 of Q is 1, of K_j is -gap_j / scale with
      // gap_j in [0, 120]; the other dimensions are zero (exact scores).
      gap_unit_ = 1.0 / s;
      if (c.effective_scale() < 0) gap_unit_ = -gap_unit_;
    }
    // max_v: the largest |V| an f32 sum of Lk terms of weight <= 1 holds with
    // room (the bound's accumulator rule), and at most the type's own maximum.
    max_v_ = std::min(largest_finite(c.type), 0x1.fffffep127 / (4.0 * static_cast<double>(std::max<std::int64_t>(1, c.lk))));
  }

  double q(std::int64_t b, std::int64_t i, std::int64_t h, std::int64_t x) const {
    switch (c_.values) {
      case value_kind::dyadic: return dyadic(q_, b, i, h, x);
      case value_kind::uniform: return uniform(q_, b, i, h, x);
      case value_kind::large_logits: return logit_amp_ * signed_half_to_one(q_, b, i, h, x);
      case value_kind::dominant: return 0.5 + 0.5 * q_.uniform({b, i, h, x});  // positive: every row favours the big key
      case value_kind::far_below:
      case value_kind::far_above:
      case value_kind::masked_lead: return x == 0 ? offset_q_ : uniform(q_, b, i, h, x);
      case value_kind::underflow_gaps: return x == 0 ? 1.0 : 0.0;
      default: return q_.normal(b, i, h, x);
    }
  }

  double k(std::int64_t b, std::int64_t j, std::int64_t g, std::int64_t x) const {
    switch (c_.values) {
      case value_kind::dyadic: return dyadic(k_, b, j, g, x);
      case value_kind::uniform: return uniform(k_, b, j, g, x);
      case value_kind::large_logits: return logit_amp_ * signed_half_to_one(k_, b, j, g, x);
      case value_kind::dominant: return j == dominant_key(b, g) ? dominant_amp_ : uniform(k_, b, j, g, x);
      case value_kind::equal_keys: return k_.normal(0, 0, 0, x);  // one row, repeated everywhere
      case value_kind::far_below:
      case value_kind::far_above:
      case value_kind::masked_lead: return x == 0 ? offset_k_ : uniform(k_, b, j, g, x);
      // Clipped: with a tiny scale, -gap / scale may not fit the type (f16: 65504); a visible input stays finite.
      case value_kind::underflow_gaps: return x == 0 ? clip(-gap_unit_ * 120.0 * k_.uniform({b, j, g}), c_.type) : 0.0;
      default: return k_.normal(b, j, g, x);
    }
  }

  double v(std::int64_t b, std::int64_t j, std::int64_t g, std::int64_t e) const {
    switch (c_.values) {
      case value_kind::dyadic: return dyadic(v_, b, j, g, e);
      case value_kind::uniform: return uniform(v_, b, j, g, e);
      case value_kind::huge_v: {
        // |V| in 2^10 .. 2^101 (1e3 .. 2.5e30), capped at the type's top binade.
        const int top = std::min(100, std::ilogb(largest_finite(c_.type)));
        return clip(binade_value(v_, b, j, g, e, 10, top), c_.type);
      }
      case value_kind::tiny_v: {
        // Three binades below the smallest normal (subnormals) and three above.
        const int lo = min_normal_exponent(c_.type) - 3;
        return binade_value(v_, b, j, g, e, lo, lo + 5);
      }
      case value_kind::max_v: {
        const std::uint64_t bits = v_.bits({b, j, g, e});
        return clip(sign_of(bits) * max_v_ * (0.5 + static_cast<double>(bits >> 12) * 0x1p-53), c_.type);
      }
      default: return v_.normal(b, j, g, e);
    }
  }

  /// The key of (batch b, KV head g) that dominates; -1 when no key is valid.
  /// Under causal masking it is one every row with a visible key can see.
  std::int64_t dominant_key(std::int64_t b, std::int64_t g) const {
    const std::int64_t n = c_.valid_keys(b);
    if (n == 0) return -1;
    const std::int64_t range = c_.causal ? std::max<std::int64_t>(0, n - c_.lq) + 1 : n;
    return dom_.below(range, {b, g});
  }

 private:
  static double dyadic(const random_stream& r, std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d) {
    return static_cast<double>(r.below(17, {a, b, c, d}) - 8) / 4.0;  // k/4, k in [-8, 8]
  }
  static double uniform(const random_stream& r, std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d) {
    return 2.0 * r.uniform({a, b, c, d}) - 1.0;
  }
  // +-[0.5, 1): magnitudes bounded below, so scores spread up to the target.
  static double signed_half_to_one(const random_stream& r, std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d) {
    const std::uint64_t bits = r.bits({a, b, c, d});
    return sign_of(bits) * (0.5 + static_cast<double>(bits >> 12) * 0x1p-53);
  }
  // +-m * 2^e with m in [1, 2) and e uniform in [lo, hi].
  static double binade_value(const random_stream& r, std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d, int lo,
                             int hi) {
    const std::uint64_t bits = r.bits({a, b, c, d});
    const double m = 1.0 + static_cast<double>(bits >> 12) * 0x1p-52;
    const auto e = lo + static_cast<int>(r.below(hi - lo + 1, {a, b, c, d, 1}));
    return sign_of(bits) * std::ldexp(m, e);
  }

  const attn_case& c_;
  random_stream q_, k_, v_, dom_;
  double logit_amp_ = 1.0;
  double dominant_amp_ = 2.0;
  double offset_q_ = 1.0, offset_k_ = 1.0, gap_unit_ = 1.0, max_v_ = 1.0;
};

// Mask rows: one in eight all-false, one in eight all-true, the rest random
// bits at density 1/2, so masks are never only all-or-nothing. masked_lead:
// every row blanks keys [0, 2^k) for the largest 2^k < Lk (whole leading
// tiles of any power-of-two tile size) and allows the rest.
void fill_mask(attn_case& c) {
  const auto& s = c.mask_shape;
  c.mask.assign(static_cast<std::size_t>(s[0] * s[1] * s[2] * s[3]), 0);
  const random_stream r(c.seed, tag_mask);
  const std::int64_t rows = s[0] * s[1] * s[2];
  std::int64_t lead = 1;
  while (2 * lead < s[3]) lead *= 2;
  if (s[3] <= 1) lead = 0;
  for (std::int64_t row = 0; row < rows; ++row) {
    const std::int64_t kind = r.below(8, {row, -1});
    for (std::int64_t j = 0; j < s[3]; ++j) {
      const bool allowed = c.values == value_kind::masked_lead ? j >= lead
                           : kind == 0                         ? false
                           : kind == 1                         ? true
                                                               : (r.bits({row, j}) & 1) != 0;
      c.mask[static_cast<std::size_t>(row * s[3] + j)] = allowed ? 1 : 0;
    }
  }
}

// Poison NaN: negative, payload 0xdead-like, distinct from gap_sentinel.
// E4M3FN has one NaN per sign (0xff); e5m2's negative NaN with payload 01 is 0xfd.
std::uint32_t poison_nan(dtype t) { return per_dtype(t, 0xffc0deadu, 0xfe01u, 0xffc1u, 0xffu, 0xfdu); }

void poison_unused(attn_case& c) {
  const slot_usage used = used_slots(c);
  const random_stream r(c.seed, tag_poison);
  std::int64_t counter = 0;
  auto poison = [&](dtype t) -> std::uint32_t {
    if (c.poison == poison_kind::nan) return poison_nan(t);
    return encode(t, sign_of(r.bits({counter++})) * std::min(1e30, largest_finite(t)));
  };
  for (std::int64_t b = 0; b < c.b; ++b) {
    for (std::int64_t i = 0; i < c.lq; ++i)
      for (std::int64_t h = 0; h < c.hq; ++h)
        if (!used.query_row(c, b, i, h))
          for (std::int64_t x = 0; x < c.d; ++x) c.q.set_bits(b, i, h, x, poison(c.q.type));
    for (std::int64_t j = 0; j < c.lk; ++j)
      for (std::int64_t g = 0; g < c.hkv; ++g)
        if (!used.key(c, b, j, g)) {
          for (std::int64_t x = 0; x < c.d; ++x) c.k.set_bits(b, j, g, x, poison(c.k.type));
          for (std::int64_t e = 0; e < c.dv; ++e) c.v.set_bits(b, j, g, e, poison(c.v.type));
        }
  }
}

// 2^(-num / den) for num >= 0, den >= 1, from exact and correctly rounded
// IEEE operations only (sqrt, *, ldexp), so the same bits on every machine:
// the fraction's binary digits, found in integers, select the factors
// 2^(2^-k) = sqrt applied k times to 2.
double exp2_neg_rational(std::int64_t num, std::int64_t den) {
  const std::int64_t whole = num / den;
  std::int64_t rest = num % den;
  double value = 1.0, root = 2.0;
  for (int k = 1; k <= 60 && rest != 0; ++k) {
    root = std::sqrt(root);
    rest *= 2;
    if (rest >= den) {
      value *= root;
      rest -= den;
    }
  }
  return std::ldexp(1.0 / value, -static_cast<int>(std::min<std::int64_t>(whole, 2000)));
}

// The published ALiBi slopes (Press et al. 2022) for Hq heads: with n the
// largest power of two <= Hq, heads 0..n-1 get 2^(-8 (h+1) / n) and the
// remaining Hq - n heads the odd-indexed slopes of 2n heads, 2^(-8 (2k+1) / (2n))
// (BLOOM's rule for head counts that are not powers of two).
// Another max_bias m scales every exponent by m / 8 (ggml's m0 = 2^(-m/n),
// m1 = 2^(-m/(2n))): the exponent in binary64, then exp2.
double standard_alibi_slope(std::int64_t h, std::int64_t hq, double max_bias) {
  std::int64_t n = 1;
  while (2 * n <= hq) n *= 2;
  const std::int64_t num = h < n ? h + 1 : 2 * (h - n) + 1, den = h < n ? n : 2 * n;
  if (max_bias == 8) return exp2_neg_rational(8 * num, den);
  return std::exp2(-max_bias * static_cast<double>(num) / static_cast<double>(den));
}

double sink_value(sink_kind kind, const random_stream& r, std::int64_t h) {
  switch (kind) {
    case sink_kind::normal: return 2.0 * r.normal(h, 0, 0, 0);
    case sink_kind::high: return 8.0 + 56.0 * r.uniform({h, 1});
    case sink_kind::low: return -(8.0 + 56.0 * r.uniform({h, 1}));
    case sink_kind::neginf: return -std::numeric_limits<double>::infinity();
    case sink_kind::mixed: {
      static constexpr sink_kind pick[] = {sink_kind::normal, sink_kind::high, sink_kind::low, sink_kind::neginf};
      return sink_value(pick[r.below(4, {h, 2})], r, h);
    }
    case sink_kind::none: break;
  }
  return -std::numeric_limits<double>::infinity();
}

double alibi_value(alibi_kind kind, const random_stream& r, std::int64_t h, std::int64_t hq, double max_bias) {
  switch (kind) {
    case alibi_kind::standard: return standard_alibi_slope(h, hq, max_bias);
    case alibi_kind::random: {
      const std::uint64_t bits = r.bits({h});
      return sign_of(bits) * std::ldexp(1.0 + static_cast<double>(bits >> 12) * 0x1p-52, -static_cast<int>(r.below(11, {h, 1})));
    }
    case alibi_kind::zero:
    case alibi_kind::none: break;
  }
  return 0.0;
}

// The bias over its broadcast shape. masking: one row in eight and one column
// in eight all -inf, and one entry in eight of the rest -inf, so rows with no
// visible key occur (where the sink alone decides LSE).
void fill_bias(attn_case& c) {
  score_variants& w = c.variants;
  const auto& s = w.bias_shape;
  w.bias = tensor::contiguous(w.bias_type, s);
  const random_stream r(c.seed, tag_bias);
  const double neg_inf = -std::numeric_limits<double>::infinity();
  for (std::int64_t a = 0; a < s[0]; ++a)
    for (std::int64_t h = 0; h < s[1]; ++h)
      for (std::int64_t i = 0; i < s[2]; ++i) {
        const std::int64_t row = (a * s[1] + h) * s[2] + i;
        for (std::int64_t j = 0; j < s[3]; ++j) {
          double x = r.normal(row, j, 0, 0);
          if (w.bias_values == bias_kind::huge) {
            const std::uint64_t bits = r.bits({row, j, 1});
            x = sign_of(bits) *
                std::ldexp(1.0 + static_cast<double>(bits >> 12) * 0x1p-52, 10 + static_cast<int>(r.below(5, {row, j, 2})));
          } else if (w.bias_values == bias_kind::masking &&
                     (r.below(8, {row, -1}) == 0 || r.below(8, {-1, j}) == 0 || r.below(8, {row, j, 3}) == 0)) {
            x = neg_inf;
          }
          w.bias.set(a, h, i, j, x);
        }
      }
}

// Sinks, ALiBi slopes and the bias, each from its own stream.
void fill_variants(attn_case& c) {
  score_variants& w = c.variants;
  const auto hq = static_cast<std::size_t>(c.hq);
  if (w.has_sinks()) {
    const random_stream r(c.seed, tag_sinks);
    w.sink_logits.resize(hq);
    for (std::size_t h = 0; h < hq; ++h)
      w.sink_logits[h] = static_cast<float>(sink_value(w.sinks, r, static_cast<std::int64_t>(h)));
  }
  if (w.has_alibi()) {
    const random_stream r(c.seed, tag_alibi);
    w.alibi_slopes.resize(hq);
    for (std::size_t h = 0; h < hq; ++h)
      w.alibi_slopes[h] = static_cast<float>(alibi_value(w.alibi, r, static_cast<std::int64_t>(h), c.hq, w.alibi_max_bias));
  }
  if (w.has_bias()) fill_bias(c);
}

// Every descale drawn lies in [2^-120, 2^110]: a normal f32, and 57344 times
// it stays below f32's largest value, so every dequantized value is one f32 holds.
constexpr float lowest_descale = 0x1p-120f, highest_descale = 0x1p110f;

// The natural descale of one group of an fp8 tensor: absmax / the format's
// largest value, rounded up to f32 so that every value fits (1 for an
// all-zero group), within [2^-120, 2^100] (tiny values then quantize coarsely,
// which is the caller's business); 1 for the unit recipe.
float natural_descale(descale_kind kind, double absmax, dtype t) {
  if (kind == descale_kind::unit || !(absmax > 0) || !std::isfinite(absmax)) return 1.0f;
  float s = static_cast<float>(absmax / largest_finite(t));
  if (static_cast<double>(s) * largest_finite(t) < absmax) s = std::nextafter(s, 2 * s);
  return std::clamp(s, lowest_descale, 0x1p100f);
}

// The recipe's power of two on a group's descale: wide 2^[-20, 20], spread
// one of 2^-12, 1, 2^12; 1 for the others.
int descale_exponent(descale_kind kind, const random_stream& r, std::int64_t tensor_tag, std::int64_t group) {
  if (kind == descale_kind::wide) return static_cast<int>(r.below(41, {tensor_tag, group})) - 20;
  if (kind == descale_kind::spread) return 12 * (static_cast<int>(r.below(3, {tensor_tag, group})) - 1);
  return 0;
}

// One fp8 tensor of the case (docs/spec.md "fp8 storage"): its values, drawn
// as the recipe says in the case's type, divided by their group's natural
// descale and rounded to the fp8 type, saturating at its largest value
// (quantizing is the caller's business: the case is what it holds). The
// descale stored is the natural one times the recipe's power of two, so the
// values the oracle computes on are the drawn ones, rounded, times it.
void quantize(attn_case& c, tensor& x, dtype t, descale_granularity g, std::vector<float>& descales, bool query,
              std::int64_t tensor_tag) {
  const random_stream r(c.seed, tag_descales);
  const std::int64_t heads = query ? c.hq : c.hkv;
  const std::int64_t groups = g == descale_granularity::head ? c.b * heads : 1;
  const auto group_of = [&](std::int64_t bi, std::int64_t h) { return g == descale_granularity::head ? bi * heads + h : 0; };
  std::vector<double> absmax(static_cast<std::size_t>(groups), 0.0);
  for (std::int64_t bi = 0; bi < x.shape[0]; ++bi)
    for (std::int64_t l = 0; l < x.shape[1]; ++l)
      for (std::int64_t h = 0; h < x.shape[2]; ++h)
        for (std::int64_t e = 0; e < x.shape[3]; ++e) {
          const double v = std::fabs(x.at(bi, l, h, e));
          double& m = absmax[static_cast<std::size_t>(group_of(bi, h))];
          if (std::isfinite(v)) m = std::max(m, v);
        }
  // Without a descale the values are stored as they are (s = 1); with one, at its natural size.
  std::vector<float> natural(absmax.size(), 1.0f);
  descales.clear();
  for (std::int64_t k = 0; k < groups && g != descale_granularity::none; ++k) {
    const auto kk = static_cast<std::size_t>(k);
    natural[kk] = natural_descale(c.quant.descales, absmax[kk], t);
    descales.push_back(std::clamp(std::ldexp(natural[kk], descale_exponent(c.quant.descales, r, tensor_tag, k)), lowest_descale,
                                  highest_descale));
  }
  tensor out = x;
  out.type = t;
  const double top = largest_finite(t);
  for (std::size_t i = 0; i < out.bits.size(); ++i) out.bits[i] = encode(t, decode(x.type, x.bits[i]));  // gaps: NaN
  for (std::int64_t bi = 0; bi < x.shape[0]; ++bi)
    for (std::int64_t l = 0; l < x.shape[1]; ++l)
      for (std::int64_t h = 0; h < x.shape[2]; ++h)
        for (std::int64_t e = 0; e < x.shape[3]; ++e) {
          const float s = natural[static_cast<std::size_t>(group_of(bi, h))];
          double v = x.at(bi, l, h, e) / static_cast<double>(s);
          if (std::isfinite(v)) v = std::clamp(v, -top, top);
          const std::int64_t at = x.index(bi, l, h, e);
          if (c.quant.descales == descale_kind::edges && r.below(4, {tensor_tag, at, 1}) == 0) {
            // The format's edges: its largest value, its smallest normal, its smallest and largest subnormals.
            const double eta = smallest_subnormal(t), min_normal = eta / limits_of(t).unit_roundoff / 2;
            const double edge[] = {top, min_normal, eta, min_normal - eta};
            v = sign_of(r.bits({tensor_tag, at, 2})) * edge[r.below(4, {tensor_tag, at, 3})];
          }
          out.set(bi, l, h, e, v);
        }
  x = std::move(out);
}

void quantize_inputs(attn_case& c) {
  quantization& z = c.quant;
  for (std::size_t k = 0; k < std::size(fp8_inputs); ++k) {  // tensor tag k: Q 0, K 1, V 2
    const fp8_input& x = fp8_inputs[k];
    if (z.*x.type) quantize(c, c.*x.values, *(z.*x.type), z.*x.scale, z.*x.descale, x.query, static_cast<std::int64_t>(k));
  }
}

}  // namespace

void materialize(attn_case& c, const case_limits& limits) {
  // The header alone decides the result: drop whatever tensors were there.
  c.q = tensor{};
  c.k = tensor{};
  c.v = tensor{};
  c.mask.clear();
  c.variants.sink_logits.clear();
  c.variants.alibi_slopes.clear();
  c.variants.bias = tensor{};
  c.quant.q_descale.clear(), c.quant.k_descale.clear(), c.quant.v_descale.clear();
  validate(c, false, limits);

  if (c.has_mask()) fill_mask(c);
  fill_variants(c);  // before the poison: a -inf bias entry hides its key
  c.q = make_tensor(c.type, {c.b, c.lq, c.hq, c.d}, c.layout);
  c.k = make_tensor(c.type, {c.b, c.lk, c.hkv, c.d}, c.layout);
  c.v = make_tensor(c.type, {c.b, c.lk, c.hkv, c.dv}, c.layout);

  const value_source src(c);
  for (std::int64_t b = 0; b < c.b; ++b) {
    for (std::int64_t i = 0; i < c.lq; ++i)
      for (std::int64_t h = 0; h < c.hq; ++h)
        for (std::int64_t x = 0; x < c.d; ++x) c.q.set(b, i, h, x, src.q(b, i, h, x));
    for (std::int64_t j = 0; j < c.lk; ++j)
      for (std::int64_t g = 0; g < c.hkv; ++g) {
        for (std::int64_t x = 0; x < c.d; ++x) c.k.set(b, j, g, x, src.k(b, j, g, x));
        for (std::int64_t e = 0; e < c.dv; ++e) c.v.set(b, j, g, e, src.v(b, j, g, e));
      }
  }
  // A shared prefix (docs/spec.md "Paged KV"): the first shared_pages pages'
  // keys of every sequence are batch element 0's, so one set of pages serves all.
  const std::int64_t shared = std::min(c.lk, c.form.shared_pages * c.form.page_size);
  for (std::int64_t b = 1; b < c.b; ++b)
    for (std::int64_t j = 0; j < shared; ++j)
      for (std::int64_t g = 0; g < c.hkv; ++g) {
        for (std::int64_t x = 0; x < c.d; ++x) c.k.set_bits(b, j, g, x, c.k.bits_at(0, j, g, x));
        for (std::int64_t e = 0; e < c.dv; ++e) c.v.set_bits(b, j, g, e, c.v.bits_at(0, j, g, e));
      }
  quantize_inputs(c);  // before the poison: a poisoned slot holds the fp8 type's NaN or largest value
  if (c.poison != poison_kind::none) poison_unused(c);
}

}  // namespace attncheck
