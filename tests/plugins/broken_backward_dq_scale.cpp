// The naive subject with a broken backward: dQ = dS K, the softmax scale left out.
#define NAIVE_BACKWARD_DQ_SCALE(scale) 1.0f
#include "naive/naive_subject.cpp"
