// The GQA law: grouped-query attention equals MHA on K/V repeated in place,
// and perturbing one KV head changes exactly its query heads.
#include <algorithm>
#include <bit>

#include "law_support.hpp"
#include "registry.hpp"

namespace attncheck::laws {

void prepare_gqa(attn_case& c, const subject&) {
  // G != Hkv and G > 1: only then do h / G, h / Hkv and h % Hkv all differ.
  std::int64_t g = c.group();
  if (c.hkv == 1 && (c.seed & 1)) c.hkv = 2;
  if (g == 1) g = 2;
  if (g == c.hkv) g += 1;
  c.hq = c.hkv * g;
  if (c.has_mask() && c.mask_shape[1] != 1) c.mask_shape[1] = c.hq;
}

law_outcome gqa_matches_repeated_kv(const subject& s, const attn_case& c) {
  law_outcome o;
  const auto base = s.attend(c);
  if (run_failed(base, o, "GQA run")) return o;
  const oracle_result ref = fast_bound(s, c);
  // MHA on K/V repeated in place (repeat_interleave): KV head h holds the old h / G.
  const attn_case mha = repeated_kv(c);
  const auto rep = s.attend(mha);
  if (run_failed(rep, o, "MHA run on repeated K/V")) return o;
  o.add("GQA vs MHA on repeated K/V", compare_within_bounds(c, base, ref, rep, fast_bound(s, mha)));
  // Perturb one KV head: exactly its G query heads may change, and they must.
  if (c.hkv == 1) o.nothing_to_judge("Hkv = 1: no other KV head's query heads to keep unchanged");
  law_rng rng(c, 0x69a);
  const std::int64_t g0 = rng.below(c.hkv);
  attn_case p = c;
  for (std::int64_t b = 0; b < c.b; ++b)
    for (std::int64_t j = 0; j < c.lk; ++j) {
      for (std::int64_t x = 0; x < c.d; ++x) p.k.set(b, j, g0, x, 2 * c.k.at(b, j, g0, x));
      for (std::int64_t x = 0; x < c.dv; ++x) {
        const double v = c.v.at(b, j, g0, x);
        p.v.set(b, j, g0, x, std::fabs(v) < 1e3 ? v + 1 : -v);
      }
    }
  const auto out = s.attend(p);
  if (run_failed(out, o, "perturbed KV head")) return o;
  // Its query heads must move, but only where the oracle proves the true O
  // moves by more than both bounds (require_changes): an empty row (q.k
  // overflowed to -inf, an infinite bound) or a change within the bounds is unjudged.
  const std::string what = "perturbing KV head " + std::to_string(g0);
  const comparison others = rows_claimed(s, c, base, out, [&](auto, auto h, auto) { return c.kv_head(h) != g0; });
  const comparison mine = require_changes(s, c, base, p, out, what, [&](auto, auto h, auto) { return c.kv_head(h) == g0; });
  o.add(
      what + (s.claims(ATTNCHECK_CLAIM_DETERMINISTIC) ? ": other heads keep their bits" : ": other heads stay within the bound"),
      others);
  o.add(what + ": its query heads change where the oracle proves it", mine);
  return o;
}

}  // namespace attncheck::laws
