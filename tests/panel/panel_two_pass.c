/* Panel kernel two_pass, an ABI version 1 plugin: the textbook softmax in
 * three passes over a materialized score row. Scores s_j = (q . k_j) * scale
 * (f32, dot product in dimension order); m = max_j s_j; w_j = expf(s_j - m),
 * l = sum_j w_j in key order; the weights are normalized first, P_j = w_j / l,
 * and O_e = sum_j P_j V_je (the order of a softmax followed by a matmul);
 * LSE = m + logf(l).
 *
 * Declares f32, f16 and bf16 storage (f32 compute: u = 2^-24), exp_ulps 1
 * (glibc expf and logf: below 1 ulp), no key_blocks (nb = 1: every key is seen at once). */
#include "panel.h"

static void row(const void* state, const panel_row* r, double* o, double* lse) {
  (void)state;
  float* w = (float*)r->work;
  const float m = panel_scores(r, w, -INFINITY);
  float l = 0.0f;
  for (int64_t j = 0; j < r->n; ++j) {
    w[j] = expf(w[j] - m);
    l += w[j];
  }
  for (int64_t j = 0; j < r->n; ++j) w[j] /= l;
  for (int64_t e = 0; e < r->dv; ++e) {
    float acc = 0.0f;
    for (int64_t j = 0; j < r->n; ++j) acc += w[j] * r->v[j * r->dv + e];
    o[e] = acc;
  }
  *lse = m + logf(l);
}

static const panel_kernel kernel = {"panel two_pass", PANEL_ALL_DTYPES, row, panel_score_row_bytes, NULL, NULL};

static int attend(const attncheck_problem* p, char* err, size_t err_len) { return panel_attend(&kernel, p, err, err_len); }
static void* cache_create(const attncheck_cache_config* cfg, char* err, size_t err_len) {
  return panel_cache_create(&kernel, cfg, err, err_len);
}
static int cache_append(void* cache, const attncheck_tensor* k, const attncheck_tensor* v, int64_t c, const int64_t* count,
                        char* err, size_t err_len) {
  (void)c;
  return panel_cache_append(&kernel, cache, k, v, count, err, err_len);
}
static int cache_attend(void* cache, const attncheck_problem* p, char* err, size_t err_len) {
  return panel_cache_attend(&kernel, cache, p, err, err_len);
}

static const attncheck_subject subject = {ATTNCHECK_SUBJECT_ABI_VERSION_1,
                                          "panel two_pass",
                                          PANEL_ALL_DTYPES,
                                          PANEL_FEATURES,
                                          PANEL_CLAIMS,
                                          0x1p-24,
                                          1.0,
                                          NULL,
                                          attend,
                                          cache_create,
                                          cache_append,
                                          cache_attend,
                                          panel_cache_free};

PANEL_EXPORT const attncheck_subject* attncheck_subject_v1(void) { return &subject; }
