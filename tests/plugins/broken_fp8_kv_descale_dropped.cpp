// The naive subject on an fp8-Q fast path that drops K's descale: with Q in
// fp8, keys are read as stored (the 2026 report of a kernel whose fp8-Q path
// silently lost the KV descale).
#define NAIVE_K_DESCALE_USED(q_is_fp8) (!(q_is_fp8))
#include "naive/naive_subject.cpp"
