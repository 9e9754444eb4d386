// The finite fill of slots a subject weights by zero (masked_fill.hpp).
#include "attncheck/masked_fill.hpp"

#include <algorithm>
#include <cmath>

namespace attncheck {

namespace {

std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

double finite_fill::k_floor() const { return k.empty() ? 1.0 : *std::min_element(k.begin(), k.end()); }
double finite_fill::v_floor() const { return v.empty() ? 1.0 : *std::min_element(v.begin(), v.end()); }

std::uint32_t finite_fill::bits_at(const attn_case& c, fill_tensor which, std::int64_t b, std::int64_t row, std::int64_t head,
                                   std::int64_t x, int variant) const {
  const tensor& t = which == fill_tensor::q ? c.q : which == fill_tensor::k ? c.k : c.v;
  const std::vector<double>& m = which == fill_tensor::q ? q : which == fill_tensor::k ? k : v;
  const auto position = static_cast<std::uint64_t>(((b * t.shape[1] + row) * t.shape[2] + head) * t.shape[3] + x);
  return finite_fill_bits(t.type, m[static_cast<std::size_t>(x)], which, position, variant);
}

finite_fill finite_fill_of(const attn_case& c) { return finite_fill_of(c, used_slots(c)); }

finite_fill finite_fill_of(const attn_case& c, const slot_usage& used) {
  finite_fill f;
  f.q.assign(static_cast<std::size_t>(c.d), 0.0);
  f.k.assign(static_cast<std::size_t>(c.d), 0.0);
  f.v.assign(static_cast<std::size_t>(c.dv), 0.0);
  const auto widen = [](std::vector<double>& m, std::int64_t x, double value) {
    if (std::isfinite(value)) m[static_cast<std::size_t>(x)] = std::max(m[static_cast<std::size_t>(x)], std::fabs(value));
  };
  for (std::int64_t b = 0; b < c.b; ++b) {
    for (std::int64_t i = 0; i < c.lq; ++i)
      for (std::int64_t h = 0; h < c.hq; ++h)
        if (used.query_row(c, b, i, h))
          for (std::int64_t x = 0; x < c.d; ++x) widen(f.q, x, c.q.at(b, i, h, x));
    for (std::int64_t j = 0; j < c.lk; ++j)
      for (std::int64_t g = 0; g < c.hkv; ++g)
        if (used.key(c, b, j, g)) {
          for (std::int64_t x = 0; x < c.d; ++x) widen(f.k, x, c.k.at(b, j, g, x));
          for (std::int64_t e = 0; e < c.dv; ++e) widen(f.v, e, c.v.at(b, j, g, e));
        }
  }
  for (auto* m : {&f.q, &f.k, &f.v})
    for (double& x : *m)
      if (x == 0) x = 1;
  // A score formed from a fill and used content, or from two fills, is at
  // most max(scale, 1) sum_x |Q|_x |K|_x (the scale applied after the dot or
  // folded in first), and a folded scale forms scale |Q|_x or scale |K|_x.
  // Where that passes 2^100 (f32 overflows at 2^128), Q's and K's fills drop by
  // the power of two that brings it under: the used content's own pairs
  // are the case's, the fills' are then no worse.
  const double scale = std::max(1.0, std::fabs(static_cast<double>(c.effective_scale())));
  double dot = 0, folded = 0;
  for (std::size_t x = 0; x < f.q.size(); ++x) {
    dot += scale * f.q[x] * f.k[x];
    folded = std::max({folded, scale * f.q[x], scale * f.k[x]});
  }
  const double worst = std::max(dot, folded);
  if (worst > 0x1p100) {
    const double down = std::exp2(-std::ceil(std::log2(worst / 0x1p100)));
    for (auto* m : {&f.q, &f.k})
      for (double& x : *m) x *= down;
  }
  return f;
}

std::uint32_t finite_fill_bits(dtype t, double max, fill_tensor which, std::uint64_t position, int variant) {
  static constexpr double share[] = {1.0, 0.5, 0.75};
  const double sign = (mix(position * 3 + static_cast<std::uint64_t>(which) + 0x5eed) & 1) ? -1.0 : 1.0;
  const double m = std::min(max, largest_finite(t)) * share[std::clamp(variant, 0, 2)];
  return encode(t, sign * m);
}

int fill_variant(poison_kind p) { return p == poison_kind::nan ? 0 : p == poison_kind::big ? 1 : 2; }

attn_case with_finite_unused(const attn_case& c) {
  attn_case r = c;
  const slot_usage used = used_slots(c);
  const finite_fill f = finite_fill_of(c, used);
  const int variant = fill_variant(c.poison);
  for (std::int64_t b = 0; b < c.b; ++b) {
    for (std::int64_t i = 0; i < c.lq; ++i)
      for (std::int64_t h = 0; h < c.hq; ++h)
        if (!used.query_row(c, b, i, h))
          for (std::int64_t x = 0; x < c.d; ++x) r.q.set_bits(b, i, h, x, f.bits_at(c, fill_tensor::q, b, i, h, x, variant));
    for (std::int64_t j = 0; j < c.lk; ++j)
      for (std::int64_t g = 0; g < c.hkv; ++g)
        if (!used.key(c, b, j, g)) {
          for (std::int64_t x = 0; x < c.d; ++x) r.k.set_bits(b, j, g, x, f.bits_at(c, fill_tensor::k, b, j, g, x, variant));
          for (std::int64_t e = 0; e < c.dv; ++e) r.v.set_bits(b, j, g, e, f.bits_at(c, fill_tensor::v, b, j, g, e, variant));
        }
  }
  return r;
}

}  // namespace attncheck
