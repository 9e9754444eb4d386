// The naive subject with a broken backward: a KV head's dK and dV come from the
// first query head of its group alone, not the sum over its G query heads.
#define NAIVE_BACKWARD_ADDS_TO_KV(h, first) ((h) == (first))
#include "naive/naive_subject.cpp"
