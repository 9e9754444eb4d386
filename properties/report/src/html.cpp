#include "attncheck/report_html.hpp"
#include "attncheck/report.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>

#include "attncheck/case.hpp"
#include "attncheck/failure_report.hpp"
#include "attncheck/runner.hpp"
#include "attncheck/subject.h"

namespace attncheck::html {

namespace {

std::string num(double x, const char* fmt = "%.3g") {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, x);
  return buf;
}

std::string utc_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

const char* css = R"(body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1d2430;background:#fff;max-width:1200px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #d8dde6;padding-bottom:4px}
h3{font-size:15px;margin:16px 0 6px}.meta{color:#5a6473;font-size:12px}code,pre{font:12px/1.4 ui-monospace,monospace}
pre{background:#f4f6f9;padding:8px;overflow-x:auto;white-space:pre-wrap;word-break:break-all}
table{border-collapse:collapse;margin:6px 0}th,td{border:1px solid #d8dde6;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#eef1f5}table.laws td:first-child{white-space:nowrap}td.n{text-align:right;font-variant-numeric:tabular-nums}
.pass{color:#1a7f37;font-weight:600}.fail{color:#c0262d;font-weight:700}.skip{color:#8a6d00}
.card{border:2px solid #c0262d;border-radius:6px;padding:10px 14px;margin:14px 0;background:#fffafa}
.card h3{margin-top:0;color:#c0262d}dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:6px 0}
dt{color:#5a6473}dd{margin:0;overflow-wrap:anywhere}td{overflow-wrap:anywhere}.grid{display:flex;flex-wrap:wrap;gap:10px}.grid svg{border:1px solid #e3e7ee}
.verdict{font-size:16px;padding:2px 10px;border-radius:4px;color:#fff}.verdict.pass{background:#1a7f37}.verdict.fail{background:#c0262d}
)";

// One page: a header with what produced it, then the body the caller writes.
class page {
 public:
  page(const std::string& kind, const std::string& title) {
    out_ << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
         << "<meta name=\"generator\" content=\"" << escape(provenance_line()) << "\">"
         << "<title>" << escape(title) << "</title><style>" << css << "</style></head>\n<body data-report=\"" << escape(kind)
         << "\">\n<h1>" << escape(title) << "</h1>\n<p class=\"meta\" id=\"made-by\">" << escape(provenance_line()) << "<br>"
         << escape(utc_now()) << " on " << escape(machine_line()) << "</p>\n";
  }
  std::ostringstream& body() { return out_; }
  void write(const std::string& path) {
    out_ << "</body></html>\n";
    std::ofstream f(path);
    if (!f) throw input_error("--html", "cannot write '" + path + "'");
    f << out_.str();
    if (!f) throw input_error("--html", "write to '" + path + "' failed");
  }

 private:
  std::ostringstream out_;
};

// The heat map's colours: white at 0, a log scale over [1e-4, 1] from pale
// blue to orange, then dark red past the bound, black for inf, grey where
// nothing was judged.
std::string colour(double r) {
  if (std::isnan(r)) return "#d9d9d9";
  if (std::isinf(r)) return "#000000";
  if (r > 1) return "#8b0000";
  if (r <= 0) return "#ffffff";
  const double t = std::clamp((std::log10(r) + 4) / 4, 0.0, 1.0);
  static const int stops[5][3] = {{239, 246, 255}, {158, 202, 225}, {66, 146, 198}, {253, 174, 107}, {230, 85, 13}};
  const double x = t * 4;
  const int k = std::min(3, static_cast<int>(x));
  const double f = x - k;
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", static_cast<int>(stops[k][0] + f * (stops[k + 1][0] - stops[k][0])),
                static_cast<int>(stops[k][1] + f * (stops[k + 1][1] - stops[k][1])),
                static_cast<int>(stops[k][2] + f * (stops[k + 1][2] - stops[k][2])));
  return buf;
}

// At most n characters of a note, cut at a space (never inside a number), with an ellipsis.
std::string note_text(const std::string& text, std::size_t n) {
  if (text.size() <= n) return text;
  const std::size_t cut = text.rfind(' ', n);
  return text.substr(0, cut == std::string::npos || cut < n / 2 ? n : cut) + " \xe2\x80\xa6";
}

std::string bin_label(std::size_t i) {
  if (i == 0) return "0";
  if (i == ratio_bins - 1) return ">1";
  const double lo = i == 1 ? 0 : campaign_edges[i - 2], hi = campaign_edges[i - 1];
  return (i == 1 ? std::string("<") : num(lo, "%g") + "-") + num(hi, "%g");
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

void row(std::ostream& o, const std::string& term, const std::string& value) {
  o << "<dt>" << escape(term) << "</dt><dd>" << escape(value) << "</dd>";
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

void gate_section(std::ostream& o, const gate_result& g, std::size_t index) {
  const run_config& opt = g.run;
  const bool failed = g.failed() || g.unjudged();
  o << "<section class=\"subject\" id=\"subject-" << index << "\">\n<h2>" << escape(g.subject_name) << " <code>"
    << escape(g.subject_spec) << "</code> <span class=\"verdict " << (failed ? "fail" : "pass") << "\">"
    << (failed ? "FAIL" : "PASS") << "</span></h2>\n<dl>";
  std::string nb;
  for (const auto& [lk, n] : g.declared.nb_at)
    nb += (nb.empty() ? "" : ", ") + std::to_string(n) + " at Lk=" + std::to_string(lk);
  row(o, "ABI", "v" + std::to_string(g.abi));
  row(o, "dtypes", dtypes_text(g.dtypes));
  row(o, "features",
      bits_text(g.features, {{ATTNCHECK_FEATURE_CAUSAL, "causal"},
                             {ATTNCHECK_FEATURE_PADDING, "padding"},
                             {ATTNCHECK_FEATURE_MASK, "mask"},
                             {ATTNCHECK_FEATURE_LSE, "LSE"},
                             {ATTNCHECK_FEATURE_CACHE, "cache"},
                             {ATTNCHECK_FEATURE_THREADS, "threads"}}));
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
          std::to_string(opt.law_work) + ", law timeout " + num(opt.law_timeout, "%g") + " s" + (opt.strict ? ", strict" : ""));
  row(o, "time", num(g.seconds, "%.1f") + " s (the whole schedule)");
  o << "</dl>\n";

  // The law table.
  o << "<h3>Laws</h3>\n<table class=\"laws\"><tr><th>law</th><th>judged/run</th><th>max observed/bound</th><th>verdict</th>"
       "<th>seconds</th><th>note</th></tr>\n";
  for (const auto& r : g.reports) {
    std::string note = r.v == verdict::skip ? r.skip_reason
                       : r.v == verdict::unjudged
                           ? "judged below the floor of " + num(100 * r.min_judged, "%.0f") + "%: " + r.unjudged_why
                       : r.v == verdict::fail ? note_text(r.failure.message, 240)
                                              : std::string();
    o << "<tr class=\"" << verdict_class(r.v) << "\"><td><code>" << escape(r.law) << "</code></td><td class=\"n\">"
      << (r.v == verdict::skip ? std::string("-") : std::to_string(r.judged) + "/" + std::to_string(r.cases))
      << "</td><td class=\"n\">" << num(r.max_ratio) << "</td><td class=\"" << verdict_class(r.v) << "\">" << verdict_name(r.v)
      << "</td><td class=\"n\">" << num(r.seconds, "%.2f") << "</td><td>" << escape(note) << "</td></tr>\n";
  }
  o << "</table>\n";

  // One card per failure.
  for (std::size_t k = 0; k < g.reports.size(); ++k) {
    const auto& r = g.reports[k];
    if (r.v != verdict::fail) continue;
    const std::string saved = k < g.saved_at.size() ? g.saved_at[k] : std::string();
    o << "<div class=\"card failure\" data-law=\"" << escape(r.law) << "\">\n<h3>FAIL " << escape(r.law) << "</h3>\n<dl>";
    if (r.counterexample) row(o, "case", to_line(*r.counterexample));
    row(o, "cases", std::to_string(r.cases) + " run, " + std::to_string(r.shrink_steps) + " shrink steps");
    row(o, "kind", failure_kind_name(r.failure.kind));
    row(o, "why", r.failure.message);
    if (!r.failure.worst.where.empty())
      o << "<dt>worst</dt><dd class=\"worst\">" << escape(r.failure.worst.describe()) << "</dd>";
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

  // A histogram per law.
  o << "<h3>Observed/bound per law</h3>\n<p class=\"meta\">Each case's largest |error|/bound, binned; bar heights on a log "
       "scale. Bit-for-bit laws read 0 (equal) or &gt;1 (differ).</p>\n<div class=\"grid\">\n";
  for (const auto& r : g.reports)
    if (r.v != verdict::skip) o << ratio_histogram_svg(r.law, r.ratio_histogram, true) << "\n";
  o << "</div>\n</section>\n";
}

}  // namespace

std::string escape(std::string_view text) {
  std::string o;
  o.reserve(text.size());
  for (char ch : text) {
    switch (ch) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&#39;"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20 && ch != '\n' && ch != '\t')
          o += ' ';
        else
          o += ch;
    }
  }
  return o;
}

std::string machine_line() {
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  std::string cpu = "unknown CPU";
  std::ifstream info("/proc/cpuinfo");
  for (std::string line; std::getline(info, line);)
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  utsname u{};
  uname(&u);
  return std::string(host) + ", " + cpu + ", " + std::to_string(sysconf(_SC_NPROCESSORS_ONLN)) + " logical CPUs, " + u.sysname +
         " " + u.release;
}

std::string heat_map_svg(const heat_map& m) {
  const std::int64_t cell = std::clamp<std::int64_t>(560 / std::max<std::int64_t>(1, std::max(m.cols, m.rows)), 6, 36);
  const std::int64_t left = 56, top = 34, width = left + m.cols * cell + 20, legend = 250;
  const std::int64_t height = top + m.rows * cell + 34;
  std::ostringstream o;
  o << "<svg class=\"heat-map\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << std::max(width, legend + 300) << "\" height=\""
    << height + 44 << "\" data-rows=\"" << m.rows << "\" data-cols=\"" << m.cols << "\" data-b=\"" << m.b << "\" data-h=\"" << m.h
    << "\" data-row0=\"" << m.row0 << "\" data-col0=\"" << m.col0 << "\" data-cell=\"" << cell << "\" data-left=\"" << left
    << "\" data-top=\"" << top << "\" font-size=\"11\" font-family=\"sans-serif\">\n";
  o << "<text x=\"" << left << "\" y=\"14\">output dim e" << (m.lse_column ? " (last column: LSE)" : "") << " &#8594;</text>\n";
  o << "<text x=\"12\" y=\"" << top + m.rows * cell / 2 << "\" transform=\"rotate(-90 12 " << top + m.rows * cell / 2
    << ")\" text-anchor=\"middle\">&#8592; query i</text>\n";
  const std::int64_t every_col = std::max<std::int64_t>(1, 24 / cell), every_row = std::max<std::int64_t>(1, 14 / cell);
  for (std::int64_t c = 0; c < m.cols; c += every_col) {
    const bool lse = m.lse_column && c == m.cols - 1;
    o << "<text x=\"" << left + c * cell + cell / 2 << "\" y=\"" << top - 5 << "\" text-anchor=\"middle\">"
      << (lse ? std::string("LSE") : std::to_string(m.col0 + c)) << "</text>\n";
  }
  if (m.lse_column && (m.cols - 1) % every_col != 0)
    o << "<text x=\"" << left + (m.cols - 1) * cell + cell / 2 << "\" y=\"" << top - 5
      << "\" text-anchor=\"middle\">LSE</text>\n";
  for (std::int64_t r = 0; r < m.rows; r += every_row)
    o << "<text x=\"" << left - 4 << "\" y=\"" << top + r * cell + cell / 2 + 4 << "\" text-anchor=\"end\">" << m.row0 + r
      << "</text>\n";
  for (std::int64_t r = 0; r < m.rows; ++r)
    for (std::int64_t c = 0; c < m.cols; ++c) {
      const double v = m.ratio[static_cast<std::size_t>(r * m.cols + c)];
      const bool lse = m.lse_column && c == m.cols - 1;
      o << "<rect x=\"" << left + c * cell << "\" y=\"" << top + r * cell << "\" width=\"" << cell << "\" height=\"" << cell
        << "\" fill=\"" << colour(v) << "\"><title>i=" << m.row0 + r
        << (lse ? std::string(", LSE") : ", e=" + std::to_string(m.col0 + c)) << ": "
        << (std::isnan(v) ? std::string("not judged") : num(v, "%.4g")) << "</title></rect>\n";
    }
  // A small map (a shrunk case's few elements) also writes each cell's value beside its row.
  if (m.rows * m.cols <= 8)
    for (std::int64_t r = 0; r < m.rows; ++r) {
      std::string values;
      for (std::int64_t c = 0; c < m.cols; ++c) {
        const double v = m.ratio[static_cast<std::size_t>(r * m.cols + c)];
        const bool lse = m.lse_column && c == m.cols - 1;
        values += (c ? ", " : "") + (lse ? std::string("LSE") : "e=" + std::to_string(m.col0 + c)) + " " +
                  (std::isnan(v) ? std::string("not judged") : num(v, "%.4g"));
      }
      o << "<text class=\"cell-values\" x=\"" << left + m.cols * cell + 8 << "\" y=\"" << top + r * cell + cell / 2 + 4 << "\">"
        << escape(values) << "</text>\n";
    }
  if (m.worst_row >= 0) {
    const bool lse = m.lse_column && m.worst_col == m.cols - 1;
    o << "<rect class=\"worst\" data-where=\"" << escape(m.worst_where) << "\" data-i=\"" << m.row0 + m.worst_row
      << "\" data-e=\"" << (lse ? std::string("LSE") : std::to_string(m.col0 + m.worst_col)) << "\" x=\""
      << left + m.worst_col * cell - 1 << "\" y=\"" << top + m.worst_row * cell - 1 << "\" width=\"" << cell + 2 << "\" height=\""
      << cell + 2 << "\" fill=\"none\" stroke=\"#00c853\" stroke-width=\"3\"><title>worst: " << escape(m.worst_where)
      << "</title></rect>\n";
  }
  // The legend.
  const std::int64_t ly = height + 4;
  o << "<text x=\"" << left << "\" y=\"" << ly - 6 << "\">";
  if (m.worst_row >= 0)
    o << "worst element (green outline): " << escape(m.worst_where) << ", error/bound " << escape(num(m.worst_ratio, "%.4g"));
  else
    o << "the worst element (" << escape(m.worst_where.empty() ? std::string("none") : m.worst_where) << ") is not in this map";
  o << "</text>\n";
  const std::pair<double, const char*> keys[] = {{0, "0"}, {1e-4, "1e-4"}, {1e-3, "1e-3"},    {1e-2, "1e-2"},     {1e-1, "0.1"},
                                                 {1, "1"}, {2.0, "&gt;1"}, {INFINITY, "inf"}, {NAN, "not judged"}};
  for (int k = 0; k < 9; ++k) {
    const std::int64_t x = left + k * 40 + (k >= 6 ? 12 : 0);
    o << "<rect x=\"" << x << "\" y=\"" << ly + 4 << "\" width=\"38\" height=\"12\" fill=\"" << colour(keys[k].first)
      << "\" stroke=\"#999\"/><text x=\"" << x << "\" y=\"" << ly + 28 << "\">" << keys[k].second << "</text>\n";
  }
  o << "</svg>";
  if (m.rows < m.all_rows || m.cols - (m.lse_column ? 1 : 0) < m.all_cols)
    o << "<p class=\"meta\">A window of queries " << m.row0 << ".." << m.row0 + m.rows - 1 << " of " << m.all_rows
      << " and output dims " << m.col0 << ".." << m.col0 + m.cols - (m.lse_column ? 2 : 1) << " of " << m.all_cols
      << ", around the worst element.</p>";
  return o.str();
}

std::string ratio_histogram_svg(const std::string& title, const std::array<std::int64_t, ratio_bins>& counts, bool log_scale) {
  // The full title, split after its group ("differential." / "output_within_...") when long.
  const std::size_t dot = title.find('.');
  const bool two_lines = title.size() > 40 && dot != std::string::npos;
  const int lines = two_lines ? 2 : 1;
  const int bw = 24, left = 44, top = 18 + 13 * lines, h = 90,
            width = std::max(280, left + 8 + static_cast<int>(ratio_bins) * bw);
  double most = 0;
  std::int64_t total = 0;
  for (auto n : counts)
    most = std::max(most, log_scale ? std::log10(1.0 + static_cast<double>(n)) : static_cast<double>(n)), total += n;
  std::ostringstream o;
  o << "<svg class=\"histogram\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << top + h + 86
    << "\" font-size=\"10\" font-family=\"sans-serif\" data-total=\"" << total << "\"><title>" << escape(title) << "</title>\n";
  o << "<text x=\"8\" y=\"12\" font-size=\"11\" font-weight=\"600\">";
  if (two_lines)
    o << "<tspan x=\"8\">" << escape(title.substr(0, dot + 1)) << "</tspan><tspan x=\"8\" dy=\"13\">"
      << escape(title.substr(dot + 1)) << "</tspan>";
  else
    o << escape(title);
  o << "</text>\n<text x=\"8\" y=\"" << 12 + 13 * lines << "\" fill=\"#5a6473\">" << total << " elements"
    << (log_scale ? " (bar heights: log scale)" : "") << "</text>\n";
  // The count axis: 0 at the base, the largest bin's count at the top.
  std::int64_t largest = 0;
  for (auto n : counts) largest = std::max(largest, n);
  o << "<line x1=\"" << left - 2 << "\" x2=\"" << left - 2 << "\" y1=\"" << top << "\" y2=\"" << top + h
    << "\" stroke=\"#888\"/>\n<text class=\"count-axis\" x=\"" << left - 5 << "\" y=\"" << top + 4 << "\" text-anchor=\"end\">"
    << largest << "</text>\n<text x=\"" << left - 5 << "\" y=\"" << top + h
    << "\" text-anchor=\"end\">0</text>\n<text x=\"10\" y=\"" << top + h / 2 << "\" transform=\"rotate(-90 10 " << top + h / 2
    << ")\" text-anchor=\"middle\">count</text>\n";
  for (std::size_t i = 0; i < ratio_bins; ++i) {
    const double v = log_scale ? std::log10(1.0 + static_cast<double>(counts[i])) : static_cast<double>(counts[i]);
    const int bh = most > 0 ? static_cast<int>(std::lround(h * v / most)) : 0;
    const bool over = i == ratio_bins - 1;
    o << "<rect x=\"" << left + static_cast<int>(i) * bw + 2 << "\" y=\"" << top + h - bh << "\" width=\"" << bw - 4
      << "\" height=\"" << std::max(bh, counts[i] ? 1 : 0) << "\" fill=\""
      << (over                  ? "#c0262d"
          : i + 2 >= ratio_bins ? "#e6550d"
                                : "#4292c6")
      << "\"><title>" << escape(bin_label(i)) << ": " << counts[i] << "</title></rect>\n";
    const int lx = left + static_cast<int>(i) * bw + bw / 2 + 3, ly = top + h + 8;
    o << "<text x=\"" << lx << "\" y=\"" << ly << "\" text-anchor=\"end\" font-size=\"9\" transform=\"rotate(-50 " << lx << " "
      << ly << ")\">" << escape(bin_label(i)) << "</text>\n";
  }
  o << "<line x1=\"" << left << "\" x2=\"" << width - 8 << "\" y1=\"" << top + h << "\" y2=\"" << top + h
    << "\" stroke=\"#888\"/>\n";
  // The legend of the bar colours.
  const int gy = top + h + 62;
  const std::pair<const char*, std::string> keys[] = {
      {"#4292c6", "observed/bound up to " + bin_label(ratio_bins - 3).substr(bin_label(ratio_bins - 3).find('-') + 1)},
      {"#e6550d", bin_label(ratio_bins - 2)},
      {"#c0262d", "over the bound"}};
  int x = 8;
  for (const auto& [fill, label] : keys) {
    o << "<rect class=\"legend\" x=\"" << x << "\" y=\"" << gy << "\" width=\"10\" height=\"10\" fill=\"" << fill
      << "\"/><text x=\"" << x + 13 << "\" y=\"" << gy + 9 << "\">" << escape(label) << "</text>\n";
    x += 20 + 6 * static_cast<int>(label.size());
  }
  o << "</svg>";
  return o.str();
}

std::string bars_svg(const std::string& title, const std::vector<bar>& bars) {
  const int label_w = 330, bar_w = 480, row_h = 22, top = 26;
  double most = 0;
  for (const auto& b : bars) most = std::max({most, b.value, b.reference});
  std::ostringstream o;
  o << "<svg class=\"bars\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << label_w + bar_w + 150 << "\" height=\""
    << top + static_cast<int>(bars.size()) * row_h + 10
    << "\" font-size=\"11\" font-family=\"sans-serif\">\n<text x=\"0\" y=\"14\" font-weight=\"600\">" << escape(title)
    << "</text>\n";
  for (std::size_t k = 0; k < bars.size(); ++k) {
    const auto& b = bars[k];
    const int y = top + static_cast<int>(k) * row_h;
    const int w = most > 0 ? static_cast<int>(bar_w * b.value / most) : 0;
    o << "<text x=\"" << label_w - 6 << "\" y=\"" << y + 14 << "\" text-anchor=\"end\">" << escape(b.label) << "</text>\n";
    o << "<rect x=\"" << label_w << "\" y=\"" << y + 3 << "\" width=\"" << std::max(w, 1) << "\" height=\"" << row_h - 6
      << "\" fill=\"#4292c6\"><title>" << escape(b.label) << ": " << num(b.value, "%.4g") << " " << escape(b.unit)
      << "</title></rect>\n";
    if (b.reference > 0) {
      const int rx = label_w + static_cast<int>(bar_w * b.reference / most);
      o << "<line x1=\"" << rx << "\" x2=\"" << rx << "\" y1=\"" << y + 1 << "\" y2=\"" << y + row_h - 1
        << "\" stroke=\"#c0262d\" stroke-width=\"2\"/>\n";
    }
    o << "<text x=\"" << label_w + w + 6 << "\" y=\"" << y + 14 << "\">" << num(b.value, "%.4g") << " " << escape(b.unit)
      << (b.reference > 0 && b.percent ? " (" + num(100 * b.value / b.reference, "%.0f") + "%)" : "") << "</text>\n";
  }
  o << "</svg>";
  return o.str();
}

void write_gate_html(const std::string& path, const std::vector<gate_result>& runs) {
  int failed = 0;
  std::string names;
  for (const auto& g : runs) {
    failed += g.failed() || g.unjudged();
    names += (names.empty() ? "" : ", ") + g.subject_name;
  }
  page p("gate", "attncheck gate: " + names + (failed ? " \xe2\x80\x94 FAIL" : " \xe2\x80\x94 PASS"));
  auto& o = p.body();
  o << "<p>" << runs.size() << " subject" << (runs.size() == 1 ? "" : "s") << " gated; " << failed
    << " failed. The verdict of each "
    << "law, a card per failure with its replay command and a heat map of |error|/bound, and each law's histogram of "
    << "observed/bound.</p>\n";
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
    for (const char* f : campaign_features) {
      const auto it = r.by_feature.find(f);
      const campaign_stats empty;
      const campaign_stats& st = it == r.by_feature.end() ? empty : it->second;
      o << "<tr><td>" << escape(f) << "</td><td class=\"n\">" << st.cases << "</td><td class=\"n\">" << st.elements
        << "</td><td class=\"n " << (st.violations ? "fail" : "pass") << "\">" << st.violations << " (" << st.violating_cases
        << ")</td><td class=\"n\">" << (st.cases ? num(st.max_ratio, "%.4g") : std::string("-")) << "</td><td><code>"
        << escape(st.cases ? st.max_ratio_case : std::string("-")) << "</code></td></tr>\n";
    }
    o << "</table>\n";
    for (const char* f : campaign_features)
      if (const auto it = r.by_feature.find(f); it != r.by_feature.end() && !it->second.first_violation.empty())
        o << "<p class=\"fail\">first violation with " << escape(f) << ": <code>" << escape(it->second.first_violation)
          << "</code></p>\n";
  }
  o << "<h2>Observed/bound per element, per dtype</h2>\n<div class=\"grid\">\n";
  for (const auto& [t, st] : r.by_type) o << ratio_histogram_svg(t + ": elements", st.histogram, true) << "\n";
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

bench_report parse_bench_table(const std::string& table) {
  bench_report r;
  r.table = table;
  std::istringstream in(table);
  for (std::string line; std::getline(in, line);) {
    if (std::sscanf(line.c_str(), "attnimpl bench: %d threads", &r.threads) == 1) continue;
    if (std::sscanf(line.c_str(), "probe: f32 FMA peak %lf GFLOP/s (1 thread), %lf GFLOP/s", &r.peak_gflops_1, &r.peak_gflops) ==
        2)
      continue;
    if (line.rfind("probe: memory read bandwidth", 0) == 0) {
      // "...: 1 thread best A, median ..., worst ... GB/s over N reps; T threads best B, ..."
      const auto one = line.find("1 thread best "), all = line.find("threads best ");
      if (one != std::string::npos) r.bandwidth_gbs_1 = std::atof(line.c_str() + one + 14);
      if (all != std::string::npos) r.bandwidth_gbs = std::atof(line.c_str() + all + 13);
      continue;
    }
    // A case row: the name in 46 columns, then thr time_ms GFLOP/s %peak GB/s %bw tok/s naive_ms speedup cpu/wall.
    if (line.size() <= 46 || !(line.rfind("prefill", 0) == 0 || line.rfind("decode", 0) == 0)) continue;
    std::istringstream fields(line.substr(46));
    std::vector<std::string> f;
    for (std::string x; fields >> x;) f.push_back(x);
    if (f.size() != 10) continue;
    bench_case c;
    c.name = line.substr(0, 46);
    c.name.erase(c.name.find_last_not_of(' ') + 1);
    c.kind = line.rfind("decode", 0) == 0 ? "decode" : "prefill";
    c.threads = std::atoi(f[0].c_str());
    c.ms = std::atof(f[1].c_str());
    c.gflops = std::atof(f[2].c_str());
    c.gbs = f[4] == "-" ? 0 : std::atof(f[4].c_str());
    c.baseline_ms = std::atof(f[7].c_str());
    r.cases.push_back(c);
  }
  return r;
}

}  // namespace attncheck::html
