#include "attncheck/element_log.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace attncheck {

namespace {

thread_local element_log* open_log = nullptr;

}  // namespace

element_log::element_log() : outer_(open_log) { open_log = this; }
element_log::~element_log() { open_log = outer_; }
element_log* element_log::current() { return open_log; }

void element_log::note(const element_where& where, double ratio, double got) {
  if (entries_.size() >= max_entries) return;
  const char kind = std::isnan(got) ? heat_map::nan : std::isinf(got) ? heat_map::inf : heat_map::finite;
  if (where.at) entries_.push_back({*where.at, ratio, kind});
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
  // (i, e) -> (ratio, what was written); e = -1: LSE
  std::map<std::pair<std::int64_t, std::int64_t>, std::pair<double, char>> cell;
  std::int64_t rows = 0, dims = 0;
  for (const auto& en : log.entries()) {
    if (en.at.b != m.b || en.at.h != m.h) continue;
    rows = std::max(rows, en.at.i + 1);
    if (en.at.e >= 0)
      dims = std::max(dims, en.at.e + 1);
    else
      m.lse_column = true;
    auto [it, fresh] = cell.try_emplace({en.at.i, en.at.e}, en.ratio, en.got);
    auto& [ratio, got] = it->second;
    if (!fresh && (std::isnan(ratio) || en.ratio > ratio)) ratio = en.ratio;
    if (en.got != heat_map::finite) got = en.got;  // a NaN or inf written in any run of the case shows
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
  m.got.assign(m.ratio.size(), heat_map::finite);
  for (const auto& [at, value] : cell) {
    const auto [ratio, got] = value;
    const auto [i, e] = at;
    const std::int64_t r = i - m.row0;
    const std::int64_t c = e < 0 ? m.cols - 1 : e - m.col0;
    if (r < 0 || r >= m.rows || c < 0 || (e >= 0 && c >= kept_dims)) continue;
    m.ratio[static_cast<std::size_t>(r * m.cols + c)] = ratio;
    m.got[static_cast<std::size_t>(r * m.cols + c)] = got;
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
