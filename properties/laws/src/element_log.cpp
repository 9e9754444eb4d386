#include "attncheck/element_log.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>

namespace attncheck {

namespace {

thread_local element_log* open_log = nullptr;

// Reads "k=<int>" at s[pos]; advances pos past the number.
bool read_field(const std::string& s, std::size_t& pos, char key, std::int64_t& value) {
  if (pos + 2 > s.size() || s[pos] != key || s[pos + 1] != '=') return false;
  const char* begin = s.c_str() + pos + 2;
  char* end = nullptr;
  const long long v = std::strtoll(begin, &end, 10);
  if (end == begin || v < 0) return false;
  value = v;
  pos = static_cast<std::size_t>(end - s.c_str());
  return true;
}

bool read_fields(const std::string& s, std::size_t pos, const char* keys, std::int64_t* values) {
  for (int k = 0; keys[k]; ++k) {
    if (k > 0) {
      if (pos >= s.size() || s[pos] != ',') return false;
      ++pos;
    }
    if (!read_field(s, pos, keys[k], values[k])) return false;
  }
  return pos < s.size() && s[pos] == ']';
}

}  // namespace

std::optional<element_index> parse_where(const std::string& where) {
  const bool lse = where.rfind("LSE", 0) == 0;
  if (const auto at = where.find("O[b="); at != std::string::npos) {
    std::int64_t v[4];
    if (!read_fields(where, at + 2, "bihe", v)) return std::nullopt;
    return element_index{v[0], v[2], v[1], lse ? -1 : v[3]};
  }
  if (const auto at = where.find("LSE[b="); at != std::string::npos) {
    std::int64_t v[3];
    if (!read_fields(where, at + 4, "bhi", v)) return std::nullopt;
    return element_index{v[0], v[1], v[2], -1};
  }
  return std::nullopt;
}

worst_element indexed(worst_element w) {
  if (!w.at) w.at = parse_where(w.where);
  return w;
}

element_log::element_log() : outer_(open_log) { open_log = this; }
element_log::~element_log() { open_log = outer_; }
element_log* element_log::current() { return open_log; }

void element_log::note(const std::string& where, double ratio) {
  if (entries_.size() >= max_entries) return;
  if (const auto at = parse_where(where)) entries_.push_back({*at, ratio});
}

std::optional<heat_map> heat_map_of(const element_log& log, const worst_element& worst) {
  if (log.entries().empty()) return std::nullopt;
  const auto& named = worst.at;
  heat_map m;
  if (named) {
    m.b = named->b, m.h = named->h;
  } else {
    // The slice of the largest noted ratio (NaN, not judged, never wins).
    double best = -1;
    for (const auto& en : log.entries())
      if (en.ratio > best) best = en.ratio, m.b = en.at.b, m.h = en.at.h;
  }
  // The largest ratio per element of the slice; NaN only where nothing was judged.
  std::map<std::pair<std::int64_t, std::int64_t>, double> cell;  // (i, e) -> ratio; e = -1: LSE
  std::int64_t rows = 0, dims = 0;
  for (const auto& en : log.entries()) {
    if (en.at.b != m.b || en.at.h != m.h) continue;
    rows = std::max(rows, en.at.i + 1);
    if (en.at.e >= 0)
      dims = std::max(dims, en.at.e + 1);
    else
      m.lse_column = true;
    auto [it, fresh] = cell.try_emplace({en.at.i, en.at.e}, en.ratio);
    if (!fresh && (std::isnan(it->second) || en.ratio > it->second)) it->second = en.ratio;
  }
  if (cell.empty()) return std::nullopt;
  m.all_rows = rows, m.all_cols = dims;
  // A window of at most max_side x max_side cells around the worst element.
  const std::int64_t wi = named ? named->i : 0, we = named && named->e >= 0 ? named->e : 0;
  const std::int64_t dim_side = heat_map::max_side - (m.lse_column ? 1 : 0);
  m.rows = std::min(rows, heat_map::max_side);
  const std::int64_t kept_dims = std::min(dims, dim_side);
  m.row0 = std::clamp<std::int64_t>(wi - m.rows / 2, 0, rows - m.rows);
  m.col0 = std::clamp<std::int64_t>(we - kept_dims / 2, 0, dims - kept_dims);
  m.cols = kept_dims + (m.lse_column ? 1 : 0);
  m.ratio.assign(static_cast<std::size_t>(m.rows * m.cols), std::numeric_limits<double>::quiet_NaN());
  for (const auto& [at, ratio] : cell) {
    const auto [i, e] = at;
    const std::int64_t r = i - m.row0;
    const std::int64_t c = e < 0 ? m.cols - 1 : e - m.col0;
    if (r < 0 || r >= m.rows || c < 0 || (e >= 0 && c >= kept_dims)) continue;
    m.ratio[static_cast<std::size_t>(r * m.cols + c)] = ratio;
  }
  m.worst_where = worst.where;
  m.worst_ratio = worst.ratio;
  if (named) {
    m.worst_row = named->i - m.row0;
    m.worst_col = named->e < 0 ? m.cols - 1 : named->e - m.col0;
    if (m.worst_row < 0 || m.worst_row >= m.rows || m.worst_col < 0 || m.worst_col >= m.cols || (named->e < 0 && !m.lse_column))
      m.worst_row = m.worst_col = -1;
  }
  return m;
}

}  // namespace attncheck
