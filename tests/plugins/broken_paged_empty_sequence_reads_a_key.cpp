// The naive subject taking an empty paged sequence (n[b] = 0) for one key
// long, as a loop that runs its body once before testing the count does: it
// reads slot 0 of the page its table row names first (unspecified with
// n[b] = 0; clamped into the arena so the read stays in bounds).
#include <algorithm>
#include <cstdint>
#define NAIVE_PAGED_KEYS(n, page) ((n) > 0 ? (n) : 1)
#define NAIVE_PAGED_SLOT(table_row, j, page) \
  std::clamp<std::int64_t>((table_row)[(j) / (page)], 0, paged->num_pages - 1), (j) % (page)
#include "naive/naive_subject.cpp"
