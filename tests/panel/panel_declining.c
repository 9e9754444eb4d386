/* Panel kernel declining: a version 4 instance that computes the textbook
 * softmax (two_pass's arithmetic: s_j = (q . k_j) * scale in dimension order,
 * m = max_j s_j, w_j = expf(s_j - m), l = sum_j w_j, O_e = sum_j w_j V_je / l,
 * LSE = m + logf(l), all in f32) but, as production kernels do, takes only
 * part of the contract and declines the rest with ATTNCHECK_DECLINED and a
 * stable reason (docs/abi.md "Return status: declined"):
 *   "head size > 64"   D or Dv above 64 (FlashAttention's "head sizes up to 256", scaled down
 *                      so that the gate's draws meet it often);
 *   "Lk < 2"           a single key slot (cuDNN refuses Lk = 1);
 *   "negative scale"   a scale below 0 (FLASH and cuDNN return NaN for it: declining is the honest way).
 * Option mode=N:
 *   0  (default) the honest kernel: it passes the gate, its declines counted;
 *   1  a bug behind the declines: m starts at 0 instead of -inf, so a row whose
 *      scores are all far below 0 underflows every weight to 0 and divides 0 by 0;
 *   2  declines every case: every law it reaches is UNJUDGED;
 *   3  declines after writing O: a declined call must leave its outputs
 *      unwritten, so this is a failed call (subject_error);
 *   4  the honest kernel of mode 0 declaring its limits as static limits
 *      (docs/abi.md "Static limits": D, Dv <= 64, Lk >= 2, scale positive or
 *      zero): the generators draw inside them, so the gate spends no draw on
 *      a decline the limits foresee;
 *   5  mode 1's bug behind the same static limits.
 * Declares f32, f16 and bf16 storage (f32 compute: u = 2^-24), exp_ulps 1. */
#include "panel.h"

static void row(const void* state, const panel_row* r, double* o, double* lse) {
  const int bug = panel_self(state)->size == 1 || panel_self(state)->size == 5;
  float* w = (float*)r->work;
  panel_softmax_tail(r, w, panel_scores(r, w, bug ? 0.0f : -INFINITY), o, lse);
}

/* The reason this kernel declines p, or NULL when it computes it. */
static const char* declined(const panel_instance* self, const attncheck_problem* p) {
  if (self->size == 2) return "everything: this mode declines every case";
  if (p->d > 64 || p->dv > 64) return "head size > 64";
  if (p->lk < 2) return "Lk < 2";
  if (p->scale < 0) return "negative scale";
  return NULL;
}

/* Declines (ATTNCHECK_DECLINED, the reason in err) or computes. Mode 3 writes
 * O's first element before it declines. */
static int decline_or(const panel_instance* self, const attncheck_problem* p, char* err, size_t err_len) {
  const char* why = declined(self, p);
  if (!why) return ATTNCHECK_OK;
  if (self->size == 3) panel_store(p->dtype, p->o, 0, 0.0);
  snprintf(err, err_len, "%s", why);
  return ATTNCHECK_DECLINED;
}

static int attend(void* state, const attncheck_problem* p, char* err, size_t err_len) {
  const panel_kernel* kn = (const panel_kernel*)state;
  const int rc = decline_or(panel_self(kn->state), p, err, err_len);
  return rc ? rc : panel_attend(kn, p, err, err_len);
}

static int cache_attend(void* state, void* cache, const attncheck_problem* p, char* err, size_t err_len) {
  const panel_kernel* kn = (const panel_kernel*)state;
  const int rc = decline_or(panel_self(kn->state), p, err, err_len);
  return rc ? rc : panel_cache_attend(kn, cache, p, err, err_len);
}

/* Modes 4 and 5: what declined() declines for shapes and scales, as limits. */
static const attncheck_limits limits = {
    .struct_size = sizeof(attncheck_limits),
    .max_head_dim = 64,
    .min_lk = 2,
    .scale_signs = ATTNCHECK_SCALE_SIGN_POSITIVE | ATTNCHECK_SCALE_SIGN_ZERO,
};

PANEL_EXPORT attncheck_instance* attncheck_subject_v4(const char* options, char* err, size_t err_len) {
  static const panel_option mode = {"mode", 0, 0, 5};
  panel_instance* self = panel_new("declining", row, panel_score_row_bytes, &mode, 0, options, err, err_len);
  if (!self) return NULL;
  self->desc.abi_version = ATTNCHECK_SUBJECT_ABI_VERSION_4;
  self->desc.attend = attend;
  self->desc.cache_attend = cache_attend;
  if (self->size >= 4) self->desc.limits = &limits;
  return &self->desc;
}
