// What the backward laws share (backward.cpp, backward_sums.cpp,
// backward_relations.cpp, backward_exact.cpp): which subjects they apply to,
// the preparation that keeps a case within the MPFR backward oracle's budget,
// the gradient elements' names and order, and one run of the subject's
// backward on the oracle's O and LSE next to the oracle's gradients.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "attncheck/backward_inputs.hpp"
#include "attncheck/backward_oracle.hpp"
#include "law_support.hpp"

namespace attncheck::laws {

// Largest B*Hq*Lq*Lk*(D+Dv) of a backward case. The MPFR backward oracle runs
// the forward oracle and then dP, dS, dQ, dK and dV at 168 bits: about 1 us a
// unit of work, so the whole group at 1000 cases stays within seconds per law.
inline constexpr std::int64_t backward_max_work = 3000;

std::string takes_backward(const subject& s);

/// A law of the backward group for the subjects that declare backward
/// (takes_backward); a law that applies to fewer names its own applies_when.
inline law_entry backward_entry(std::string name, decltype(law::check) check, double min_judged, std::string summary) {
  return law_entry(std::move(name), std::move(check), min_judged, std::move(summary))
      .applies_when(takes_backward)
      .backward_group();
}

/// Keeps key_len and the mask's broadcast shape in step with the case's sizes.
void resync(attn_case& c);

/// Cuts the shape down (batch and heads first, then head sizes, then lengths)
/// until case_work(c) <= cap.
void cut_to(attn_case& c, std::int64_t cap);

/// A dO recipe from the seed when the case has none.
void draw_grad_recipe(attn_case& c);

/// Value kinds whose scores the backward bound does not cover become
/// large_logits (prepare_gradients says why).
void keep_values_bounded(attn_case& c);

/// Every backward law but the variant law: contract 1.0 (their identities,
/// or the fudge comparison, assume no variant; docs/spec.md "Backward"), a
/// small case, and a dO recipe from the seed when the case has none.
void prepare_backward(attn_case& c, const subject&);

/// prepare_backward, and value kinds the backward bound covers (keep_values_bounded).
void prepare_gradients(attn_case& c, const subject& s);

inline grad_kind grad_of(const attn_case& c) { return c.grad.value_or(grad_kind::normal); }

inline std::string dq_where(std::int64_t bi, std::int64_t i, std::int64_t h, std::int64_t x) {
  return gradient_where(0, bi, i, h, x);
}
inline std::string dk_where(std::int64_t bi, std::int64_t j, std::int64_t g, std::int64_t x) {
  return gradient_where(1, bi, j, g, x);
}
inline std::string dv_where(std::int64_t bi, std::int64_t j, std::int64_t g, std::int64_t e) {
  return gradient_where(2, bi, j, g, e);
}

/// True when row (b, h, i) sees key j, for rows of KV head g's query heads.
inline bool sees(const attn_case& c, std::int64_t bi, std::int64_t h, std::int64_t i, std::int64_t j) {
  return c.visible(bi, h, i, j);
}

/// Keys (b, g, j) that some row of KV head g's query heads sees.
std::vector<char> seen_keys(const attn_case& c);

/// Runs `fn(which, where, at, x0, x1, x2, x3)` on every gradient element of
/// the case's shape (dQ (B, Lq, Hq, D), dK (B, Lk, Hkv, D), dV (B, Lk, Hkv,
/// Dv)), `at` the element's dense index in backward_result's order and
/// `which` 0, 1, 2 for dQ, dK, dV.
template <class Fn>
void each_gradient(const attn_case& c, Fn&& fn) {
  for (std::int64_t bi = 0; bi < c.b; ++bi) {
    for (std::int64_t i = 0; i < c.lq; ++i)
      for (std::int64_t h = 0; h < c.hq; ++h)
        for (std::int64_t x = 0; x < c.d; ++x)
          fn(0, dq_where(bi, i, h, x), static_cast<std::size_t>(((bi * c.lq + i) * c.hq + h) * c.d + x), bi, i, h, x);
    for (std::int64_t j = 0; j < c.lk; ++j)
      for (std::int64_t g = 0; g < c.hkv; ++g) {
        for (std::int64_t x = 0; x < c.d; ++x)
          fn(1, dk_where(bi, j, g, x), static_cast<std::size_t>(((bi * c.lk + j) * c.hkv + g) * c.d + x), bi, j, g, x);
        for (std::int64_t e = 0; e < c.dv; ++e)
          fn(2, dv_where(bi, j, g, e), static_cast<std::size_t>(((bi * c.lk + j) * c.hkv + g) * c.dv + e), bi, j, g, e);
      }
  }
}

/// dQ, dK or dV (which 0, 1, 2) of a subject's output, and of the oracle's values and bounds.
const tensor& grad_tensor(const backward_output& out, int which);
const std::vector<double>& grad_values(const backward_result& r, int which);
const std::vector<double>& grad_bounds(const backward_result& r, int which);

/// The subject's backward on the oracle's O and LSE of its case, and the
/// oracle's gradients with the bound.
struct backward_run {
  backward_result r;
  backward_output out;
};
backward_run run_on_oracle(const subject& s, const attn_case& c, const tensor& d_o);

/// run_on_oracle on the case's own dO (draw_grad_output of its grad= recipe),
/// returned with it; nullopt, o failed, where the subject's backward failed.
struct own_backward_run {
  tensor d_o;
  backward_run run;
};
std::optional<own_backward_run> run_case_on_oracle(const subject& s, const attn_case& c, law_outcome& o);

}  // namespace attncheck::laws
