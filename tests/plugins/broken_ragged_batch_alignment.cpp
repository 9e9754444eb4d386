// The naive subject aligning a ragged sequence's queries to the batch's
// longest query count instead of its own (causal and window positions shift).
#define NAIVE_RAGGED_ALIGN_QUERIES(own, longest) (longest)
#include "naive/naive_subject.cpp"
