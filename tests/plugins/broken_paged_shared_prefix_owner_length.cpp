// The naive subject as a prefix cache that keys a shared page by its owner:
// a sequence whose first page is sequence 0's (a prefix hit) is read for
// sequence 0's length when that is longer, past its own n[b] (the reads past
// it clamped into the arena). With private copies of the prefix it is right.
#include <algorithm>
#include <cstdint>
#define NAIVE_PAGED_KEYS(n, page)                                                        \
  (b > 0 && (n) > 0 && pg->block_table[b * pg->block_table_stride] == pg->block_table[0] \
       ? std::max<std::int64_t>((n), p->key_len ? p->key_len[0] : p->lk)                 \
       : (n))
#define NAIVE_PAGED_SLOT(table_row, j, page) \
  std::clamp<std::int64_t>((table_row)[(j) / (page)], 0, paged->num_pages - 1), (j) % (page)
#include "naive/naive_subject.cpp"
