// The naive subject decoding e4m3 inputs as e5m2.
#define NAIVE_FP8_READ_AS(t) ((t) == ATTNCHECK_E4M3 ? ATTNCHECK_E5M2 : (t))
#include "naive/naive_subject.cpp"
