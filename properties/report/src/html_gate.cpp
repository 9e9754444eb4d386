// The HTML reports of a gate run (a section per subject) and of a replay.
#include <algorithm>

#include "attncheck/case.hpp"
#include "attncheck/failure_report.hpp"
#include "attncheck/features.hpp"
#include "attncheck/report.hpp"
#include "attncheck/report_html.hpp"
#include "attncheck/runner.hpp"
#include "attncheck/subject.h"
#include "html_internal.hpp"

namespace attncheck::html {

namespace {

// At most n characters of a note, cut at a space (never inside a number), with an ellipsis.
std::string note_text(const std::string& text, std::size_t n) {
  if (text.size() <= n) return text;
  const std::size_t cut = text.rfind(' ', n);
  return text.substr(0, cut == std::string::npos || cut < n / 2 ? n : cut) + " \xe2\x80\xa6";
}

std::string verdict_class(verdict v) {
  switch (v) {
    case verdict::pass: return "pass";
    case verdict::fail: return "fail";
    case verdict::skip: return "skip";
    case verdict::unjudged: return "fail";
  }
  return "";
}

std::string bits_text(std::uint32_t bits, const std::vector<std::pair<std::uint32_t, const char*>>& names) {
  std::string o;
  for (const auto& [bit, name] : names)
    if (bits & bit) o += (o.empty() ? "" : ", ") + std::string(name);
  return o.empty() ? "none" : o;
}

std::string dtypes_text(std::uint32_t bits) {
  std::string o;
  for (dtype t : {dtype::f32, dtype::f16, dtype::bf16})
    if (bits & (1u << static_cast<unsigned>(t))) o += (o.empty() ? "" : ", ") + std::string(name(t));
  return o.empty() ? "none" : o;
}

// A crash or hang leaves no replay to draw.
bool process_died(failure_kind k) { return k == failure_kind::crash || k == failure_kind::hang; }

void heat_map_block(std::ostream& o, const std::optional<heat_map>& heat, const std::string& why_none) {
  if (!heat) {
    o << "<p class=\"meta\">No heat map: " << escape(why_none) << "</p>\n";
    return;
  }
  o << "<h4>|error|/bound over (query i, output dim e) of batch " << heat->b << ", query head " << heat->h << "</h4>\n"
    << heat_map_svg(*heat) << "\n";
}

// One law's failure inside its bug's card: why, the worst element, the saved
// case and its replay command, and the heat map of its replay.
void failure_block(std::ostream& o, const gate_result& g, std::size_t k) {
  const auto& r = g.reports[k];
  const std::string saved = k < g.saved_at.size() ? g.saved_at[k] : std::string();
  o << "<div class=\"law-failure\" data-law=\"" << escape(r.law) << "\">\n<h4>FAIL " << escape(r.law) << "</h4>\n<dl>";
  row(o, "cases", std::to_string(r.cases) + " run, " + std::to_string(r.shrink_steps) + " shrink steps");
  row(o, "kind", failure_kind_name(r.failure.kind));
  row(o, "why", r.failure.message);
  if (!r.failure.worst.where.empty()) o << "<dt>worst</dt><dd class=\"worst\">" << escape(r.failure.worst.describe()) << "</dd>";
  if (!saved.empty()) {
    row(o, "saved", saved);
    o << "<dt>replay</dt><dd><code class=\"replay\">" << escape(replay_command(saved, g.subject_spec)) << "</code></dd>";
  }
  if (!r.reproduce.empty()) row(o, "rapidcheck", "RC_PARAMS=\"reproduce=" + r.reproduce + "\"");
  o << "</dl>\n";
  heat_map_block(o, r.heat,
                 process_died(r.failure.kind) ? "the subject's process died before the replay finished"
                                              : "the law compared no element of O or LSE");
  o << "</div>\n";
}

// The failures first, one card per bug: the failing laws grouped under their
// shared shrunk case, as the terminal's one-screen rule groups them (a law
// without a shrunk case, a crash or a hang, has a card of its own).
void failure_cards(std::ostream& o, const gate_result& g) {
  std::vector<std::pair<std::string, std::vector<std::size_t>>> bugs;  // (shrunk case, laws), in table order
  for (std::size_t k = 0; k < g.reports.size(); ++k) {
    const auto& r = g.reports[k];
    if (r.v != verdict::fail) continue;
    const std::string c = r.counterexample ? to_line(*r.counterexample) : std::string();
    auto at = std::find_if(bugs.begin(), bugs.end(), [&](const auto& b) { return !c.empty() && b.first == c; });
    if (at == bugs.end())
      bugs.emplace_back(c, std::vector<std::size_t>{k});
    else
      at->second.push_back(k);
  }
  for (const auto& [c, laws] : bugs) {
    o << "<div class=\"card failure\" data-laws=\"" << laws.size() << "\">\n<h3>FAIL ";
    for (std::size_t n = 0; n < laws.size(); ++n) o << (n ? ", " : "") << escape(g.reports[laws[n]].law);
    o << "</h3>\n";
    if (!c.empty())
      o << "<dl><dt>case</dt><dd><code>" << escape(c) << "</code>" << (laws.size() > 1 ? " (the shrunk case of each)" : "")
        << "</dd></dl>\n";
    for (std::size_t k : laws) failure_block(o, g, k);
    o << "</div>\n";
  }
}

void law_row(std::ostream& o, const law_report& r) {
  std::string note = r.v == verdict::skip ? r.skip_reason
                     : r.v == verdict::unjudged
                         ? "judged below the floor of " + num(100 * r.min_judged, "%.0f") + "%: " + r.unjudged_why
                     : r.v == verdict::fail ? note_text(r.failure.message, 240)
                                            : std::string();
  if (const std::string declined = replaced_declines_note(r); !declined.empty()) note += (note.empty() ? "" : "; ") + declined;
  o << "<tr class=\"" << verdict_class(r.v) << "\"><td><code>" << escape(r.law) << "</code></td><td class=\"n\">"
    << (r.v == verdict::skip ? std::string("-") : std::to_string(r.judged) + "/" + std::to_string(r.cases))
    << "</td><td class=\"n\">" << num(r.max_ratio) << "</td><td class=\"" << verdict_class(r.v) << "\">" << verdict_name(r.v)
    << "</td><td class=\"n\">" << num(r.seconds, "%.2f") << "</td><td>" << escape(note) << "</td></tr>\n";
}

// The law table: the laws that failed or went unjudged open; the passing and
// skipped ones folded below them, in the order the gate ran them.
void law_table(std::ostream& o, const gate_result& g) {
  const char* head =
      "<tr><th>law</th><th>judged/run</th><th>max observed/bound</th><th>verdict</th><th>seconds</th><th>note</th></tr>\n";
  int passed = 0, skipped = 0, other = 0;
  for (const auto& r : g.reports) (r.v == verdict::pass ? passed : r.v == verdict::skip ? skipped : other) += 1;
  o << "<h3>Laws</h3>\n";
  if (other) {
    o << "<table class=\"laws open\">" << head;
    for (const auto& r : g.reports)
      if (r.v == verdict::fail || r.v == verdict::unjudged) law_row(o, r);
    o << "</table>\n";
  }
  if (passed + skipped) {
    o << "<details class=\"folded-laws\"" << (other ? "" : " open") << "><summary>" << passed << " passed, " << skipped
      << " skipped</summary>\n<table class=\"laws\">" << head;
    for (const auto& r : g.reports)
      if (r.v == verdict::pass || r.v == verdict::skip) law_row(o, r);
    o << "</table>\n</details>\n";
  }
}

void gate_section(std::ostream& o, const gate_result& g, std::size_t index) {
  const run_config& opt = g.run;
  const bool failed = g.failed() || g.unjudged();
  o << "<section class=\"subject\" id=\"subject-" << index << "\">\n<h2>" << escape(g.subject_name) << " <code>"
    << escape(g.subject_spec) << "</code> <span class=\"verdict " << (failed ? "fail" : "pass") << "\">"
    << (failed ? "FAIL" : "PASS") << "</span></h2>\n";
  failure_cards(o, g);
  law_table(o, g);
  // What the subject declared and how the gate ran: below the verdicts, folded.
  o << "<details class=\"declaration\"><summary>declaration and run</summary>\n<dl>";
  std::string nb;
  for (const auto& [lk, n] : g.declared.nb_at)
    nb += (nb.empty() ? "" : ", ") + std::to_string(n) + " at Lk=" + std::to_string(lk);
  row(o, "ABI", "v" + std::to_string(g.abi));
  row(o, "dtypes", dtypes_text(g.dtypes));
  std::string features;  // every feature of the contract's table the subject declares, by its label
  for (const contract_feature& f : contract_features())
    if ((f.abi_word == 1 ? g.features : g.declared.features_v3) & f.bit) features += (features.empty() ? "" : ", ") + f.label;
  row(o, "features", features.empty() ? "none" : features);
  row(o, "claims",
      bits_text(g.claims, {{ATTNCHECK_CLAIM_DETERMINISTIC, "deterministic"},
                           {ATTNCHECK_CLAIM_THREADS, "any thread count"},
                           {ATTNCHECK_CLAIM_BATCH, "batch independent"},
                           {ATTNCHECK_CLAIM_CACHE, "cache == prefill"},
                           {ATTNCHECK_CLAIM_LAYOUT, "layout independent"},
                           {ATTNCHECK_CLAIM_LQ, "Lq independent"}}));
  row(o, "bound numbers",
      "u = 2^" + num(std::log2(g.declared.u), "%.4g") + ", exp " + num(g.declared.exp_ulps, "%.6g") + " ulps, key blocks nb " +
          nb);
  if (!g.declared.profile.empty()) row(o, "profile", g.declared.profile);
  if (!g.declared.conventions.empty()) row(o, "conventions", g.declared.conventions);
  if (!g.declared.limits.empty()) row(o, "limits", g.declared.limits);
  std::string hints;
  if (g.hints.q_tile) hints += "q_tile " + std::to_string(g.hints.q_tile) + " ";
  if (g.hints.k_tile) hints += "k_tile " + std::to_string(g.hints.k_tile) + " ";
  if (g.hints.split_keys) hints += "split_keys " + std::to_string(g.hints.split_keys);
  row(o, "size hints",
      (hints.empty() ? std::string("-") : hints) + (g.default_hints ? " (none declared; common production sizes)" : ""));
  row(o, "seed", std::to_string(opt.seed));
  if (const std::string run = run_string(opt); !run.empty()) row(o, "run", run);
  row(o, "budget",
      std::to_string(opt.cases) + " cases per law, max work " + std::to_string(opt.max_work) + ", law work " +
          std::to_string(opt.law_work) + ", law timeout " + num(opt.law_timeout, "%g") + " s" + (opt.strict ? ", strict" : "") +
          (opt.strict_declines ? ", strict declines" : ""));
  row(o, "time", num(g.seconds, "%.1f") + " s (the whole schedule)");
  o << "</dl>\n</details>\n";

  // A histogram per law.
  o << "<h3>Observed/bound per law</h3>\n<p class=\"meta\">Each case's largest |error|/bound, binned; bar heights on a log "
       "scale. Bit-for-bit laws read 0 (equal) or &gt;1 (differ).</p>\n<div class=\"grid\">\n";
  for (const auto& r : g.reports)
    if (r.v != verdict::skip) o << ratio_histogram_svg(r.law, r.ratio_histogram, histogram_of::cases, true) << "\n";
  o << "</div>\n</section>\n";
}

}  // namespace

void write_gate_html(const std::string& path, const std::vector<gate_result>& runs) {
  int failed = 0;
  std::string names;
  for (const auto& g : runs) {
    failed += g.failed() || g.unjudged();
    names += (names.empty() ? "" : ", ") + g.subject_name;
  }
  page p("gate", "attncheck gate: " + names + (failed ? " \xe2\x80\x94 FAIL" : " \xe2\x80\x94 PASS"));
  auto& o = p.body();
  o << "<p>" << runs.size() << " subject" << (runs.size() == 1 ? "" : "s") << " gated; " << failed << " failed. Each "
    << "subject leads with its failures, one card per bug (the failing laws that share a shrunk case) with each law's "
    << "replay command and heat map of |error|/bound; then the laws that failed or went unjudged, the passing and skipped "
    << "ones folded, the declaration, and each law's histogram of observed/bound.</p>\n";
  for (std::size_t i = 0; i < runs.size(); ++i) gate_section(o, runs[i], i + 1);
  p.write(path);
}

void write_repro_html(const std::string& path, const repro_result& r) {
  const bool failed = r.outcome.v == verdict::fail;
  page p("repro", "attncheck repro: " + r.law +
                      (r.status == 3 ? " \xe2\x80\x94 SKIP"
                       : failed      ? " \xe2\x80\x94 FAIL"
                                     : " \xe2\x80\x94 PASS"));
  auto& o = p.body();
  o << "<div class=\"" << (failed ? "card failure" : "card") << "\">\n<dl>";
  row(o, "law", r.law);
  row(o, "subject", r.subject_name + " (" + r.subject_spec + ")");
  row(o, "case", to_line(r.c));
  row(o, "file", r.file);
  if (failed) row(o, "kind", failure_kind_name(r.outcome.kind));
  if (failed || r.status == 3) row(o, "why", r.outcome.message);
  if (!r.outcome.worst.where.empty()) o << "<dt>worst</dt><dd class=\"worst\">" << escape(r.outcome.worst.describe()) << "</dd>";
  row(o, "judged",
      std::to_string(r.outcome.compared) + " elements" +
          (r.outcome.unbounded ? "; " + std::to_string(r.outcome.unbounded) + " outside the bound's domain" : ""));
  o << "</dl>\n";
  if (r.heat) {
    // The worst elements of the slice, largest first.
    std::vector<std::pair<double, std::string>> cells;
    for (std::int64_t i = 0; i < r.heat->rows; ++i)
      for (std::int64_t c = 0; c < r.heat->cols; ++c) {
        const double v = r.heat->ratio[static_cast<std::size_t>(i * r.heat->cols + c)];
        if (std::isnan(v)) continue;
        const bool lse = r.heat->lse_column && c == r.heat->cols - 1;
        cells.emplace_back(v, lse ? "LSE[b=" + std::to_string(r.heat->b) + ",h=" + std::to_string(r.heat->h) +
                                        ",i=" + std::to_string(r.heat->row0 + i) + "]"
                                  : "O[b=" + std::to_string(r.heat->b) + ",i=" + std::to_string(r.heat->row0 + i) +
                                        ",h=" + std::to_string(r.heat->h) + ",e=" + std::to_string(r.heat->col0 + c) + "]");
      }
    std::stable_sort(cells.begin(), cells.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    o << "<h3>Worst elements of batch " << r.heat->b << ", head " << r.heat->h
      << "</h3>\n<table class=\"worst-elements\"><tr><th>element</th>"
      << "<th>|error|/bound</th></tr>\n";
    for (std::size_t k = 0; k < std::min<std::size_t>(10, cells.size()); ++k)
      o << "<tr><td><code>" << escape(cells[k].second) << "</code></td><td class=\"n\">" << num(cells[k].first, "%.4g")
        << "</td></tr>\n";
    o << "</table>\n";
  }
  heat_map_block(o, r.heat,
                 r.status == 3                  ? "nothing was replayed"
                 : process_died(r.outcome.kind) ? "the subject's process died"
                                                : "the law compared no element of O or LSE");
  o << "</div>\n";
  p.write(path);
}

}  // namespace attncheck::html
