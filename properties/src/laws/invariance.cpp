// Bitwise laws: what a row cannot see never changes it; batch elements,
// masked slots, repeated runs, thread counts and layouts change nothing.
#include <algorithm>
#include <bit>
#include <limits>
#include <optional>

#include "law_support.hpp"
#include "registry.hpp"

namespace attncheck::laws {

namespace {

std::uint32_t nan_bits(dtype t) { return t == dtype::f32 ? 0x7fc00001u : (t == dtype::f16 ? 0x7e01u : 0x7fc1u); }

// Compares the O rows (and LSE) for which keep(b, h, i) holds, bit for bit.
comparison rows_bitwise(const attn_case& c, const subject_output& a, const subject_output& b,
                        const std::function<bool(std::int64_t, std::int64_t, std::int64_t)>& keep) {
  comparison r;
  for (std::int64_t bi = 0; bi < c.b; ++bi)
    for (std::int64_t h = 0; h < c.hq; ++h)
      for (std::int64_t i = 0; i < c.lq; ++i) {
        if (!keep(bi, h, i)) continue;
        for (std::int64_t e = 0; e < c.dv; ++e)
          r.exact(o_where(bi, i, h, e), a.o.bits_at(bi, i, h, e), b.o.bits_at(bi, i, h, e), a.o.at(bi, i, h, e), b.o.at(bi, i, h, e));
        if (!a.lse.empty()) {
          const float x = lse_of(a, c, c.lq, bi, h, i), y = lse_of(b, c, c.lq, bi, h, i);
          r.exact(lse_where(bi, h, i), std::bit_cast<std::uint32_t>(x), std::bit_cast<std::uint32_t>(y), x, y);
        }
      }
  return r;
}

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
  r.o = remake(c.type, {1, c.lq, c.hq, c.dv}, c.layout, [&](auto, auto i, auto h, auto e) { return whole.o.bits_at(bi, i, h, e); });
  if (!whole.lse.empty()) r.lse.assign(whole.lse.begin() + bi * c.hq * c.lq, whole.lse.begin() + (bi + 1) * c.hq * c.lq);
  return r;
}

// The same values with every element followed by a NaN gap (element stride 2):
// the three named layouts all keep the head dimension dense, and SPEC.md
// allows any element stride (mutant load_ignores_stride read past it unseen).
tensor element_strided(const tensor& t) {
  tensor r;
  r.type = t.type;
  r.shape = t.shape;
  const auto [nb, ns, nh, nx] = t.shape;
  r.stride = {ns * nh * nx * 2, nh * nx * 2, nx * 2, 2};
  r.bits.assign(static_cast<std::size_t>(nb * ns * nh * nx * 2), gap_sentinel(t.type));
  for (std::int64_t a = 0; a < nb; ++a)
    for (std::int64_t s = 0; s < ns; ++s)
      for (std::int64_t h = 0; h < nh; ++h)
        for (std::int64_t x = 0; x < nx; ++x) r.set_bits(a, s, h, x, t.bits_at(a, s, h, x));
  return r;
}

}  // namespace

void prepare_causal(attn_case& c, const subject& s) {
  if (s.has(ATTNCHECK_FEATURE_CAUSAL)) c.causal = true;
  // One query sees every key under causal alone: cut keys off with padding so
  // some key is invisible (the decode shape of a padded batch).
  if (c.lq == 1 && c.key_len.empty() && !c.has_mask() && s.has(ATTNCHECK_FEATURE_PADDING)) {
    law_rng rng(c, 0xca05a2);
    for (std::int64_t b = 0; b < c.b; ++b) c.key_len.push_back(rng.below(c.lk));
  }
}

namespace {

// +-1e30, or the type's largest finite value where 1e30 does not fit (f16).
std::uint32_t huge_bits(dtype t, std::int64_t salt) {
  const double big = std::min(1e30, largest_finite(t));
  return encode(t, (salt & 1) ? -big : big);
}

}  // namespace

law_outcome invisible_inputs_never_change_outputs(const subject& s, const attn_case& c) {
  law_outcome o;
  const auto base = s.attend(c);
  if (run_failed(base, o, "base run")) return o;
  law_rng rng(c, 0xca05a1);
  bool any_invisible = false;
  for (std::int64_t b = 0; b < c.b && !any_invisible; ++b)
    for (std::int64_t h = 0; h < c.hq && !any_invisible; ++h)
      for (std::int64_t i = 0; i < c.lq && !any_invisible; ++i)
        for (std::int64_t j = 0; j < c.lk && !any_invisible; ++j) any_invisible = !c.visible(b, h, i, j);
  if (!any_invisible) o.nothing_to_judge("every row sees every key");
  // Poison one key position per batch element (the last valid key, then a
  // random one): every row that cannot see it must keep its bits.
  for (int round = 0; round < 2; ++round) {
    std::vector<std::int64_t> pick(static_cast<std::size_t>(c.b));
    for (std::int64_t b = 0; b < c.b; ++b) {
      const std::int64_t n = c.valid_keys(b);
      pick[static_cast<std::size_t>(b)] = round == 0 ? std::max<std::int64_t>(n - 1, 0) : rng.below(c.lk);
    }
    attn_case p = c;
    for (auto* t : {&p.k, &p.v})
      for (std::int64_t b = 0; b < c.b; ++b)
        for (std::int64_t g = 0; g < c.hkv; ++g)
          for (std::int64_t x = 0; x < t->shape[3]; ++x) t->set_bits(b, pick[static_cast<std::size_t>(b)], g, x, nan_bits(c.type));
    const auto out = s.attend(p);
    if (run_failed(out, o, "poisoned run")) return o;
    o.add("NaN in K,V at key " + std::to_string(pick[0]) + (c.b > 1 ? " (batch 0; per batch varies)" : ""),
          rows_bitwise(c, base, out, [&](auto b, auto h, auto i) { return !c.visible(b, h, i, pick[static_cast<std::size_t>(b)]); }));
  }
  // Huge finite values (+-1e30, or f16's max) in every key from a cut on:
  // scores that overflow, or that dominate every other key, if they leak.
  std::vector<std::int64_t> cut(static_cast<std::size_t>(c.b));
  for (std::int64_t b = 0; b < c.b; ++b) cut[static_cast<std::size_t>(b)] = rng.below(std::max<std::int64_t>(1, c.valid_keys(b)));
  attn_case p = c;
  for (std::int64_t b = 0; b < c.b; ++b)
    for (std::int64_t j = cut[static_cast<std::size_t>(b)]; j < c.lk; ++j)
      for (std::int64_t g = 0; g < c.hkv; ++g) {
        for (std::int64_t x = 0; x < c.d; ++x) p.k.set_bits(b, j, g, x, huge_bits(c.type, x + j));
        for (std::int64_t x = 0; x < c.dv; ++x) p.v.set_bits(b, j, g, x, huge_bits(c.type, x + j + 1));
      }
  // A row keeps its bits when it sees no key at or past the cut.
  const auto before_cut = [&](const attn_case& cc, std::int64_t b, std::int64_t h, std::int64_t i) {
    for (std::int64_t j = cut[static_cast<std::size_t>(b)]; j < cc.lk; ++j)
      if (cc.visible(b, h, i, j)) return false;
    return true;
  };
  {
    const auto out = s.attend(p);
    if (run_failed(out, o, "run with huge future keys")) return o;
    o.add(std::string(c.type == dtype::f16 ? "+-65504" : "+-1e30") + " in K,V of keys " + std::to_string(cut[0]) +
              ".. (batch 0)",
          rows_bitwise(c, base, out, [&](auto b, auto h, auto i) { return before_cut(c, b, h, i); }));
  }
  // The same through the cache, chunk by chunk: a query at position pos sees
  // the cached keys up to pos.
  if (s.has(ATTNCHECK_FEATURE_CACHE) && c.causal && !c.has_mask()) {
    const cache_plan plan = plan_cache_steps(c);
    const auto cb = s.attend_cached(c, plan), cp = s.attend_cached(p, plan);
    if (run_failed(cb, o, "cached base run") || run_failed(cp, o, "cached run with huge future keys")) return o;
    comparison r;
    std::vector<std::int64_t> filled(static_cast<std::size_t>(c.b), 0);
    std::int64_t row0 = 0;
    const std::int64_t total = cb.o.shape[1];
    for (const auto& step : plan.steps) {
      for (std::int64_t b = 0; b < c.b; ++b) filled[static_cast<std::size_t>(b)] += step.append[static_cast<std::size_t>(b)];
      for (std::int64_t b = 0; b < c.b; ++b)
        for (std::int64_t i = 0; i < step.lq; ++i) {
          const std::int64_t pos = filled[static_cast<std::size_t>(b)] - step.lq + i;
          if (pos >= cut[static_cast<std::size_t>(b)]) continue;  // sees a poisoned key
          for (std::int64_t h = 0; h < c.hq; ++h) {
            const std::string where = "cached row " + std::to_string(row0 + i) + " (position " + std::to_string(pos) + ") ";
            for (std::int64_t e = 0; e < c.dv; ++e)
              r.exact(where + o_where(b, row0 + i, h, e), cb.o.bits_at(b, row0 + i, h, e), cp.o.bits_at(b, row0 + i, h, e),
                      cb.o.at(b, row0 + i, h, e), cp.o.at(b, row0 + i, h, e));
            if (!cb.lse.empty()) {
              const auto k = static_cast<std::size_t>((b * c.hq + h) * total + row0 + i);
              r.exact(where + "LSE", std::bit_cast<std::uint32_t>(cb.lse[k]), std::bit_cast<std::uint32_t>(cp.lse[k]), cb.lse[k],
                      cp.lse[k]);
            }
          }
        }
      row0 += step.lq;
    }
    o.add("through the cache: huge values in K,V of keys " + std::to_string(cut[0]) + ".. (batch 0)", r);
  }
  // A query row's inputs reach only that row: NaN, then huge values.
  const std::int64_t i0 = rng.below(c.lq);
  for (int kind = 0; kind < 2; ++kind) {
    attn_case q = c;
    for (std::int64_t b = 0; b < c.b; ++b)
      for (std::int64_t h = 0; h < c.hq; ++h)
        for (std::int64_t x = 0; x < c.d; ++x) q.q.set_bits(b, i0, h, x, kind == 0 ? nan_bits(c.type) : huge_bits(c.type, x + h));
    const auto out = s.attend(q);
    if (run_failed(out, o, "poisoned query run")) return o;
    o.add(std::string(kind == 0 ? "NaN" : "huge values") + " in Q row " + std::to_string(i0),
          rows_bitwise(c, base, out, [&](auto, auto, auto i) { return i != i0; }));
  }
  return o;
}

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
  if (c.b < 2) {
    o.nothing_to_judge("B = 1: no other batch element");
    return o;
  }
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
    o.add(std::string(name(pk)) + " in every unused slot", compare_bitwise(c, base, out));
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
  if (std::none_of(c.key_len.begin(), c.key_len.end(), [&](std::int64_t n) { return n >= 1 && n < c.lk; })) {
    o.nothing_to_judge("no sequence is padded (1 <= n < Lk)");
    return o;
  }
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

void prepare_determinism(attn_case& c, const subject& s) {
  // Thread-count bugs live where a row's keys are split across workers: past
  // the subject's split size (or its largest length hint). One case in four
  // is taken there (one to three split chunks past it), with few rows and
  // narrow heads so the work stays small; the rest keep the generated shape.
  if (c.seed % 4 != 0) return;
  const auto& h = s.hints();
  std::int64_t split = h.split_keys;
  for (int i = 0; i < ATTNCHECK_SIZE_HINT_SLOTS && split == 0; ++i) split = std::max(split, h.lengths[i]);
  if (split <= 1 || split > 8192) return;
  const std::int64_t k = static_cast<std::int64_t>((c.seed / 4) % 3);
  c.lk = std::max(c.lk, (k + 1) * split + 1 + static_cast<std::int64_t>((c.seed / 16) % static_cast<std::uint64_t>(split)));
  c.lq = std::min<std::int64_t>(c.lq, 2);
  c.b = std::min<std::int64_t>(c.b, 2);
  c.hq = c.hq / c.hkv;  // keep G, one KV head
  c.hkv = 1;
  c.hq = std::min<std::int64_t>(c.hq, 4);
  c.d = std::min<std::int64_t>(c.d, 16);
  c.dv = std::min<std::int64_t>(c.dv, 16);
  c.key_len.clear();  // lengths were drawn for the old Lk
  if (c.has_mask()) c.mask_shape = {c.mask_shape[0] == 1 ? 1 : c.b, c.mask_shape[1] == 1 ? 1 : c.hq,
                                    c.mask_shape[2] == 1 ? 1 : c.lq, c.mask_shape[3] == 1 ? 1 : c.lk};
}

law_outcome runs_are_deterministic(const subject& s, const attn_case& c) {
  law_outcome o;
  const auto first = s.attend(c);
  if (run_failed(first, o, "first run")) return o;
  if (s.claims(ATTNCHECK_CLAIM_DETERMINISTIC)) {
    const auto again = s.attend(c);
    if (run_failed(again, o, "second run")) return o;
    o.add("the same call twice", compare_bitwise(c, first, again));
  }
  if (s.claims(ATTNCHECK_CLAIM_THREADS) && s.has(ATTNCHECK_FEATURE_THREADS)) {
    const auto one = s.attend(c, 1);
    if (run_failed(one, o, "1 thread")) return o;
    for (int t : {2, 3, 8}) {
      const auto many = s.attend(c, t);
      if (run_failed(many, o, std::to_string(t) + " threads")) return o;
      o.add("1 thread vs " + std::to_string(t), compare_bitwise(c, one, many));
    }
  }
  if (s.claims(ATTNCHECK_CLAIM_LAYOUT)) {
    for (layout_kind l : {layout_kind::bshd, layout_kind::bhsd, layout_kind::padded}) {
      if (l == c.layout) continue;
      const attn_case r = relayout(c, l);
      const auto out = s.attend(r);
      if (run_failed(out, o, std::string("layout ") + std::string(name(l)))) return o;
      o.add(std::string("layout ") + std::string(name(c.layout)) + " vs " + std::string(name(l)), compare_bitwise(c, first, out));
    }
    attn_case r = c;
    r.q = element_strided(c.q), r.k = element_strided(c.k), r.v = element_strided(c.v);
    const auto out = s.attend(r);
    if (run_failed(out, o, "element stride 2")) return o;
    o.add(std::string("layout ") + std::string(name(c.layout)) + " vs element stride 2 (NaN between elements)",
          compare_bitwise(c, first, out));
  }
  // What the host hands over besides Q, K, V and O: LSE with non-dense
  // strides, the mask written out in full in another order. Bit for bit where
  // the subject claims layout invariance, else within two bounds.
  std::optional<oracle_result> bound;
  const auto same = [&](std::uint32_t claim, const attn_case& cc, const subject_output& a, const subject_output& b) {
    if (s.claims(claim)) return compare_bitwise(cc, a, b);
    if (!bound) bound = fast_bound(s, c);
    return compare_within_bounds(cc, a, *bound, b, *bound);
  };
  if (s.has_lse() || c.has_mask()) {
    call_layout how;
    how.lse_strided = s.has_lse();
    how.mask_expanded = c.has_mask();
    const auto out = s.attend(c, how);
    if (run_failed(out, o, "strided LSE / expanded mask")) return o;
    o.add(std::string(how.lse_strided ? "LSE with strides (Lq(Hq+1)+2, 1, Hq+1)" : "") + (how.lse_strided && how.mask_expanded ? ", " : "") +
              (how.mask_expanded ? "mask expanded to (B,Hq,Lq,Lk), keys outer, padded" : ""),
          same(ATTNCHECK_CLAIM_LAYOUT, c, first, out));
  }
  // Lq: the last rows computed alone (bottom-right aligned: same positions)
  // equal the full call's last rows.
  if (c.lq >= 2) {
    law_rng rng(c, 0x1a9);
    const std::int64_t keep = 1 + rng.below(c.lq - 1), from = c.lq - keep;
    attn_case t = c;
    t.lq = keep;
    t.q = remake(c.type, {c.b, keep, c.hq, c.d}, c.layout, [&](auto b, auto i, auto h, auto x) { return c.q.bits_at(b, from + i, h, x); });
    if (c.has_mask() && c.mask_shape[2] != 1) {
      const auto& ms = c.mask_shape;
      t.mask_shape[2] = keep;
      t.mask.clear();
      for (std::int64_t a = 0; a < ms[0]; ++a)
        for (std::int64_t h = 0; h < ms[1]; ++h)
          for (std::int64_t i = from; i < c.lq; ++i)
            for (std::int64_t j = 0; j < ms[3]; ++j)
              t.mask.push_back(c.mask[static_cast<std::size_t>(((a * ms[1] + h) * ms[2] + i) * ms[3] + j)]);
    }
    const auto out = s.attend(t);
    if (run_failed(out, o, "the last " + std::to_string(keep) + " query rows alone")) return o;
    subject_output tail;
    tail.o = remake(c.type, {c.b, keep, c.hq, c.dv}, c.layout, [&](auto b, auto i, auto h, auto e) { return first.o.bits_at(b, from + i, h, e); });
    if (!first.lse.empty())
      for (std::int64_t b = 0; b < c.b; ++b)
        for (std::int64_t h = 0; h < c.hq; ++h)
          for (std::int64_t i = 0; i < keep; ++i) tail.lse.push_back(first.lse[static_cast<std::size_t>((b * c.hq + h) * c.lq + from + i)]);
    comparison r;
    if (s.claims(ATTNCHECK_CLAIM_LQ)) {
      r = compare_bitwise(t, tail, out);
    } else {
      const oracle_result rt = fast_bound(s, t);
      r = compare_within_bounds(t, tail, rt, out, rt);
    }
    o.add("the last " + std::to_string(keep) + " of " + std::to_string(c.lq) + " query rows alone", r);
  }
  return o;
}

}  // namespace attncheck::laws
