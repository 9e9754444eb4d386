/* MUTANTS.md causal_top_left: query i sits at position i, ignoring n[b] - Lq. */
#define EXAMPLE_QUERY_POS(n, lq, i) (i)
#include "example_subject.c"
