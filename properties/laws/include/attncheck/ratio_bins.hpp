// The histogram of observed/bound every law report and campaign keeps.
#pragma once

#include <array>
#include <cstddef>

namespace attncheck {

/// Histogram edges of observed/bound: [0], (0,1e-3), [1e-3,1e-2), ... [0.9,1], >1.
inline constexpr std::array<double, 8> campaign_edges{1e-3, 1e-2, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0};
/// Bins of that histogram: exact 0, one per edge, and > 1 (NaN too: never a pass).
inline constexpr std::size_t ratio_bins = campaign_edges.size() + 2;

/// The bin of an observed/bound ratio: 0 for exactly 0, ratio_bins - 1 past 1.
inline std::size_t ratio_bin(double ratio) {
  if (ratio == 0) return 0;
  for (std::size_t i = 0; i < campaign_edges.size(); ++i)
    if (ratio < campaign_edges[i] || (i + 1 == campaign_edges.size() && ratio <= campaign_edges[i])) return i + 1;
  return campaign_edges.size() + 1;
}

}  // namespace attncheck
