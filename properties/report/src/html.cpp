// The page every HTML report is, the text escape, the machine line and the
// SVG plots the reports draw.
#include "attncheck/report_html.hpp"

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

#include "html_internal.hpp"

namespace attncheck::html {

std::string num(double x, const char* fmt) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, x);
  return buf;
}

namespace {

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
.law-failure{border-top:1px solid #ecc8ca;margin-top:8px;padding-top:4px}.law-failure h4{margin:4px 0;color:#c0262d}
details{margin:8px 0}summary{cursor:pointer;color:#5a6473;font-weight:600}
)";

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

// A cell where the subject wrote NaN: its ratio is inf (a failure), but it is
// drawn apart, as NaN is the commonest failure and says the most.
constexpr const char* nan_fill = "#7b1fa2";

// What the subject wrote in cell k: heat_map::finite when the map predates the field.
char written(const heat_map& m, std::size_t k) { return k < m.got.size() ? m.got[k] : heat_map::finite; }

// A cell's value in words: its error/bound, with a NaN or infinity the subject wrote named.
std::string cell_text(double ratio, char got) {
  std::string t = std::isnan(ratio) ? std::string("not judged") : num(ratio, "%.4g");
  if (got == heat_map::nan) return "NaN output (error/bound " + t + ")";
  if (got == heat_map::inf) return "infinite output (error/bound " + t + ")";
  return t;
}

std::string bin_label(std::size_t i) {
  if (i == 0) return "0";
  if (i == ratio_bins - 1) return ">1";
  const double lo = i == 1 ? 0 : campaign_edges[i - 2], hi = campaign_edges[i - 1];
  return (i == 1 ? std::string("<") : num(lo, "%g") + "-") + num(hi, "%g");
}

}  // namespace

page::page(const std::string& kind, const std::string& title) {
  out_ << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
       << "<meta name=\"generator\" content=\"" << escape(provenance_line()) << "\">"
       << "<title>" << escape(title) << "</title><style>" << css << "</style></head>\n<body data-report=\"" << escape(kind)
       << "\">\n<h1>" << escape(title) << "</h1>\n<p class=\"meta\" id=\"made-by\">" << escape(provenance_line()) << "<br>"
       << escape(utc_now()) << " on " << escape(machine_line()) << "</p>\n";
}

void page::write(const std::string& path) {
  out_ << "</body></html>\n";
  std::ofstream f(path);
  if (!f) throw input_error("--html", "cannot write '" + path + "'");
  f << out_.str();
  if (!f) throw input_error("--html", "write to '" + path + "' failed");
}

void row(std::ostream& o, const std::string& term, const std::string& value) {
  o << "<dt>" << escape(term) << "</dt><dd>" << escape(value) << "</dd>";
}

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
      const auto k = static_cast<std::size_t>(r * m.cols + c);
      const double v = m.ratio[k];
      const char got = written(m, k);
      const bool lse = m.lse_column && c == m.cols - 1;
      o << "<rect x=\"" << left + c * cell << "\" y=\"" << top + r * cell << "\" width=\"" << cell << "\" height=\"" << cell
        << "\" fill=\"" << (got == heat_map::nan ? nan_fill : colour(v)) << "\""
        << (got == heat_map::finite ? ""
            : got == heat_map::nan  ? " class=\"nan-output\""
                                    : " class=\"inf-output\"")
        << "><title>i=" << m.row0 + r << (lse ? std::string(", LSE") : ", e=" + std::to_string(m.col0 + c)) << ": "
        << cell_text(v, got) << "</title></rect>\n";
      // A cell the subject wrote NaN or an infinity in says so, when there is room.
      if (got != heat_map::finite && cell >= 20)
        o << "<text x=\"" << left + c * cell + cell / 2 << "\" y=\"" << top + r * cell + cell / 2 + 4
          << "\" text-anchor=\"middle\" fill=\"#ffffff\" font-size=\"" << (cell >= 28 ? 10 : 8) << "\">"
          << (got == heat_map::nan ? "NaN" : "inf") << "</text>\n";
    }
  // A small map (a shrunk case's few elements) also writes each cell's value beside its row.
  if (m.rows * m.cols <= 8)
    for (std::int64_t r = 0; r < m.rows; ++r) {
      std::string values;
      for (std::int64_t c = 0; c < m.cols; ++c) {
        const double v = m.ratio[static_cast<std::size_t>(r * m.cols + c)];
        const bool lse = m.lse_column && c == m.cols - 1;
        values += (c ? ", " : "") + (lse ? std::string("LSE") : "e=" + std::to_string(m.col0 + c)) + " " +
                  cell_text(v, written(m, static_cast<std::size_t>(r * m.cols + c)));
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
  if (m.worst_row >= 0) {
    const char got = written(m, static_cast<std::size_t>(m.worst_row * m.cols + m.worst_col));
    o << "worst element (green outline): " << escape(m.worst_where) << ", "
      << escape(got == heat_map::finite ? "error/bound " + num(m.worst_ratio, "%.4g") : cell_text(m.worst_ratio, got));
  } else
    o << "the worst element (" << escape(m.worst_where.empty() ? std::string("none") : m.worst_where) << ") is not in this map";
  o << "</text>\n";
  // The legend: the error/bound scale, then the cells that are no ratio: an
  // infinite one (an infinity or bits where none was allowed), a NaN the
  // subject wrote, and nothing judged.
  const std::pair<std::string, const char*> keys[] = {
      {colour(0), "0"}, {colour(1e-4), "1e-4"}, {colour(1e-3), "1e-3"},    {colour(1e-2), "1e-2"}, {colour(1e-1), "0.1"},
      {colour(1), "1"}, {colour(2.0), "&gt;1"}, {colour(INFINITY), "inf"}, {nan_fill, "NaN out"},  {colour(NAN), "not judged"}};
  for (int k = 0; k < 10; ++k) {
    const std::int64_t x = left + k * 40 + (k >= 6 ? 12 : 0) + (k >= 9 ? 12 : 0);
    o << "<rect x=\"" << x << "\" y=\"" << ly + 4 << "\" width=\"38\" height=\"12\" fill=\"" << keys[k].first
      << "\" stroke=\"#999\"/><text x=\"" << x << "\" y=\"" << ly + 28 << "\">" << keys[k].second << "</text>\n";
  }
  o << "</svg>";
  if (m.rows < m.all_rows || m.cols - (m.lse_column ? 1 : 0) < m.all_cols)
    o << "<p class=\"meta\">A window of queries " << m.row0 << ".." << m.row0 + m.rows - 1 << " of " << m.all_rows
      << " and output dims " << m.col0 << ".." << m.col0 + m.cols - (m.lse_column ? 2 : 1) << " of " << m.all_cols
      << ", around the worst element.</p>";
  return o.str();
}

std::string ratio_histogram_svg(const std::string& title, const std::array<std::int64_t, ratio_bins>& counts, histogram_of unit,
                                bool log_scale) {
  const char* counted = unit == histogram_of::cases ? "cases" : "elements";
  const char* x_axis = unit == histogram_of::cases ? "each case's largest observed/bound" : "each element's observed/bound";
  // The full title, split after its group ("differential." / "output_within_...") when long.
  const std::size_t dot = title.find('.');
  const bool two_lines = title.size() > 40 && dot != std::string::npos;
  const int lines = two_lines ? 2 : 1;
  const int bw = 24, left = 44, top = 18 + 13 * lines, h = 90,
            width = std::max(320, left + 8 + static_cast<int>(ratio_bins) * bw);
  double most = 0;
  std::int64_t total = 0;
  for (auto n : counts)
    most = std::max(most, log_scale ? std::log10(1.0 + static_cast<double>(n)) : static_cast<double>(n)), total += n;
  std::ostringstream o;
  o << "<svg class=\"histogram\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << top + h + 98
    << "\" font-size=\"10\" font-family=\"sans-serif\" data-total=\"" << total << "\"><title>" << escape(title) << "</title>\n";
  o << "<text x=\"8\" y=\"12\" font-size=\"11\" font-weight=\"600\">";
  if (two_lines)
    o << "<tspan x=\"8\">" << escape(title.substr(0, dot + 1)) << "</tspan><tspan x=\"8\" dy=\"13\">"
      << escape(title.substr(dot + 1)) << "</tspan>";
  else
    o << escape(title);
  o << "</text>\n<text x=\"8\" y=\"" << 12 + 13 * lines << "\" fill=\"#5a6473\">" << total << " " << counted
    << (log_scale ? " (bar heights: log scale)" : "") << "</text>\n";
  // The count axis: 0 at the base, the largest bin's count at the top.
  std::int64_t largest = 0;
  for (auto n : counts) largest = std::max(largest, n);
  o << "<line x1=\"" << left - 2 << "\" x2=\"" << left - 2 << "\" y1=\"" << top << "\" y2=\"" << top + h
    << "\" stroke=\"#888\"/>\n<text class=\"count-axis\" x=\"" << left - 5 << "\" y=\"" << top + 4 << "\" text-anchor=\"end\">"
    << largest << "</text>\n<text x=\"" << left - 5 << "\" y=\"" << top + h
    << "\" text-anchor=\"end\">0</text>\n<text x=\"10\" y=\"" << top + h / 2 << "\" transform=\"rotate(-90 10 " << top + h / 2
    << ")\" text-anchor=\"middle\">" << counted << "</text>\n";
  for (std::size_t i = 0; i < ratio_bins; ++i) {
    const double v = log_scale ? std::log10(1.0 + static_cast<double>(counts[i])) : static_cast<double>(counts[i]);
    const int bh = most > 0 ? static_cast<int>(std::lround(h * v / most)) : 0;
    const bool over = i == ratio_bins - 1;
    o << "<rect x=\"" << left + static_cast<int>(i) * bw + 2 << "\" y=\"" << top + h - bh << "\" width=\"" << bw - 4
      << "\" height=\"" << std::max(bh, counts[i] ? 1 : 0) << "\" fill=\""
      << (over                  ? "#c0262d"
          : i + 2 >= ratio_bins ? "#e6550d"
                                : "#4292c6")
      << "\"><title>" << escape(bin_label(i)) << ": " << counts[i] << " " << counted << "</title></rect>\n";
    const int lx = left + static_cast<int>(i) * bw + bw / 2 + 3, ly = top + h + 8;
    o << "<text x=\"" << lx << "\" y=\"" << ly << "\" text-anchor=\"end\" font-size=\"9\" transform=\"rotate(-50 " << lx << " "
      << ly << ")\">" << escape(bin_label(i)) << "</text>\n";
  }
  o << "<line x1=\"" << left << "\" x2=\"" << width - 8 << "\" y1=\"" << top + h << "\" y2=\"" << top + h
    << "\" stroke=\"#888\"/>\n";
  o << "<text class=\"ratio-axis\" x=\"" << left << "\" y=\"" << top + h + 60 << "\" fill=\"#5a6473\">" << escape(x_axis)
    << "</text>\n";
  // The legend of the bar colours.
  const int gy = top + h + 74;
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

}  // namespace attncheck::html
