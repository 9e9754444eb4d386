// Soundness and tightness campaign of the bound (docs/bound.md): the differential law
// (O and LSE against the oracle) on many generated cases, with the
// distribution of observed error / bound per dtype; with --backward, the
// backward oracle law (dQ, dK and dV against the backward oracle and its
// bound), per gradient too, beside what the PyTorch and FlashAttention
// fudge-factor rules would accept on the same cases.
#pragma once

#include <array>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "attncheck/case.hpp"
#include "attncheck/ratio_bins.hpp"
#include "attncheck/version.hpp"

namespace attncheck {

/// Largest shard count of --shard i/N.
inline constexpr int max_shards = 1024;

struct campaign_options {
  std::string subject = "builtin";
  std::int64_t cases = 10'000;
  std::uint64_t seed = 1;
  int shard_index = 0;              ///< this run is cases k with k % shard_count == shard_index
  int shard_count = 1;              ///< in [1, max_shards], at most cases: 1 is the whole run
  int jobs = 1;                     ///< forked workers, each a slice of the cases
  std::optional<dtype> only_type;   ///< every case in this storage type; else the generator's mix
  std::int64_t max_work = 200'000;  ///< generator cap, as the gate's --max-work
  /// Also draw the contract 1.1 variants the subject declares (--variants),
  /// as the gate's differential law does: half the cases, a case with a
  /// variant capped at min(max_work, run_default::variant_max_work).
  bool variants = false;
  /// Also draw fp8 inputs with descales (--fp8), as the gate's differential
  /// law does for a subject that declares them (half the cases); reports the
  /// largest observed/bound per fp8 input type. The subject must declare fp8.
  bool fp8 = false;
  /// Contract 1.2's input form of every case (--form): "" (dense), "paged" or
  /// "ragged", drawn by draw_input_form (attncheck/input_forms.hpp) as the
  /// paged and ragged laws draw it, long-context decodes left out; the subject runs in that form against the oracle of the dense
  /// problem (for ragged, on the rows of the problem).
  std::string form;
  /// Judge the backward pass instead (--backward): every case drawn and cut
  /// as backward.gradients_within_bound_of_oracle draws it (contract 1.0, work
  /// at most 3000, a dO recipe), dQ, dK and dV against reference_backward
  /// within the backward bound; the subject must declare backward. With
  /// variants: drawn as backward.variant_gradients_within_bound_of_oracle
  /// draws them, d(sink) judged too (the subject must declare
  /// FEATURE3_BACKWARD_VARIANTS). Not with a form (backward takes the dense one).
  bool backward = false;
  std::string out_dir;               ///< violating cases are saved here (first 20)
  std::ostream* progress = nullptr;  ///< progress lines go here (null: none)
  bool progress_tty = false;         ///< rewrite one line in place (a terminal) instead of plain lines
  double progress_seconds = 5;       ///< seconds between plain progress lines
};

/// A violating case: its index in the run, its line and the failure.
struct campaign_violation {
  std::int64_t index = 0;
  std::string what;
};

struct campaign_stats {
  std::int64_t cases = 0, elements = 0, violations = 0, violating_cases = 0;
  std::int64_t unjudged_elements = 0;                ///< NaN or +inf bound: outside the bound's domain
  std::array<std::int64_t, ratio_bins> histogram{};  ///< [exact 0] + one per edge + [> 1]
  double max_ratio = 0;
  std::string max_ratio_case;
  std::int64_t max_ratio_index = -1;  ///< the case behind max_ratio (ties: the earlier)
  std::string first_violation;        ///< the case line and worst element of the first violation
  /// The violating cases of lowest index, at most violations_kept, in case order.
  std::vector<campaign_violation> violating;
  static constexpr std::size_t violations_kept = 100;
  std::int64_t fast_tier_cases = 0;  ///< cases the oracle's fast binary64 tier judged (auto_tier)
  std::int64_t declined = 0;         ///< cases the subject declined (case_declined): drawn, not in `cases`
  /// The worst cases by their largest observed/bound (ties: the earlier),
  /// at most worst_kept, largest first: ratio, case line and worst element.
  std::vector<std::pair<double, std::string>> worst;
  std::vector<std::int64_t> worst_index;  ///< the case index of each entry of worst
  static constexpr std::size_t worst_kept = 8;
  /// Backward only: the cases every gradient element of which the bound
  /// judges (finite bound), and how many of those the bound, PyTorch's 180x
  /// rule and FlashAttention's 2x rule accept (attncheck/backward_fudge.hpp:
  /// a case is accepted when dQ, dK and dV all are).
  std::int64_t fudge_cases = 0, bound_accepts = 0, pytorch_accepts = 0, flash_accepts = 0;
  /// Folds in the stats of other cases of the same run (another worker's or
  /// shard's): counts add, the kept lists keep what one run over both would.
  void add(const campaign_stats& o);
};

/// One shard's share of a (merged) result.
struct campaign_shard {
  int index = 0;
  std::int64_t cases = 0;
  double seconds = 0;
};

/// The rows of campaign_result::by_feature, in report order: each contract
/// 1.1 variant of the feature table (features.hpp), then "none" (a case with
/// no variant). A case with several variants counts under each of them.
const std::vector<std::string>& campaign_features();
/// The rows of by_gradient (--backward): dSink only where a case had sinks (--variants).
inline constexpr const char* campaign_gradients[] = {"dQ", "dK", "dV", "dSink"};
/// The campaign_features rows of a case.
std::vector<std::string> features_of(const attn_case& c);

struct campaign_result {
  std::map<std::string, campaign_stats> by_type;     ///< "f32", "f16", "bf16"
  std::map<std::string, campaign_stats> by_feature;  ///< campaign_features: the same cases by variant
  /// Backward only: the same cases' elements by gradient, "dQ", "dK", "dV"
  /// (each counts the cases that have an element of it).
  std::map<std::string, campaign_stats> by_gradient;
  double seconds = 0;  ///< merged: the shards' seconds summed
  std::string subject_name;
  campaign_options options;              ///< what produced it (progress cleared; merged: shard 0 of 1)
  std::string version = version_string;  ///< the attncheck that ran it
  std::vector<campaign_shard> shards;    ///< the shards it holds: one, or every shard of a merge
  std::int64_t violations() const;
  std::int64_t cases() const;  ///< cases summed over the dtypes
};

/// Runs the campaign and prints its report to `out`.
campaign_result run_campaign(const campaign_options& opt, std::ostream& out);

/// Prints the report of a result (run or merged) as run_campaign does.
void print_campaign(const campaign_result& r, std::ostream& out);

/// Writes a result as JSON: configuration (subject, cases, seed, shard,
/// variants), histogram edges, per-dtype and per-feature stats with the kept
/// violations and worst cases (each with its case index), seconds and cases/s.
void write_campaign_json(const std::string& path, const campaign_result& r);

/// Reads a file write_campaign_json wrote (extra fields are ignored).
/// Throws input_error naming the file and the field on anything else.
campaign_result read_campaign_json(const std::string& path);

/// Parses "i/N" (0 <= i < N <= max_shards) into opt; throws input_error("--shard", ...).
void parse_shard(const std::string& text, campaign_options& opt);

/// Merges the shards of one run into the result of the unsharded run: every
/// file the same subject, cases, seed, dtype, max work, variants, shard count
/// and attncheck version, each shard exactly once. Throws input_error naming the
/// file (`names`, parallel to `shards`) that differs, a shard given twice,
/// or the missing shards.
campaign_result merge_campaigns(const std::vector<campaign_result>& shards, const std::vector<std::string>& names);

}  // namespace attncheck
