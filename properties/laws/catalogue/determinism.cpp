// The determinism law: repeated calls, thread counts, layouts, strided LSE,
// expanded masks and fewer query rows give identical bits, as claimed.
#include <algorithm>
#include <bit>
#include <limits>
#include <optional>

#include "law_support.hpp"
#include "registry.hpp"

namespace attncheck::laws {

namespace {

// The same values with every element followed by a NaN gap (element stride 2):
// the three named layouts all keep the head dimension dense, and the contract
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
  if (c.has_mask())
    c.mask_shape = {c.mask_shape[0] == 1 ? 1 : c.b, c.mask_shape[1] == 1 ? 1 : c.hq, c.mask_shape[2] == 1 ? 1 : c.lq,
                    c.mask_shape[3] == 1 ? 1 : c.lk};
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
    o.add(std::string(how.lse_strided ? "LSE with strides (Lq(Hq+1)+2, 1, Hq+1)" : "") +
              (how.lse_strided && how.mask_expanded ? ", " : "") +
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
    t.q = remake(c.type, {c.b, keep, c.hq, c.d}, c.layout,
                 [&](auto b, auto i, auto h, auto x) { return c.q.bits_at(b, from + i, h, x); });
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
    tail.empty_rows = first.empty_rows;
    tail.o = remake(c.type, {c.b, keep, c.hq, c.dv}, c.layout,
                    [&](auto b, auto i, auto h, auto e) { return first.o.bits_at(b, from + i, h, e); });
    if (!first.lse.empty())
      for (std::int64_t b = 0; b < c.b; ++b)
        for (std::int64_t h = 0; h < c.hq; ++h)
          for (std::int64_t i = 0; i < keep; ++i)
            tail.lse.push_back(first.lse[static_cast<std::size_t>((b * c.hq + h) * c.lq + from + i)]);
    o.add("the last " + std::to_string(keep) + " of " + std::to_string(c.lq) + " query rows alone",
          compare_claimed(s, ATTNCHECK_CLAIM_LQ, t, tail, out));
  }
  return o;
}

}  // namespace attncheck::laws
