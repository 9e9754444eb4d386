// The HTML reports of a campaign, a mutation run and a bench run.
#include <algorithm>
#include <cmath>

#include "attncheck/report_html.hpp"
#include "html_internal.hpp"

namespace attncheck::html {

void write_campaign_html(const std::string& path, const campaign_options& opt, const campaign_result& r) {
  std::int64_t total = 0, fast = 0;
  for (const auto& [t, st] : r.by_type) total += st.cases, fast += st.fast_tier_cases;
  const bool failed = r.violations() > 0;
  page p("campaign", "attncheck campaign: " + r.subject_name + (failed ? " \xe2\x80\x94 FAIL" : " \xe2\x80\x94 PASS"));
  auto& o = p.body();
  o << "<dl>";
  row(o, "subject", r.subject_name + " (" + opt.subject + ")");
  row(o, "cases",
      std::to_string(total) + ", seed " + std::to_string(opt.seed) + " (case k drawn with seed + k), max work " +
          std::to_string(opt.max_work) + ", jobs " + std::to_string(opt.jobs));
  row(o, "time",
      num(r.seconds, "%.1f") + " s, " + num(r.seconds > 0 ? static_cast<double>(total) / r.seconds : 0, "%.0f") + " cases/s");
  if (opt.backward)
    row(o, "oracle", "the backward oracle (mpfr50) on every case: dQ, dK and dV within the backward bound");
  else
    row(o, "oracle",
        "auto_tier: the fast binary64 tier judged " + std::to_string(fast) + " of " + std::to_string(total) +
            " cases, mpfr50 the rest");
  row(o, "violations", std::to_string(r.violations()));
  o << "</dl>\n";
  o << "<table class=\"dtypes\"><tr><th>dtype</th><th>cases</th><th>elements judged</th><th>violations (cases)</th>"
       "<th>not judged</th><th>fast tier</th><th>largest observed/bound</th></tr>\n";
  for (const auto& [t, st] : r.by_type)
    o << "<tr><td>" << escape(t) << "</td><td class=\"n\">" << st.cases << "</td><td class=\"n\">" << st.elements
      << "</td><td class=\"n " << (st.violations ? "fail" : "pass") << "\">" << st.violations << " (" << st.violating_cases
      << ")</td><td class=\"n\">" << st.unjudged_elements << "</td><td class=\"n\">" << st.fast_tier_cases
      << "</td><td class=\"n\">" << num(st.max_ratio, "%.4g") << "</td></tr>\n";
  o << "</table>\n";
  if (opt.backward) {
    // Per gradient, and the fudge-factor rules beside the bound, as the console prints them.
    o << "<h2>Per gradient (--backward)</h2>\n<table class=\"gradients\"><tr><th>gradient</th><th>elements judged</th>"
         "<th>not judged</th><th>violations</th><th>largest observed/bound</th><th>its case</th></tr>\n";
    for (const char* g : campaign_gradients) {
      const auto it = r.by_gradient.find(g);
      if (std::string_view(g) == "dSink" && it == r.by_gradient.end()) continue;  // no case had sinks
      const campaign_stats empty;
      const campaign_stats& st = it == r.by_gradient.end() ? empty : it->second;
      o << "<tr><td>" << g << "</td><td class=\"n\">" << st.elements << "</td><td class=\"n\">" << st.unjudged_elements
        << "</td><td class=\"n " << (st.violations ? "fail" : "pass") << "\">" << st.violations << "</td><td class=\"n\">"
        << (st.cases ? num(st.max_ratio, "%.4g") : std::string("-")) << "</td><td><code>"
        << escape(st.cases ? st.max_ratio_case : std::string("-")) << "</code></td></tr>\n";
    }
    o << "</table>\n";
    if (opt.variants)
      o << "<p class=\"meta\">No fudge-factor comparison with --variants: its same-precision reference covers contract "
           "1.0 only.</p>\n";
  }
  if (opt.backward && !opt.variants) {
    o << "<h2>The fudge-factor rules on the same cases</h2>\n<p class=\"meta\">Of the cases whose every "
         "gradient element the bound judges, how many each accepts (a case: its dQ, dK and dV all accepted). PyTorch: "
         "180 times a same-precision reference's atol and rtol; FlashAttention: twice its largest error.</p>\n"
         "<table class=\"fudge\"><tr><th>dtype</th><th>cases</th><th>bound accepts</th><th>PyTorch 180x accepts</th>"
         "<th>FlashAttention 2x accepts</th></tr>\n";
    for (const auto& [t, st] : r.by_type)
      o << "<tr><td>" << escape(t) << "</td><td class=\"n\">" << st.fudge_cases << "</td><td class=\"n\">" << st.bound_accepts
        << "</td><td class=\"n\">" << st.pytorch_accepts << "</td><td class=\"n\">" << st.flash_accepts << "</td></tr>\n";
    o << "</table>\n";
  }
  if (opt.variants) {
    // The same cases by contract 1.1 variant, as the console prints them
    // (a case with several variants counts under each; "none": without one).
    o << "<h2>Per feature (--variants)</h2>\n<p class=\"meta\">A case with several variants counts under each; "
         "<code>none</code> is a case without one.</p>\n<table class=\"features\"><tr><th>feature</th><th>cases</th>"
         "<th>elements judged</th><th>violations (cases)</th><th>largest observed/bound</th><th>its case</th></tr>\n";
    for (const std::string& f : campaign_features()) {
      const auto it = r.by_feature.find(f);
      const campaign_stats empty;
      const campaign_stats& st = it == r.by_feature.end() ? empty : it->second;
      o << "<tr><td>" << escape(f) << "</td><td class=\"n\">" << st.cases << "</td><td class=\"n\">" << st.elements
        << "</td><td class=\"n " << (st.violations ? "fail" : "pass") << "\">" << st.violations << " (" << st.violating_cases
        << ")</td><td class=\"n\">" << (st.cases ? num(st.max_ratio, "%.4g") : std::string("-")) << "</td><td><code>"
        << escape(st.cases ? st.max_ratio_case : std::string("-")) << "</code></td></tr>\n";
    }
    o << "</table>\n";
    for (const std::string& f : campaign_features())
      if (const auto it = r.by_feature.find(f); it != r.by_feature.end() && !it->second.first_violation.empty())
        o << "<p class=\"fail\">first violation with " << escape(f) << ": <code>" << escape(it->second.first_violation)
          << "</code></p>\n";
  }
  o << "<h2>Observed/bound per element, per dtype</h2>\n<div class=\"grid\">\n";
  for (const auto& [t, st] : r.by_type) o << ratio_histogram_svg(t, st.histogram, histogram_of::elements, true) << "\n";
  o << "</div>\n<h2>Worst cases</h2>\n";
  for (const auto& [t, st] : r.by_type) {
    o << "<h3>" << escape(t)
      << "</h3>\n<table class=\"worst-cases\"><tr><th>observed/bound</th><th>case and worst element</th></tr>\n";
    for (const auto& [ratio, what] : st.worst)
      o << "<tr><td class=\"n\">" << num(ratio, "%.4g") << "</td><td><code>" << escape(what) << "</code></td></tr>\n";
    o << "</table>\n";
    if (!st.first_violation.empty())
      o << "<p class=\"fail\">first violation: <code>" << escape(st.first_violation) << "</code></p>\n";
  }
  p.write(path);
}

void write_mutation_html(const std::string& path, const mutation_report& r) {
  int survivors = 0;
  for (const auto& m : r.rows) survivors += m.killed_seeds < m.seeds;
  page p("mutation", std::string("attncheck mutation: ") + std::to_string(r.rows.size() - static_cast<std::size_t>(survivors)) +
                         "/" + std::to_string(r.rows.size()) + " mutants killed" +
                         (survivors ? " \xe2\x80\x94 FAIL" : " \xe2\x80\x94 PASS"));
  auto& o = p.body();
  std::string seeds;
  for (auto s : r.seeds) seeds += (seeds.empty() ? "" : " ") + std::to_string(s);
  o << "<dl>";
  row(o, "plugin", r.plugin);
  row(o, "tiles", r.tiles + " (0: production)");
  row(o, "seeds", seeds);
  row(o, "cases per law", std::to_string(r.cases));
  row(o, "time", num(r.seconds, "%.1f") + " s");
  o << "</dl>\n<p>" << escape(r.summary) << "</p>\n";
  o << "<h2>Kill table</h2>\n<table class=\"kills\"><tr><th>mutant</th><th>killed (seeds)</th><th>killing laws (first seed; bold: "
       "expected)</th><th>cases to kill</th><th>shrunk B,Hq,Hkv,Lq,Lk,D,Dv</th><th>smallest shape</th><th>s to kill</th></tr>\n";
  for (const auto& m : r.rows) {
    const bool all = m.killed_seeds == m.seeds;
    o << "<tr><td><code>" << escape(m.name) << "</code></td><td class=\"" << (all ? "pass" : "fail") << "\">"
      << (all ? "yes " : "NO ") << m.killed_seeds << "/" << m.seeds << "</td><td>";
    for (std::size_t k = 0; k < m.killers.size(); ++k)
      o << (k ? ", " : "") << (m.killers[k].second ? "<b>" : "") << escape(m.killers[k].first)
        << (m.killers[k].second ? "</b>" : "");
    if (m.killers.empty()) o << "none";
    if (!m.how.empty()) o << " (" << escape(m.how) << ")";
    o << "</td><td class=\"n\">";
    for (std::size_t k = 0; k < m.cases_to_kill.size(); ++k)
      o << (k ? " " : "") << (m.cases_to_kill[k] < 0 ? std::string("-") : std::to_string(m.cases_to_kill[k]));
    o << "</td><td><code>" << escape(m.shrunk_shape.empty() ? "-" : m.shrunk_shape) << "</code></td><td>"
      << escape(m.smallest_shape) << "</td><td class=\"n\">" << (m.seconds < 0 ? std::string("-") : num(m.seconds, "%.2f"))
      << "</td></tr>\n";
  }
  o << "</table>\n<h2>Cases to kill, per mutant</h2>\n<p class=\"meta\">The first seed's cases until the first expected law failed "
       "(shrinking not counted); a mutant that survived has no bar.</p>\n";
  std::vector<bar> bars;
  for (const auto& m : r.rows)
    bars.push_back({m.name,
                    m.cases_to_kill.empty() || m.cases_to_kill.front() < 0 ? 0.0 : static_cast<double>(m.cases_to_kill.front()),
                    0, "cases"});
  o << bars_svg("cases to kill (seed " + (r.seeds.empty() ? std::string("?") : std::to_string(r.seeds.front())) + ")", bars)
    << "\n";
  p.write(path);
}

void write_bench_html(const std::string& path, const bench_report& r) {
  page p("bench", "attncheck bench: the bundled kernel");
  auto& o = p.body();
  o << "<dl>";
  row(o, "threads", std::to_string(r.threads));
  row(o, "f32 FMA peak", num(r.peak_gflops, "%.1f") + " GFLOP/s (" + num(r.peak_gflops_1, "%.1f") + " on one thread)");
  row(o, "read bandwidth", num(r.bandwidth_gbs, "%.1f") + " GB/s (" + num(r.bandwidth_gbs_1, "%.1f") + " on one thread)");
  row(o, "cases", std::to_string(r.cases.size()));
  o << "</dl>\n";
  std::vector<bar> flops, bytes, baseline;
  for (const auto& c : r.cases) {
    const std::string label = c.name + (c.threads == 1 && r.threads != 1 ? " (1 thread)" : "");
    if (c.kind == "decode")
      bytes.push_back({label, c.gbs, c.threads == 1 ? r.bandwidth_gbs_1 : r.bandwidth_gbs, "GB/s"});
    else
      flops.push_back({label, c.gflops, c.threads == 1 ? r.peak_gflops_1 : r.peak_gflops, "GFLOP/s"});
    if (c.baseline_ms > 0 && c.ms > 0) baseline.push_back({label, c.baseline_ms / c.ms, 1, "x the naive baseline", false});
  }
  o << "<p class=\"meta\">Red line: the measured peak (GFLOP/s) or read bandwidth (GB/s) of this machine at the same thread "
       "count; for the speed-up, the naive baseline (1x). Decode can pass the probe's bandwidth where K and V fit in cache.</p>\n";
  if (!flops.empty()) o << bars_svg("prefill: GFLOP/s against the FMA peak", flops) << "\n";
  if (!bytes.empty()) o << bars_svg("decode: GB/s against the read bandwidth", bytes) << "\n";
  if (!baseline.empty()) o << bars_svg("speed-up over the naive f32 baseline (Eigen GEMM, softmax, GEMM)", baseline) << "\n";
  o << "<h2>Table</h2>\n<pre>" << escape(r.table) << "</pre>\n";
  p.write(path);
}

}  // namespace attncheck::html
