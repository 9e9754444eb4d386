// Independence laws: batch elements do not interact, masked slots are
// ignored, a padded sequence equals it truncated.
#include <algorithm>
#include <bit>
#include <limits>
#include <optional>

#include "law_support.hpp"
#include "registry.hpp"

namespace attncheck::laws {

namespace {

attn_case batch_slice(const attn_case& c, std::int64_t bi) {
  attn_case r = c;
  r.b = 1;
  if (!c.key_len.empty()) r.key_len = {c.key_len[static_cast<std::size_t>(bi)]};
  if (c.has_mask()) {
    r.mask_shape[0] = 1;
    const std::int64_t per = c.mask_shape[1] * c.mask_shape[2] * c.mask_shape[3];
    const std::int64_t from = c.mask_shape[0] == 1 ? 0 : bi * per;
    r.mask.assign(c.mask.begin() + from, c.mask.begin() + from + per);
  }
  auto slice = [&](const tensor& t) {
    return remake(t.type, {1, t.shape[1], t.shape[2], t.shape[3]}, c.layout,
                  [&](auto, auto j, auto g, auto x) { return t.bits_at(bi, j, g, x); });
  };
  r.q = slice(c.q), r.k = slice(c.k), r.v = slice(c.v);
  return r;
}

// The rows of batch element bi of a whole-batch output, as a B = 1 output.
subject_output batch_rows(const subject_output& whole, const attn_case& c, std::int64_t bi) {
  subject_output r;
  r.empty_rows = whole.empty_rows;
  r.o =
      remake(c.type, {1, c.lq, c.hq, c.dv}, c.layout, [&](auto, auto i, auto h, auto e) { return whole.o.bits_at(bi, i, h, e); });
  if (!whole.lse.empty()) r.lse.assign(whole.lse.begin() + bi * c.hq * c.lq, whole.lse.begin() + (bi + 1) * c.hq * c.lq);
  return r;
}

}  // namespace

void prepare_batch(attn_case& c, const subject&) {
  // B = 1 has nothing to interact with: add a second batch element.
  if (c.b >= 2) return;
  c.b = 2;
  if (!c.key_len.empty()) {
    law_rng rng(c, 0xba7c);
    c.key_len.push_back(rng.below(c.lk + 1));
  }
  if (c.has_mask() && c.mask_shape[0] != 1) c.mask_shape[0] = c.b;
}

law_outcome batch_elements_are_independent(const subject& s, const attn_case& c) {
  law_outcome o;
  if (c.b < 2) return o.nothing_to_judge("B = 1: no other batch element");
  const auto whole = s.attend(c);
  if (run_failed(whole, o, "batch run")) return o;
  for (std::int64_t bi = 0; bi < c.b; ++bi) {
    const attn_case one = batch_slice(c, bi);
    const auto alone = s.attend(one);
    if (run_failed(alone, o, "batch element alone")) return o;
    o.add("batch element " + std::to_string(bi) + " alone vs in the batch",
          compare_claimed(s, ATTNCHECK_CLAIM_BATCH, one, batch_rows(whole, c, bi), alone));
    if (o.v == verdict::fail) return o;
  }
  return o;
}

void prepare_masked_slots(attn_case& c, const subject& s) {
  // Without any mask every slot is used: cut each sequence short instead.
  if (c.key_len.empty() && !c.has_mask() && s.has(ATTNCHECK_FEATURE_PADDING)) {
    law_rng rng(c, 0x510f5);
    for (std::int64_t b = 0; b < c.b; ++b) c.key_len.push_back(rng.below(c.lk));
  }
}

law_outcome masked_slots_are_ignored(const subject& s, const attn_case& c) {
  law_outcome o;
  // Every slot no visible pair uses gets NaN, then +-big; the bits must not move.
  const auto base = s.attend(c);
  if (run_failed(base, o, "base run")) return o;
  const slot_usage used = used_slots(c);
  if (std::all_of(used.keys.begin(), used.keys.end(), [](auto u) { return u != 0; }) &&
      std::all_of(used.query_rows.begin(), used.query_rows.end(), [](auto u) { return u != 0; }))
    o.nothing_to_judge("every slot is used");
  for (poison_kind pk : {poison_kind::nan, poison_kind::big}) {
    attn_case p = c;
    const double big = std::min(1e30, largest_finite(c.type));
    auto bits = [&](std::int64_t salt) {
      return pk == poison_kind::nan ? nan_bits(c.type) : encode(c.type, (salt & 1) ? big : -big);
    };
    for (std::int64_t b = 0; b < c.b; ++b) {
      for (std::int64_t j = 0; j < c.lk; ++j)
        for (std::int64_t g = 0; g < c.hkv; ++g) {
          if (used.key(c, b, j, g)) continue;
          for (std::int64_t x = 0; x < c.d; ++x) p.k.set_bits(b, j, g, x, bits(x + j));
          for (std::int64_t x = 0; x < c.dv; ++x) p.v.set_bits(b, j, g, x, bits(x + j + 1));
        }
      for (std::int64_t i = 0; i < c.lq; ++i)
        for (std::int64_t h = 0; h < c.hq; ++h)
          if (!used.query_row(c, b, i, h))
            for (std::int64_t x = 0; x < c.d; ++x) p.q.set_bits(b, i, h, x, bits(x + i));
    }
    const auto out = s.attend(p);
    if (run_failed(out, o, "poisoned run")) return o;
    // A subject that weights masked slots by zero gets the host's finite fill
    // instead (masked_fill.hpp), at its full and its half magnitudes (the base
    // run at the case's poison's), so that finite content must not matter.
    const std::string what = !s.weights_masked_by_zero() ? std::string(name(pk))
                             : pk == poison_kind::nan    ? "the finite fill (largest magnitudes)"
                                                         : "the finite fill (half magnitudes)";
    o.add(what + " in every unused slot", compare_claimed(s, ATTNCHECK_CLAIM_DETERMINISTIC, c, base, out));
  }
  return o;
}

void prepare_padding(attn_case& c, const subject& s) {
  if (!s.has(ATTNCHECK_FEATURE_PADDING)) return;
  // A sequence shorter than Lk and not empty needs Lk >= 2.
  if (c.lk < 2) {
    c.lk = 2;
    if (c.has_mask() && c.mask_shape[3] != 1) c.mask_shape[3] = c.lk;
  }
  law_rng rng(c, 0x9add);
  if (c.key_len.empty())
    for (std::int64_t b = 0; b < c.b; ++b) c.key_len.push_back(rng.below(c.lk + 1));
  // At least one sequence really padded: 1 <= n < Lk.
  auto& n = c.key_len[static_cast<std::size_t>(c.seed % static_cast<std::uint64_t>(c.b))];
  if (n < 1 || n >= c.lk) n = 1 + rng.below(c.lk - 1);
}

law_outcome padding_equals_truncation(const subject& s, const attn_case& c) {
  law_outcome o;
  if (std::none_of(c.key_len.begin(), c.key_len.end(), [&](std::int64_t n) { return n >= 1 && n < c.lk; }))
    return o.nothing_to_judge("no sequence is padded (1 <= n < Lk)");
  const auto padded = s.attend(c);
  if (run_failed(padded, o, "padded run")) return o;
  for (std::int64_t bi = 0; bi < c.b; ++bi) {
    const std::int64_t n = c.key_len[static_cast<std::size_t>(bi)];
    if (n == 0) continue;  // an empty sequence has no truncated form; fully_masked covers it
    attn_case t = batch_slice(c, bi);
    t.key_len.clear();
    t.lk = n;
    if (t.has_mask()) {
      // Keep the first n columns of the mask.
      const auto ms = t.mask_shape;
      std::vector<std::uint8_t> m;
      const std::int64_t cols = ms[3];
      const std::int64_t keep = cols == 1 ? 1 : n;
      for (std::int64_t r = 0; r < ms[0] * ms[1] * ms[2]; ++r)
        for (std::int64_t j = 0; j < keep; ++j) m.push_back(t.mask[static_cast<std::size_t>(r * cols + j)]);
      t.mask = m;
      t.mask_shape[3] = keep;
    }
    t.k = remake(c.type, {1, n, c.hkv, c.d}, c.layout, [&](auto, auto j, auto g, auto x) { return c.k.bits_at(bi, j, g, x); });
    t.v = remake(c.type, {1, n, c.hkv, c.dv}, c.layout, [&](auto, auto j, auto g, auto x) { return c.v.bits_at(bi, j, g, x); });
    const auto trunc = s.attend(t);
    if (run_failed(trunc, o, "truncated run")) return o;
    const oracle_result reft = fast_bound(s, t);
    // Rows are independent, so the bound of the slice is the slice of the bound.
    const attn_case one = batch_slice(c, bi);
    o.add("batch element " + std::to_string(bi) + " padded to " + std::to_string(c.lk) + " vs truncated to " + std::to_string(n),
          compare_within_bounds(one, batch_rows(padded, c, bi), fast_bound(s, one), trunc, reft));
    if (o.v == verdict::fail) return o;
  }
  return o;
}

}  // namespace attncheck::laws
