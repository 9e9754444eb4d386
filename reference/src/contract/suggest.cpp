#include "attncheck/suggest.hpp"

#include <algorithm>
#include <cstddef>

namespace attncheck {

namespace {

// Levenshtein distance with adjacent transpositions (optimal string alignment).
std::size_t edits(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i)
    for (std::size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

}  // namespace

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  if (word.empty() || word.size() > 200) return "";
  const std::size_t most = word.size() <= 4 ? 1 : 2;
  std::string best;
  std::size_t best_edits = most + 1, ties = 0;
  for (const std::string& c : candidates) {
    if (c == word) return "";
    const std::size_t e = edits(word, c);
    if (e < best_edits)
      best = c, best_edits = e, ties = 1;
    else if (e == best_edits && c != best)
      ++ties;
  }
  return best_edits <= most && ties == 1 ? " (did you mean '" + best + "'?)" : "";
}

}  // namespace attncheck
