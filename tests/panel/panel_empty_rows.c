/* Panel kernel empty_rows: the textbook two-pass softmax (scores (q . k_j) *
 * scale in f32, w_j = expf(s_j - m), l = sum_j w_j, O_e = sum_j w_j V_je / l,
 * LSE = m + logf(l)), with the values production kernels write in a row that
 * sees no key, declared as version 4 conventions (docs/abi.md "Conventions").
 *
 * Option mode=N:
 *   0  O = 0, LSE = +inf (FlashAttention 2), declared so (the default)
 *   1  O = NaN, LSE = 0, declared so
 *   2  O = 0, LSE = 0 (PyTorch's memory-efficient kernel's LSE), declared so
 *   3  declares O = 0, LSE = +inf, writes LSE = -inf: a declared convention broken
 *   4  declares O = NaN, writes O = 0: a declared convention broken
 *   5  O = 0, LSE = +inf, declares nothing: the contract's -inf is broken
 *   6  O = 3, LSE = 11 (what was in the buffer), declared unspecified
 *   7  as 6, and a row that sees one key gets the same garbage: unspecified
 *      excuses only a row with no key
 * Modes 0 to 2 and 6 are correct; 3 to 5 and 7 must fail. Declares f32, f16
 * and bf16 storage (f32 compute: u = 2^-24), exp_ulps 1, nb = 1. */
#include "panel.h"

/* What each mode writes in an empty row (O, LSE) and declares (empty_row_o, empty_row_lse). */
static const double written[8][2] = {{0.0, INFINITY},  {NAN, 0.0},      {0.0, 0.0},  {0.0, -INFINITY},
                                     {0.0, -INFINITY}, {0.0, INFINITY}, {3.0, 11.0}, {3.0, 11.0}};

static void row(const void* state, const panel_row* r, double* o, double* lse) {
  float* w = (float*)r->work;
  panel_softmax_tail(r, w, panel_scores(r, w, -INFINITY), o, lse);
  if (panel_self(state)->size == 7 && r->n == 1) {
    for (int64_t e = 0; e < r->dv; ++e) o[e] = written[7][0];
    *lse = written[7][1];
  }
}

static const attncheck_conventions declared[8] = {
    {sizeof(attncheck_conventions), ATTNCHECK_EMPTY_O_ZERO, ATTNCHECK_EMPTY_LSE_PLUS_INF, 0, 0},
    {sizeof(attncheck_conventions), ATTNCHECK_EMPTY_O_NAN, ATTNCHECK_EMPTY_LSE_ZERO, 0, 0},
    {sizeof(attncheck_conventions), ATTNCHECK_EMPTY_O_ZERO, ATTNCHECK_EMPTY_LSE_ZERO, 0, 0},
    {sizeof(attncheck_conventions), ATTNCHECK_EMPTY_O_ZERO, ATTNCHECK_EMPTY_LSE_PLUS_INF, 0, 0},
    {sizeof(attncheck_conventions), ATTNCHECK_EMPTY_O_NAN, ATTNCHECK_EMPTY_LSE_MINUS_INF, 0, 0},
    {0},
    {sizeof(attncheck_conventions), ATTNCHECK_EMPTY_O_UNSPECIFIED, ATTNCHECK_EMPTY_LSE_UNSPECIFIED, 0, 0},
    {sizeof(attncheck_conventions), ATTNCHECK_EMPTY_O_UNSPECIFIED, ATTNCHECK_EMPTY_LSE_UNSPECIFIED, 0, 0},
};

/* Options: "mode=N" (0 <= N <= 7), or "" for mode 0. */
PANEL_EXPORT attncheck_instance* attncheck_subject_v4(const char* options, char* err, size_t err_len) {
  static const panel_option mode = {"mode", 0, 0, 7};
  panel_instance* self = panel_new("empty_rows", row, panel_score_row_bytes, &mode, 0, options, err, err_len);
  if (!self) return NULL;
  self->desc.abi_version = ATTNCHECK_SUBJECT_ABI_VERSION_4;
  self->kn.empty = written[self->size];
  if (self->size != 5) self->desc.conventions = &declared[self->size];
  return &self->desc;
}
