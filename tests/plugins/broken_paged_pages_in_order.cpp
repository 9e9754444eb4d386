// The naive subject ignoring the block table past its first entry: page t of
// a sequence is read at physical page table[b][0] + t, as if pages sat in order.
#define NAIVE_PAGED_SLOT(table_row, j, page) (table_row)[0] + (j) / (page), (j) % (page)
#include "naive/naive_subject.cpp"
