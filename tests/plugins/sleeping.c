/* The ABI v2 example subject made slow in the way its options say, for the
 * gate's per-call watchdog and law timeout (tests/gate/hang_test.sh):
 *   sleep_call=N     the Nth call to attend in each process sleeps 1000 s (a hang)
 *   sleep_each_ms=M  every call to attend sleeps M ms first (slow but steady)
 *   wrong=1          every output is off by 1 in O's first element (fails the differential law)
 * Options are comma-separated; "" is the plain example (block=64). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define attncheck_subject_v2 example_subject_v2
#include "example_subject_v2.c"
#undef attncheck_subject_v2

typedef struct sleeping {
  attncheck_instance desc; /* first, so &desc is the instance */
  attncheck_instance* inner;
  long long sleep_call, sleep_each_ms, wrong, calls;
} sleeping;

static void sleep_ms(long long ms) {
  struct timespec t = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&t, &t) != 0) {
  }
}

static int64_t sleeping_key_blocks(void* state, const attncheck_problem* p) {
  const sleeping* self = (const sleeping*)state;
  return self->inner->key_blocks(self->inner->state, p);
}

static int sleeping_attend(void* state, const attncheck_problem* p, char* err, size_t err_len) {
  sleeping* self = (sleeping*)state;
  ++self->calls;
  if (self->sleep_call > 0 && self->calls == self->sleep_call) sleep_ms(1000 * 1000LL);
  if (self->sleep_each_ms > 0) sleep_ms(self->sleep_each_ms);
  const int rc = self->inner->attend(self->inner->state, p, err, err_len);
  if (self->wrong && p->b * p->lq * p->hq * p->dv > 0) ((float*)p->o)[0] += 1.0f;
  return rc;
}

static void sleeping_destroy(attncheck_instance* d) {
  sleeping* self = (sleeping*)d;
  self->inner->destroy(self->inner);
  free(self);
}

/* Reads "key=N" into *out when s starts with key=; 1 when it did. */
static int read_option(const char* s, const char* key, long long* out, const char** rest) {
  const size_t n = strlen(key);
  if (strncmp(s, key, n) != 0 || s[n] != '=') return 0;
  char* end = NULL;
  *out = strtoll(s + n + 1, &end, 10);
  *rest = end;
  return end != s + n + 1;
}

__attribute__((visibility("default"))) attncheck_instance* attncheck_subject_v2(const char* options, char* err, size_t err_len) {
  long long sleep_call = 0, sleep_each_ms = 0, wrong = 0;
  for (const char* s = options ? options : ""; *s;) {
    const char* rest = s;
    const int ok = read_option(s, "sleep_call", &sleep_call, &rest) || read_option(s, "sleep_each_ms", &sleep_each_ms, &rest) ||
                   read_option(s, "wrong", &wrong, &rest);
    if (!ok || sleep_call < 0 || sleep_each_ms < 0 || sleep_each_ms > 60000 || wrong < 0 || wrong > 1 ||
        (*rest && *rest != ',')) {
      snprintf(err, err_len, "'%s': options are sleep_call=N (N >= 0), sleep_each_ms=M (M in [0, 60000]) and wrong=0|1", options);
      return NULL;
    }
    s = *rest ? rest + 1 : rest;
  }
  attncheck_instance* inner = example_subject_v2("", err, err_len);
  if (!inner) return NULL;
  sleeping* self = (sleeping*)calloc(1, sizeof *self);
  if (!self) {
    inner->destroy(inner);
    snprintf(err, err_len, "out of memory");
    return NULL;
  }
  self->inner = inner;
  self->sleep_call = sleep_call, self->sleep_each_ms = sleep_each_ms, self->wrong = wrong;
  self->desc = *inner;
  self->desc.name = "sleeping";
  self->desc.state = self;
  self->desc.key_blocks = sleeping_key_blocks;
  self->desc.attend = sleeping_attend;
  self->desc.destroy = sleeping_destroy;
  return &self->desc;
}
