// HTML reports a person reads: one self-contained file per run of gate,
// repro, campaign, mutation or bench. Inline CSS and SVG only: no script, no
// font, nothing fetched, so the file reads offline and attaches to a CI run.
// Every text is escaped; every plot is drawn from data the run already holds.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "attncheck/campaign.hpp"
#include "attncheck/element_log.hpp"
#include "attncheck/gate.hpp"

namespace attncheck::html {

/// Text for HTML content and attribute values: & < > " ' escaped, control
/// characters (other than newline and tab) replaced by a space.
std::string escape(std::string_view text);

/// One SVG heat map: a cell per element, a log colour scale from 1e-4 to 1,
/// distinct colours past the bound, for inf and for "not judged", and the worst
/// element outlined (a rect of class "worst" carrying data-where, data-i, data-e).
std::string heat_map_svg(const heat_map& m);

/// What a histogram's bars count: each case's largest observed/bound (a
/// gate's law), or every element's (a campaign).
enum class histogram_of { cases, elements };

/// One SVG histogram of observed/bound over the ratio_bins bins (ratio_bin),
/// its axes labelled with what it counts; log_scale: bar heights by
/// log10(1 + count).
std::string ratio_histogram_svg(const std::string& title, const std::array<std::int64_t, ratio_bins>& counts, histogram_of unit,
                                bool log_scale);

/// A horizontal bar against a reference (100%): label, value, the reference, units.
struct bar {
  std::string label;
  double value = 0;
  double reference = 0;  ///< drawn as a red line: what 100% means (peak, bandwidth), or a baseline; 0: none
  std::string unit;
  bool percent = true;  ///< print value/reference as a percentage beside the bar
};
std::string bars_svg(const std::string& title, const std::vector<bar>& bars);

/// Writes the gate report of one run: a section per subject (header, law
/// table, a card per failure with its heat map, a histogram per law).
void write_gate_html(const std::string& path, const std::vector<gate_result>& runs);

/// run_gates's HTML report: write_gate_html of every subject once all are
/// gated, then "report: PATH" on out.
class gate_html_sink final : public gate_sink {
 public:
  gate_html_sink(std::string path, std::ostream& out) : path_(std::move(path)), out_(out) {}
  void take(const gate_result&, std::size_t) override {}
  void finish(const std::vector<gate_result>& results) override;

 private:
  std::string path_;
  std::ostream& out_;
};

/// Writes the report of one replay: the case, the worst element, the heat map.
void write_repro_html(const std::string& path, const repro_result& r);

/// Writes a campaign report: per-dtype histograms (log scale), the worst
/// cases, cases/s and the oracle tiers used.
void write_campaign_html(const std::string& path, const campaign_options& opt, const campaign_result& r);

/// One mutant's row of the mutation table.
struct mutant_row {
  std::string name;
  int killed_seeds = 0, seeds = 0;
  std::vector<std::pair<std::string, bool>> killers;  ///< law (short name), expected?
  std::vector<int> cases_to_kill;                     ///< per seed; -1: not killed by an expected law
  std::string shrunk_shape, smallest_shape, how;      ///< B,Hq,Hkv,Lq,Lk,D,Dv; the expected one; crash/hang
  double seconds = -1;                                ///< to kill on the first seed; < 0: not killed
};
struct mutation_report {
  std::string plugin, tiles, summary;  ///< summary: the kill-rate line the terminal prints
  std::vector<std::uint64_t> seeds;
  int cases = 0;
  double seconds = 0;
  std::vector<mutant_row> rows;
};
void write_mutation_html(const std::string& path, const mutation_report& r);

/// A bench run as the report draws it (the app fills it from impl/bench's
/// result): the probes, then one row per case.
struct bench_case {
  std::string name, kind;  ///< kind: "prefill" (judged in GFLOP/s) or "decode" (GB/s)
  int threads = 0;
  double ms = 0, gflops = 0, gbs = 0;
  double baseline_ms = 0;  ///< the naive baseline on the same case; 0: not timed
};
struct bench_report {
  int threads = 0;
  double peak_gflops = 0, peak_gflops_1 = 0, bandwidth_gbs = 0, bandwidth_gbs_1 = 0;
  std::vector<bench_case> cases;
  std::string table;  ///< the bench's console text, verbatim
};
void write_bench_html(const std::string& path, const bench_report& r);

/// Host name, CPU model, logical CPUs and kernel, in one line.
std::string machine_line();

}  // namespace attncheck::html
