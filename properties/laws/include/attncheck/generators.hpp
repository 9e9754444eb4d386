// rapidcheck generators of case headers. Every value of a case comes from its
// printed seed through materialize(); generators choose the header.
//
// The distribution (docs/distribution.md) reaches production sizes: five
// shape regimes (small, around the subject's size hints, decode, prefill,
// wide heads), every dtype and mask kind, explicit scales, and values across
// the exponent range. Raw choices are drawn at full size (rapidcheck's size
// parameter does not shrink the ranges) and shrink toward B = Hq = Hkv = Lq =
// Lk = D = Dv = 1, f32, dyadic values, no masks. Each law spends a work
// budget on large cases; once it is spent, the law's cases stay small, so one
// huge case cannot starve the others.
#pragma once

#include <rapidcheck.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "attncheck/case.hpp"
#include "attncheck/case_space.hpp"
#include "attncheck/run_config.hpp"
#include "attncheck/subject_host.hpp"

namespace attncheck {

/// A law's budget of work on large cases (shared by its generator and its runner).
struct work_budget {
  std::int64_t limit = 0;  ///< multiply-adds the law may spend on cases above gen_options::small_work
  std::int64_t spent = 0;
  bool frozen = false;  ///< after a failure: shrinking keeps the cap the failing case was drawn with
  std::int64_t cap_when_frozen = 0;
};

struct gen_options {
  std::int64_t max_work = run_default::max_work;      ///< largest case while the law's budget lasts; larger shapes are cut down
  std::int64_t small_work = run_default::small_work;  ///< largest case once the budget is spent
  std::int64_t law_work = run_default::law_work;      ///< each law's budget of multiply-adds on large cases
  bool allow_masks = true;                            ///< causal, padding, boolean masks
  bool allow_poison = true;
  bool variants = false;  ///< also draw the contract 1.1 variants the subject declares (capped at run_default::variant_max_work)
  bool fp8 = false;       ///< also draw fp8 storage with descales for a subject that declares it (any_fp8_choice)
  std::shared_ptr<work_budget> budget;  ///< set by the runner; null: every case may reach max_work
};

/// Any case the subject can take: shapes, masks, dtype, values, scale, layout,
/// poison, seed, and with opt.variants the variants it declares. Leans to the
/// subject's size hints (subject::hints()).
rc::Gen<attn_case> any_case(const subject& s, const gen_options& opt = {});

/// Chunk sizes of a cached sequence of n tokens (prefill, then chunks of any
/// size up to the rest, single tokens included), drawn from a seed.
std::vector<std::int64_t> any_chunking(std::int64_t n, std::uint64_t seed);

/// Realized distribution of cases: how many have each property.
struct case_stats {
  std::int64_t n = 0;
  std::map<std::string, std::int64_t> counts;
  void add(const attn_case& c, const subject& s);
  /// The contract 1.2 input form counts of a paged or ragged case (add() calls it).
  void add_form(const attn_case& c, const subject& s);
  void merge(const case_stats& o);
  double share(const std::string& key) const { return n ? static_cast<double>(counts.count(key) ? counts.at(key) : 0) / n : 0; }
};

/// One documented share of the distribution and its floor (docs/distribution.md).
struct share_floor {
  const char* key;        ///< as counted by case_stats
  const char* what;       ///< in words
  double floor;           ///< the share must not drop below this (for a subject taking every dtype and mask)
  bool needs_all = true;  ///< the floor applies only to subjects with every dtype and mask kind
  /// A contract 1.1 variant share: it applies to subjects declaring every
  /// variant, over the cases of the laws that draw variants (law::variants).
  bool variant = false;
};
const std::vector<share_floor>& distribution_floors();

/// One share of the contract 1.2 input forms and its floor, over the paged
/// cases (over = "paged") or the ragged cases (over = "ragged") of a gate run;
/// it applies to a subject declaring that form.
struct form_floor {
  const char* key;   ///< as counted by case_stats::add_form
  const char* what;  ///< in words
  double floor;
  const char* over;  ///< "paged", "ragged" or "fp8": the count it is a share of
};
const std::vector<form_floor>& form_floors();

}  // namespace attncheck

namespace rc {
template <>
struct Arbitrary<attncheck::attn_case>;  // deliberately undefined: use any_case()
}  // namespace rc

namespace attncheck {
/// rapidcheck prints counterexamples with the one-line form.
inline void showValue(const attn_case& c, std::ostream& os) { os << to_line(c); }
}  // namespace attncheck
