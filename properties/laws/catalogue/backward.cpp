// The backward laws (docs/spec.md "Backward"): dQ, dK and dV of a subject that
// declares ABI v3 FEATURE3_BACKWARD, against the MPFR backward oracle within
// the backward bound (docs/bound.md "Backward") and under the identities every
// exact gradient keeps. The subject is handed the forward oracle's O (in the
// storage type) and LSE (f32), the bound's class; dO comes from the case's
// seed and its grad= recipe (draw_grad_output), so a saved case replays.
//
// The group spans five files, its laws in this order in the table (registry.cpp):
// this one, the laws against the oracle (plain, under the variants, on the
// subject's own forward); backward_sums.cpp, the sums of dK and dV over the
// keys; backward_relations.cpp, runs whose exact gradients are related
// (translated keys, GQA against MHA, additivity in dO); backward_exact.cpp,
// the bit-for-bit laws (linearity in 2^k dO, masked keys, determinism); and
// backward_support.hpp/.cpp, what they share.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "attncheck/case_space.hpp"
#include "backward_support.hpp"
#include "registry.hpp"

namespace attncheck::laws {

namespace {

// ---- backward.gradients_within_bound_of_oracle ----

// Every dQ, dK and dV element of `out` against the oracle's within r's bounds.
comparison against_oracle(const attn_case& c, const backward_result& r, const backward_output& out) {
  comparison cmp;
  cmp.overflow_threshold = overflow_threshold(c.type);
  each_gradient(c, [&](int which, const std::string& w, std::size_t at, auto x0, auto x1, auto x2, auto x3) {
    cmp.element(w, grad_values(r, which)[at], grad_tensor(out, which).at(x0, x1, x2, x3), grad_bounds(r, which)[at]);
  });
  return cmp;
}

}  // namespace

law_outcome gradients_within_bound(const subject& s, const attn_case& c) {
  law_outcome o;
  const auto own = run_case_on_oracle(s, c, o);
  if (!own) return o;
  const backward_result& r = own->run.r;
  const backward_output& out = own->run.out;
  o.add("dQ, dK, dV against the backward oracle (grad=" + std::string(name(grad_of(c))) + ")", against_oracle(c, r, out));
  if (!r.d_sinks.empty()) {
    // d(sink), returned in f32 whatever the storage type.
    comparison cmp;
    cmp.overflow_threshold = overflow_threshold(dtype::f32);
    for (std::int64_t h = 0; h < c.hq; ++h) {
      const auto k = static_cast<std::size_t>(h);
      cmp.element(sink_where(h), r.d_sinks[k], out.d_sinks[k], r.d_sinks_bound[k]);
    }
    o.add("d(sink) against the backward oracle", cmp);
  }
  if (o.judged()) o.variants_judged = variants_of(c);
  return o;
}

namespace {

// ---- backward.variant_gradients_within_bound_of_oracle ----

}  // namespace

std::string takes_backward_variants(const subject& s) {
  if (auto why = takes_backward(s); !why.empty()) return why;
  if (!s.has_backward_variants()) return "subject's backward takes no variants (ABI v3 FEATURE3_BACKWARD_VARIANTS)";
  return (s.features_v3() & score_variant_bits) ? "" : "subject declares no contract 1.1 variant";
}

// A variant case of the backward group: drawn with the variants the subject
// declares (law entry with_variants, capped at backward_max_work); a case the
// generator left without one, or one too large (a fuzzed header: cut_to keeps
// no bias shape or per-head values in step), gets a variant choice from its
// seed after the cut, so every case judges a variant. Value kinds as
// prepare_gradients.
void prepare_variant_gradients(attn_case& c, const subject& s) {
  if (case_work(c) > backward_max_work) {
    c.variants = {};
    cut_to(c, backward_max_work);
  }
  if (!c.variants.any()) {
    law_rng rng(c, 0xb7a2);
    variant_choice v;
    for (const variant_choice_spec& spec : variant_choices) v.*spec.field = static_cast<int>(rng.below(spec.n));
    v.any = 1;
    apply_variants(c, v, s.features_v3() & score_variant_bits, hint_lengths(s), s.limits());
  }
  draw_grad_recipe(c);
  keep_values_bounded(c);
}

namespace {

// ---- backward.own_forward_within_bound_of_oracle ----

}  // namespace

std::string takes_backward_with_lse(const subject& s) {
  if (auto why = takes_backward(s); !why.empty()) return why;
  return s.has_lse() ? "" : "subject returns no LSE (its backward cannot be handed its own)";
}

// The subject's own forward O and LSE handed to its backward, as a training
// step does: the gradients against the oracle's within the backward bound for
// O and LSE within the forward bound's o_bound and lse_bound of the exact ones
// (docs/bound.md "Backward", "Handed its own forward"). The oracle law judges
// the run on the oracle's O and LSE against the same gradients, so the two
// runs agree within the sum of the two bounds. The issue's "dV = P^T dO with P
// from the subject's own forward pass" is this law's dV part: the extended
// bound's E_P is that of P_hat = exp(S_hat - LSE_subject), with the subject's
// LSE error e_L in it, judged against the exact P^T dO; a separate law would
// judge the same elements against the same values. The forward elements
// outside their own bound (the differential law reports them) or without a
// finite one give +inf errors: their rows go unjudged here. oracle_of may
// answer from the fast tier: a forward it accepts lies within (1 + 2^-19) of
// the MPFR bound of the MPFR value (docs/oracle.md "Tiers"), a slack far
// inside the backward bound's F = 2.
law_outcome own_forward_within_bound(const subject& s, const attn_case& c) {
  law_outcome o;
  const subject_output f = s.attend(c);
  if (run_failed(f, o, "forward")) return o;
  if (f.lse.size() != static_cast<std::size_t>(c.b * c.hq * c.lq)) {
    o.fail("forward: subject declares LSE but returned " + std::to_string(f.lse.size()) + " values");
    return o;
  }
  const oracle_result rf = oracle_of(s, c);
  constexpr double inf = std::numeric_limits<double>::infinity();
  backward_handed_errors handed{rf.o_bound, rf.lse_bound};
  bool any_outside = false;
  for (std::int64_t bi = 0; bi < c.b; ++bi)
    for (std::int64_t i = 0; i < c.lq; ++i)
      for (std::int64_t h = 0; h < c.hq; ++h) {
        for (std::int64_t e = 0; e < c.dv; ++e) {
          const std::size_t k = rf.o_index(bi, i, h, e);
          double& err = handed.o[k];
          if (!std::isnan(err) && !(std::fabs(f.o.at(bi, i, h, e) - rf.o[k]) <= err)) err = inf, any_outside = true;
        }
        const std::size_t k = rf.lse_index(bi, h, i);
        double& err = handed.lse[k];
        if (rf.lse[k] != -inf && !std::isnan(err) && !(std::fabs(static_cast<double>(f.lse[k]) - rf.lse[k]) <= err))
          err = inf, any_outside = true;
      }
  const tensor d_o = draw_grad_output(c, grad_of(c));
  const backward_result r = reference_backward(c, d_o, backward_bound_for(s, c), handed);
  const auto out = s.backward(c, backward_inputs{f.o, f.lse, d_o});
  if (run_failed(out, o, "backward on the subject's own O and LSE")) return o;
  o.add(std::string("dQ, dK, dV on the subject's own forward O and LSE against the backward oracle") +
            (any_outside ? " (rows whose forward left its bound unjudged)" : ""),
        against_oracle(c, r, out));
  return o;
}

}  // namespace attncheck::laws
