// Internal to the campaign (properties/campaign/src/): the pieces one part
// of the campaign needs from another. Not installed.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "attncheck/campaign.hpp"
#include "attncheck/check.hpp"
#include "attncheck/subject_host.hpp"

namespace attncheck::campaign_detail {

// The law whose cases and verdict a backward campaign repeats at scale
// (with --variants, the variant law: its cases carry the declared variants).
inline constexpr const char* backward_law = "backward.gradients_within_bound_of_oracle";
inline constexpr const char* backward_variant_law = "backward.variant_gradients_within_bound_of_oracle";

// stats.cpp: keeps the campaign_stats::worst_kept highest ranked (the larger
// ratio first, NaN last, ties: the lower case index), highest first.
void keep_worst(campaign_stats& s, double ratio, std::int64_t index, const std::string& what);

// json.cpp: a shard's stats as JSON through the result codec's fields (exact
// numbers: a ratio is a number, or "inf", "-inf", "nan"); the kept lists by hand.
nlohmann::json to_json(const campaign_stats& s);
campaign_stats stats_from(const nlohmann::json& j);

// shards.cpp: cases of this shard: k = shard_index + shard_count * p for p in [0, shard_cases).
std::int64_t shard_cases(const campaign_options& opt);

// print.cpp: n of `of` as a percentage with four decimals.
std::string percent(std::int64_t n, std::int64_t of);

// One case's judging: every element's observed/bound into the case's stats
// (and, for backward, its gradient's), the worst element and the first failure.
struct case_tally {
  campaign_stats st;
  comparison worst;
  bool violated = false;
  bool ran = true;  ///< false when the subject failed to run
  explicit case_tally(dtype t) {
    st.cases = 1;
    worst.overflow_threshold = overflow_threshold(t);
  }
  // `where()` names the element (built only when the element may become the
  // worst or fails); `also`, `also_worst`: a part of the case (a gradient)
  // that tallies the element too; `overflow`: the element's own type's
  // overflow threshold where it is not the case's (0: the case's).
  template <class Where>
  void element(const Where& where, double expected, double got, double bound, campaign_stats* also = nullptr,
               comparison* also_worst = nullptr, double overflow = 0) {
    campaign_stats* both[2] = {&st, also};
    // The common case, decided as comparison::element decides it, without
    // building the element's name: finite values within a finite bound that
    // cannot displace the worst element (merge() keeps the worst on a tie).
    if (std::isfinite(expected) && std::isfinite(got) && std::isfinite(bound) && bound >= 0) {
      const double err = std::fabs(got - expected);
      const double ratio = err == 0 ? 0.0 : (bound == 0 ? std::numeric_limits<double>::infinity() : err / bound);
      const auto stays = [&](const comparison* w) { return !w || (!w->worst.where.empty() && ratio <= w->max_ratio); };
      if (err <= bound && stays(&worst) && stays(also_worst)) {
        for (campaign_stats* x : both)
          if (x) ++x->elements, ++x->histogram[ratio_bin(ratio)], x->max_ratio = std::max(x->max_ratio, ratio);
        ++worst.compared;
        if (also_worst) ++also_worst->compared;
        return;
      }
    }
    comparison e;
    e.overflow_threshold = overflow > 0 ? overflow : worst.overflow_threshold;
    e.element(where(), expected, got, bound);
    if (std::isnan(expected)) return;
    if (e.pass && e.compared == 0) {  // NaN or +inf bound: outside the bound's domain, nothing judged
      for (campaign_stats* x : both)
        if (x) ++x->unjudged_elements;
      return;
    }
    for (campaign_stats* x : both)
      if (x) {
        ++x->elements;
        ++x->histogram[e.pass ? ratio_bin(e.max_ratio) : campaign_edges.size() + 1];
        if (!e.pass) ++x->violations;
        x->max_ratio = std::max(x->max_ratio, e.max_ratio);
      }
    if (!e.pass) violated = true;
    worst.merge(e);
    if (also_worst) also_worst->merge(e);
  }
  // A subject's forward or backward output that did not come back whole: the
  // case fails with why (its error, or the guard bands it wrote over).
  template <class Output>
  bool failed_to_run(const Output& out) {
    if (out.ok()) return false;
    violated = true;
    ran = false;
    ++st.violations;
    worst.fail(out.status ? "subject returned " + out.error : "subject wrote outside its output: " + out.guard_report,
               failure_kind::subject_error);
    return true;
  }
};

// forward.cpp: O and LSE of the case (in its form) against the oracle of the dense problem.
void judge_forward(const subject& s, const attn_case& c, case_tally& t);

// backward.cpp: dQ, dK and dV (and d(sink) with sinks) against the backward
// oracle, each gradient's own stats in grads; then the fudge-factor rules.
void judge_backward(const subject& s, const attn_case& c, case_tally& t, std::map<std::string, campaign_stats>& grads);

}  // namespace attncheck::campaign_detail
