// The visible (query, key) pairs of a prefill, which the timing tools and the
// bench (impl/bench) turn into GFLOP/s: one count, so their rates agree.
#pragma once

#include <algorithm>
#include <cstdint>

#include "attnimpl/attention.hpp"

namespace attnimpl::tools {

/// Visible (query, key) pairs of an lq = lk = l prefill with var's windows
/// and chunks, counted as the kernel sees them (a row at position p = i).
inline double visible_pairs(std::int64_t l, bool causal, const variants& var) {
  double pairs = 0;
  for (std::int64_t p = 0; p < l; ++p) {
    std::int64_t lo = 0, hi = causal ? p + 1 : l;
    if (var.window_left >= 0) lo = std::max(lo, p - var.window_left);
    if (var.window_right >= 0) hi = std::min(hi, p + var.window_right + 1);
    if (var.chunk > 0) lo = std::max(lo, p / var.chunk * var.chunk), hi = std::min(hi, (p / var.chunk + 1) * var.chunk);
    pairs += static_cast<double>(std::max<std::int64_t>(0, hi - lo));
  }
  return pairs;
}

}  // namespace attnimpl::tools
