// The laws of attention, each a named check of a subject on one case.
// A law prepares a generated header (forcing what it needs, e.g. causal),
// then checks a materialized case. Replaying a saved case runs check() alone,
// so every perturbation a law makes is derived from the case itself.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "attncheck/case.hpp"
#include "attncheck/check.hpp"
#include "attncheck/subject_host.hpp"

namespace attncheck {

enum class verdict : std::uint8_t { pass, fail, skip };

struct law_outcome {
  verdict v = verdict::pass;
  std::string message;   ///< why it failed, or why it was skipped
  double max_ratio = 0;  ///< largest observed/bound among bounded comparisons
  worst_element worst;   ///< the element behind max_ratio or the failure

  static law_outcome skip(std::string why) { return {verdict::skip, std::move(why), 0, {}}; }
  /// Folds a comparison in under a label ("V = ones", "threads 1 vs 3").
  void add(const std::string& label, const comparison& c);
  void fail(const std::string& why);
};

struct law {
  std::string name;     ///< group.law_name, e.g. "causal.future_keys_never_change_past_outputs"
  std::string summary;  ///< one line: what must hold
  /// Empty when the subject can take the law at all; else why it is skipped.
  std::function<std::string(const subject&)> applicable;
  /// Adjusts a generated header to what the law needs (never loosens it).
  std::function<void(attn_case&, const subject&)> prepare;
  /// Checks the law on a materialized case.
  std::function<law_outcome(const subject&, const attn_case&)> check;
};

/// Every law, in the order the gate runs and prints them.
const std::vector<law>& all_laws();
/// The law of that name; nullptr when there is none.
const law* find_law(const std::string& name);

}  // namespace attncheck
