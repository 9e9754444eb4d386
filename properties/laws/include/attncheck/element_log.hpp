// The elements a law compared, kept while a log is open on the thread: the
// runner opens one for its replay of a shrunk failure, so a report can draw
// |error|/bound over the worst (batch, head) from the run itself, without a
// second pass over the oracle. No log is open anywhere else, so the laws pay
// one thread-local load per element.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attncheck/check.hpp"

namespace attncheck {

/// Opens on construction (on this thread), closes on destruction.
class element_log {
 public:
  struct entry {
    element_index at;
    double ratio;  ///< |error|/bound; inf for a NaN, inf or bit mismatch; NaN when not judged
    char got;      ///< what the subject wrote there: heat_map::finite, heat_map::nan or heat_map::inf
  };
  element_log();
  ~element_log();
  element_log(const element_log&) = delete;
  element_log& operator=(const element_log&) = delete;

  /// The log open on this thread, or nullptr.
  static element_log* current();
  /// Keeps the element if `where` is one of O or LSE, with the class of the
  /// subject's value `got` there (a finite one unless given); at most max_entries.
  void note(const element_where& where, double ratio, double got = 0.0);
  const std::vector<entry>& entries() const { return entries_; }
  /// A bound on memory: 4M entries (64 MiB) is far above what a shrunk case compares.
  static constexpr std::size_t max_entries = std::size_t{1} << 22;

 private:
  element_log* outer_;
  std::vector<entry> entries_;
};

/// |error|/bound over (query i, output dim e) of one (batch, query head): the
/// largest ratio noted at each element, an LSE column last when LSE was
/// compared. At most max_side rows and columns are kept, a window that holds
/// the worst element.
struct heat_map {
  static constexpr std::int64_t max_side = 96;  ///< a full 96 x 96 window made a 941 KB repro report
  std::int64_t b = 0, h = 0;
  std::int64_t rows = 0, cols = 0;          ///< cells kept: queries, then output dims (+ LSE)
  std::int64_t row0 = 0, col0 = 0;          ///< index of the first kept query and output dim
  std::int64_t all_rows = 0, all_cols = 0;  ///< queries and output dims noted in the slice (before the window)
  bool lse_column = false;                  ///< the last kept column is LSE[b,h,i]
  std::vector<double> ratio;                ///< rows * cols, row-major; NaN: nothing noted there
  /// What the subject wrote in each cell, as `ratio`: finite (or nothing noted), nan or inf.
  /// A NaN output is a failure's ratio inf, but it is drawn and named as a NaN.
  static constexpr char finite = '.', nan = 'n', inf = 'i';
  std::string got;
  std::int64_t worst_row = -1, worst_col = -1;  ///< the worst element's cell; -1 when it names no element of O or LSE
  std::string worst_where;                      ///< as the terminal prints it
  double worst_ratio = 0;
};

/// The heat map of the (b, h) of the worst element's `at` (the slice of the
/// largest noted ratio when it has none); nullopt when nothing was noted.
std::optional<heat_map> heat_map_of(const element_log& log, const worst_element& worst);

}  // namespace attncheck
