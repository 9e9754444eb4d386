// The naive subject applying K's descale to V as well (V's own is never read).
#define NAIVE_KV_DESCALE(values, k_descale, v_descale) (k_descale)
#include "naive/naive_subject.cpp"
