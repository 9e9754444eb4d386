// Soundness and tightness campaign of the SPEC bound: the differential law
// (O and LSE against the oracle) on many generated cases, with the
// distribution of observed error / bound per dtype.
#pragma once

#include <array>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "attncheck/case.hpp"

namespace attncheck {

struct campaign_options {
  std::string subject = "builtin";
  std::int64_t cases = 10'000;
  std::uint64_t seed = 1;
  int jobs = 1;                      ///< forked workers, each a slice of the cases
  std::optional<dtype> only_type;    ///< every case in this storage type; else the generator's mix
  std::int64_t max_work = 200'000;   ///< generator cap, as the gate's --max-work
  std::string out_dir;               ///< violating cases are saved here (first 20)
  std::ostream* progress = nullptr;  ///< progress lines go here (null: none)
  bool progress_tty = false;         ///< rewrite one line in place (a terminal) instead of plain lines
  double progress_seconds = 5;       ///< seconds between plain progress lines
};

/// Histogram edges of observed/bound: [0], (0,1e-3), [1e-3,1e-2), ... [0.9,1], >1.
inline constexpr std::array<double, 8> campaign_edges{1e-3, 1e-2, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0};
/// Bins of that histogram: exact 0, one per edge, and > 1 (NaN too: never a pass).
inline constexpr std::size_t ratio_bins = campaign_edges.size() + 2;

/// The bin of an observed/bound ratio: 0 for exactly 0, ratio_bins - 1 past 1.
inline std::size_t ratio_bin(double ratio) {
  if (ratio == 0) return 0;
  for (std::size_t i = 0; i < campaign_edges.size(); ++i)
    if (ratio < campaign_edges[i] || (i + 1 == campaign_edges.size() && ratio <= campaign_edges[i])) return i + 1;
  return campaign_edges.size() + 1;
}

struct campaign_stats {
  std::int64_t cases = 0, elements = 0, violations = 0, violating_cases = 0;
  std::int64_t unjudged_elements = 0;                ///< NaN or +inf bound: outside the bound's domain
  std::array<std::int64_t, ratio_bins> histogram{};  ///< [exact 0] + one per edge + [> 1]
  double max_ratio = 0;
  std::string max_ratio_case;
  std::string first_violation;       ///< the case line and worst element of the first violation
  std::int64_t fast_tier_cases = 0;  ///< cases the oracle's fast binary64 tier judged (auto_tier)
  /// The worst cases by their largest observed/bound (ties: the earlier),
  /// at most worst_kept, largest first: ratio, case line and worst element.
  std::vector<std::pair<double, std::string>> worst;
  static constexpr std::size_t worst_kept = 8;
  void add(const campaign_stats& o);
};

struct campaign_result {
  std::map<std::string, campaign_stats> by_type;  ///< "f32", "f16", "bf16"
  double seconds = 0;
  std::string subject_name;
  std::int64_t violations() const;
};

/// Runs the campaign and prints its report to `out`.
campaign_result run_campaign(const campaign_options& opt, std::ostream& out);

}  // namespace attncheck
