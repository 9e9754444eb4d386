/* The example subject made to misbehave on cases with Lk >= 3 (so that some
 * cases pass first), in the way MISBEHAVE selects:
 *   1 segfault   2 abort   3 hang   4 return an error code
 *   5 write one element past the end of O   6 write into a gap of O's layout
 *   7 declare f16 but read and write f32 (every case: O overrun to twice its bytes)
 * The gate must report each as a failed law, with the case, within its
 * timeout, and go on with the next law. */
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#define attncheck_subject_v1 example_subject_v1
#include "example_subject.c"
#undef attncheck_subject_v1

static int misbehaving_attend(const attncheck_problem* p, char* err, size_t err_len) {
#if MISBEHAVE == 7
  /* The bug the issue met: the f32 code path run on f16 buffers. */
  attncheck_problem as_f32 = *p;
  as_f32.dtype = ATTNCHECK_F32;
  return attend(&as_f32, err, err_len);
#endif
  if (p->lk < 3) return attend(p, err, err_len);
#if MISBEHAVE == 1
  raise(SIGSEGV); /* what a wild store does, without the compiler proving it */
#elif MISBEHAVE == 2
  abort();
#elif MISBEHAVE == 3
  for (;;) pause();
#elif MISBEHAVE == 4
  snprintf(err, err_len, "misbehaving subject: refuses lk=%lld", (long long)p->lk);
  return 7;
#elif MISBEHAVE == 5
  const int rc = attend(p, err, err_len);
  /* The element after O[b-1, lq-1, hq-1, dv-1] in memory. */
  const int64_t last =
      (p->b - 1) * p->o_stride[0] + (p->lq - 1) * p->o_stride[1] + (p->hq - 1) * p->o_stride[2] + (p->dv - 1) * p->o_stride[3];
  ((float*)p->o)[last + 1] = 0.0f;
  return rc;
#elif MISBEHAVE == 6
  const int rc = attend(p, err, err_len);
  /* Only the padded layout has gaps: its heads are further apart than dv. */
  if (p->o_stride[2] > p->dv) ((float*)p->o)[p->dv] = 0.0f;
  return rc;
#endif
  return 0;
}

static attncheck_subject misbehaving;

__attribute__((visibility("default"))) const attncheck_subject* attncheck_subject_v1(void) {
  misbehaving = *example_subject_v1();
  misbehaving.name = "misbehaving";
  misbehaving.attend = misbehaving_attend;
#if MISBEHAVE == 7
  misbehaving.dtypes |= 1u << ATTNCHECK_F16;
#endif
  return &misbehaving;
}
