// The campaign's console report: the run, per dtype the observed/bound
// histogram, per gradient (--backward) and per feature (--variants).
#include <cstdio>
#include <iomanip>
#include <ostream>
#include <string>
#include <string_view>

#include "campaign_internal.hpp"

namespace attncheck {

std::string campaign_detail::percent(std::int64_t n, std::int64_t of) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f%%", of ? 100.0 * static_cast<double>(n) / static_cast<double>(of) : 0.0);
  return buf;
}

namespace {

using campaign_detail::percent;

// A count column of a per-key table: its title, its width and the count it shows.
struct count_column {
  const char* title;
  int width;
  std::int64_t campaign_stats::*count;
};

// A table of one row per key of `by`: two count columns, the violations, the
// largest observed/bound and its case; a key `by` lacks shows zeros and "-",
// but for optional_key, which has no row then.
template <class Keys>
void print_keyed_table(std::ostream& out, const char* key_title, const Keys& keys,
                       const std::map<std::string, campaign_stats>& by, count_column a, count_column b,
                       std::string_view optional_key = {}) {
  char row[200];
  std::snprintf(row, sizeof row, "  %-8s %*s %*s %10s %12s  %s\n", key_title, a.width, a.title, b.width, b.title, "violations",
                "max obs/bd", "case of the largest observed/bound");
  out << row;
  for (const auto& k : keys) {
    const std::string key(k);
    const auto it = by.find(key);
    if (it == by.end() && key == optional_key) continue;
    const campaign_stats empty;
    const campaign_stats& st = it == by.end() ? empty : it->second;
    std::snprintf(row, sizeof row, "  %-8s %*lld %*lld %10lld %12.4g  ", key.c_str(), a.width,
                  static_cast<long long>(st.*a.count), b.width, static_cast<long long>(st.*b.count),
                  static_cast<long long>(st.violations), st.max_ratio);
    out << row << (st.cases ? st.max_ratio_case : std::string("-")) << "\n";
  }
}

// --backward: the elements by gradient, and the fudge-factor rules beside the
// bound on the same cases.
void print_backward_tables(const campaign_result& r, std::ostream& out) {
  out << "\nby gradient (every dtype):\n";
  // dSink only where a case had sinks.
  print_keyed_table(out, "gradient", campaign_gradients, r.by_gradient, {"elements", 14, &campaign_stats::elements},
                    {"unjudged", 12, &campaign_stats::unjudged_elements}, "dSink");
  if (r.options.variants) {
    out << "\nno fudge-factor comparison with --variants: its same-precision reference covers contract 1.0 only\n";
    return;
  }
  char row[200];
  out << "\nthe fudge-factor rules on the same cases (docs/campaign.md, \"Backward\"): of the cases whose every gradient\n"
         "element the bound judges, how many each accepts (a case is accepted when its dQ, dK and dV all are);\n"
         "PyTorch: |x - exact| <= 180 (atol + rtol |exact|) from a same-precision reference's error,\n"
         "FlashAttention: max |x - exact| <= 2 max |reference - exact|\n";
  std::snprintf(row, sizeof row, "  %-6s %12s %22s %22s %22s\n", "dtype", "cases", "bound accepts", "PyTorch 180x accepts",
                "FlashAttn 2x accepts");
  out << row;
  for (const auto& by_type : r.by_type) {
    const std::string& t = by_type.first;
    const campaign_stats& st = by_type.second;  // not a structured binding: the lambda captures it
    const auto cell = [&](std::int64_t n) {
      char c[40];
      std::snprintf(c, sizeof c, "%lld (%.2f%%)", static_cast<long long>(n),
                    st.fudge_cases ? 100.0 * static_cast<double>(n) / static_cast<double>(st.fudge_cases) : 0.0);
      return std::string(c);
    };
    std::snprintf(row, sizeof row, "  %-6s %12lld %22s %22s %22s\n", t.c_str(), static_cast<long long>(st.fudge_cases),
                  cell(st.bound_accepts).c_str(), cell(st.pytorch_accepts).c_str(), cell(st.flash_accepts).c_str());
    out << row;
  }
}

}  // namespace

void print_campaign(const campaign_result& r, std::ostream& out) {
  const campaign_options& opt = r.options;
  const std::int64_t total = r.cases();
  std::int64_t total_fast = 0;
  for (const auto& [t, st] : r.by_type) total_fast += st.fast_tier_cases;
  out << "attncheck campaign: subject " << r.subject_name << " (" << opt.subject << "), " << total << " cases";
  if (opt.shard_count > 1)
    out << " (shard " << opt.shard_index << "/" << opt.shard_count << " of " << opt.cases << ": cases k with k % "
        << opt.shard_count << " = " << opt.shard_index << ")";
  out << ", seed " << opt.seed;
  if (opt.variants) out << ", variants";
  if (!opt.form.empty()) out << ", form " << opt.form;
  if (opt.backward) out << ", backward";
  if (r.shards.size() > 1)
    out << ", " << r.shards.size() << " shards merged";
  else
    out << ", jobs " << opt.jobs;
  out << "\n";
  if (opt.backward)
    out << "oracle: the backward oracle (mpfr50) on every case, cases drawn as "
        << (opt.variants ? campaign_detail::backward_variant_law : campaign_detail::backward_law) << " draws them ("
        << (opt.variants ? "the declared variants, d(sink) judged as dSink" : "contract 1.0") << ", B*Hq*Lq*Lk*(D+Dv) <= 3000)\n";
  else
    out << "oracle: auto_tier: fast binary64 tier judged " << total_fast << " of " << total << " cases ("
        << percent(total_fast, total) << "), mpfr50 the rest\n";
  char rate[96];
  std::snprintf(rate, sizeof rate, "%.1f s%s, %.0f cases/s", r.seconds, r.shards.size() > 1 ? " (the shards' sum)" : "",
                r.seconds > 0 ? static_cast<double>(total) / r.seconds : 0.0);
  out << "time: " << rate << "\n";
  for (const auto& [t, st] : r.by_type) {
    out << "\n[" << t << "] " << st.cases << " cases, " << st.elements
        << (opt.backward ? (opt.variants ? " elements (dQ, dK, dV, dSink)" : " elements (dQ, dK, dV)") : " elements (O and LSE)")
        << " judged, violations " << st.violations << " in " << st.violating_cases << " cases; " << st.unjudged_elements
        << " elements outside the bound's domain (NaN or +inf bound: not judged)";
    if (st.declined) out << "; " << st.declined << " cases declined by the subject (not judged)";
    out << "\n";
    if (!opt.backward)
      out << "  judged by the fast oracle tier: " << st.fast_tier_cases << " cases (" << percent(st.fast_tier_cases, st.cases)
          << ")\n";
    out << "  observed/bound histogram (per element):\n";
    out << "    " << std::setw(14) << "= 0"
        << "  " << std::setw(12) << st.histogram[0] << "  " << percent(st.histogram[0], st.elements) << "\n";
    double lo = 0;
    for (std::size_t i = 0; i < campaign_edges.size(); ++i) {
      char label[40];
      std::snprintf(label, sizeof label, "(%g, %g%s", lo, campaign_edges[i], i + 1 == campaign_edges.size() ? "]" : ")");
      out << "    " << std::setw(14) << label << "  " << std::setw(12) << st.histogram[i + 1] << "  "
          << percent(st.histogram[i + 1], st.elements) << "\n";
      lo = campaign_edges[i];
    }
    out << "    " << std::setw(14) << "> 1"
        << "  " << std::setw(12) << st.histogram.back() << "  " << percent(st.histogram.back(), st.elements) << "\n";
    char m[32];
    std::snprintf(m, sizeof m, "%.4g", st.max_ratio);
    out << "  largest observed/bound " << m << ": " << st.max_ratio_case << "\n";
    if (!st.first_violation.empty()) out << "  first violation: " << st.first_violation << "\n";
  }
  if (opt.backward) print_backward_tables(r, out);
  if (opt.variants) {
    // Per feature: the same cases by contract 1.1 variant (a case with
    // several counts under each); "none" is a case without one.
    out << "\nby feature (--variants; a case with several variants counts under each):\n";
    print_keyed_table(out, "feature", campaign_features(), r.by_feature, {"cases", 10, &campaign_stats::cases},
                      {"elements", 14, &campaign_stats::elements});
    const auto none = r.by_feature.find("none");
    const std::int64_t with_variant = total - (none == r.by_feature.end() ? 0 : none->second.cases);
    out << "  cases with a variant: " << with_variant << " of " << total << " (" << percent(with_variant, total) << ")";
    if (with_variant == 0) out << "; the subject declares no variant (ABI v3 features) or the run drew none";
    out << "\n";
    for (const std::string& f : campaign_features())
      if (const auto it = r.by_feature.find(f); it != r.by_feature.end() && !it->second.first_violation.empty())
        out << "  first violation with " << f << ": " << it->second.first_violation << "\n";
  }
  if (opt.fp8) {
    // The same cases by fp8 input type (a case with both counts under each).
    out << "\nby fp8 input type (--fp8; a case with e4m3 and e5m2 inputs counts under each):\n";
    const std::vector<std::string> rows = {"fp8 e4m3", "fp8 e5m2"};
    print_keyed_table(out, "fp8 input", rows, r.by_feature, {"cases", 10, &campaign_stats::cases},
                      {"elements", 14, &campaign_stats::elements});
  }
  out << "\ncampaign: " << r.violations() << " violations" << (r.violations() ? "  -> FAIL" : "  -> PASS") << "\n";
}

}  // namespace attncheck
