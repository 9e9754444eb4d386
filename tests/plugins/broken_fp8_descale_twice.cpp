// The naive subject applying every descale twice.
#define NAIVE_DEQUANT(x, s) ((x) * (s) * (s))
#include "naive/naive_subject.cpp"
