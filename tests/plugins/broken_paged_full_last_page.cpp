// The naive subject reading the last page of a paged sequence whole: the
// slots past n[b] (unspecified: canaries) are taken for keys.
#define NAIVE_PAGED_KEYS(n, page) (((n) + (page)-1) / (page) * (page))
#include "naive/naive_subject.cpp"
