// The naive subject with a broken backward: D = rowsum(dO dO) instead of rowsum(dO O).
#define NAIVE_BACKWARD_D_TERM(d_o, o) ((d_o) * (d_o))
#include "naive/naive_subject.cpp"
