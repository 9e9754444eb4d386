// The differential law: every O and LSE element within the bound of the
// high-precision oracle (docs/spec.md, "The error bound").
#include <cstdio>

#include "law_support.hpp"

#include "attncheck/features.hpp"
#include "registry.hpp"

namespace attncheck::laws {

namespace {

// One row, two keys, scale 1: scores 0 and x, with x placed so that exp's
// reduced argument r = x - n ln2 sits near +-ln2/2, where a polynomial cut
// short or a lost range-reduction constant errs most (random scores rarely
// land there, and then mostly among many keys whose bound terms drown it).
// V = (-1, 1) turns a weight error into an output error of the same size.
// Drawn from the case's seed, so a saved case replays it.
attn_case exp_edge_probe(const attn_case& c) {
  law_rng rng(c, 0xe4bed9e);
  attn_case p;  // b = hq = hkv = lq = d = dv = 1
  p.lk = 2;
  p.type = dtype::f32;
  p.scale = 1.0f;
  p.seed = c.seed;
  const double ln2 = 0.69314718055994531;
  const double n = static_cast<double>(rng.below(2));  // larger n: the bound grows with the gap faster than the error
  const double off = 0.32 + 0.0266 * static_cast<double>(rng.below(1001)) / 1000.0;  // |r| in [0.32, ln2 / 2]
  const double x = -(n * ln2 + (rng.below(2) ? off : -off));
  const auto f32 = [](double v) { return encode(dtype::f32, v); };
  p.q = remake(dtype::f32, {1, 1, 1, 1}, layout_kind::bshd, [&](auto, auto, auto, auto) { return f32(1.0); });
  p.k = remake(dtype::f32, {1, 2, 1, 1}, layout_kind::bshd, [&](auto, auto j, auto, auto) { return f32(j == 0 ? 0.0 : x); });
  p.v = remake(dtype::f32, {1, 2, 1, 1}, layout_kind::bshd, [&](auto, auto j, auto, auto) { return f32(j == 0 ? -1.0 : 1.0); });
  return p;
}

// True when some O or LSE element of t (the oracle without a feature) lies
// further from ref's than both bounds together: the feature moves the truth.
bool moves_the_truth(const oracle_result& ref, const oracle_result& t) {
  const auto moved = [](double t0, double b0, double t1, double b1) { return proves_change(t0, 2 * b0, t1, 2 * b1); };
  for (std::size_t k = 0; k < ref.o.size(); ++k)
    if (moved(ref.o[k], ref.o_bound[k], t.o[k], t.o_bound[k])) return true;
  for (std::size_t k = 0; k < ref.lse.size(); ++k)
    if (moved(ref.lse[k], ref.lse_bound[k], t.lse[k], t.lse_bound[k])) return true;
  return false;
}

// The oracle of a case, from the fast tier, or else from the oracle's loops
// in binary64, whose own error (relative ~1e-16 on these rows) the margin of 2 covers.
oracle_result truth_of(const subject& s, const attn_case& c) {
  const auto fast = fast_oracle_of(s, c);
  return fast ? *fast : fast_bound(s, c);
}

// The variants of the case whose effect the oracle proves (docs/spec.md,
// "Variants"): switching one off moves some O or LSE element further than
// both bounds together, so a subject that accepts the variant and does not
// apply it lands outside the bound there.
std::uint32_t variants_with_effect(const subject& s, const attn_case& c, const oracle_result& ref) {
  std::uint32_t judged = 0;
  for (const contract_feature& f : contract_features())
    if (f.kind == feature_kind::variant && (variants_of(c) & f.bit) &&
        moves_the_truth(ref, truth_of(s, without_variant(c, f.bit))))
      judged |= f.bit;
  return judged;
}

// The descales of the case whose effect the oracle proves (docs/spec.md "fp8
// storage"): reading the input with a descale of 1 moves some O or LSE
// element further than both bounds together, so a subject that accepts the
// descale and drops it lands outside the bound there. Bit 1 << k: fp8_inputs[k].
std::uint32_t descales_with_effect(const subject& s, const attn_case& c, const oracle_result& ref) {
  std::uint32_t judged = 0;
  for (std::size_t k = 0; k < std::size(fp8_inputs); ++k) {
    const fp8_input& x = fp8_inputs[k];
    if (c.quant.*x.scale == descale_granularity::none) continue;
    attn_case off = c;
    off.quant.*x.scale = descale_granularity::none;
    (off.quant.*x.descale).clear();
    if (moves_the_truth(ref, truth_of(s, off))) judged |= 1u << k;
  }
  return judged;
}

}  // namespace

// A quarter of the drawn cases of 16 keys or more without a variant (about
// an eighth of all) become long-context decodes (make_long_decode: Lk at
// 2^12, 2^13, 2^15, 2^16 or 2^17, +-1), three in four of them with one
// dominant key. A kernel whose key index wraps (key j read as key j mod 2^15,
// say) loses or doubles that key, an O(1) error; on random scores the error
// of so many wrong keys is about n^-1/2, below the sound bound, which grows
// as n u. The fast oracle tier answers them, so the work budget is charged
// the work drawn, not their length (charged_as_drawn).
//
// Shorter drawn cases stay as they are, so shrinking a case that fails for
// any other reason (a crash from Lk = 3 on, say) passes below 16 keys
// through cases that are never long decodes, and ends at the short case.
void prepare_long_decodes(attn_case& c, const subject&) {
  if (c.variants.any() || c.lk < 16) return;  // variant cases stay within variant_max_work
  law_rng rng(c, 0x10c0de);
  if (rng.below(4) != 0) return;
  make_long_decode(c, rng);
  if (rng.below(4) != 0) c.values = value_kind::dominant;
}

law_outcome output_within_bound(const subject& s, const attn_case& c) {
  law_outcome o;
  const auto out = s.attend(c);
  if (run_failed(out, o, "run")) return o;
  const oracle_result ref = reference(c, oracle_options_for(s, c, law_oracle));
  o.add("O and LSE against the oracle", compare_with_reference(c, out, ref));
  if (c.variants.any()) o.variants_judged = variants_with_effect(s, c, ref);
  if (c.quant.any()) o.descales_judged = descales_with_effect(s, c, ref);
  if (o.v == verdict::fail || !(s.desc().dtypes & (1u << static_cast<unsigned>(dtype::f32)))) return o;
  const attn_case p = exp_edge_probe(c);
  char what[96];
  std::snprintf(what, sizeof what, "exp edge probe (one row, scores 0 and %.9g, V = -1 and 1)", p.k.at(0, 1, 0, 0));
  const auto pout = s.attend(p);
  if (run_failed(pout, o, what)) return o;
  // Its elements are the probe's, not the case's: a replay's worst line says so.
  comparison probe = compare_with_reference(p, pout, reference(p, oracle_options_for(s, p, law_oracle)));
  for (worst_element* w : {&probe.worst, &probe.prob_worst})
    if (!w->where.empty()) w->where = "exp edge probe " + w->where;
  o.add(std::string(what) + " against the oracle", probe);
  return o;
}

}  // namespace attncheck::laws
