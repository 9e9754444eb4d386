/* Panel kernel fma: every multiply-add fused (C's fmaf, one rounding each).
 * The scale is folded into the query first, qs_d = q_d * scale; scores
 * s_j = fmaf-chained qs . k_j over the dimensions in reverse order; two-pass
 * softmax with keys visited from the last to the first: m = max_j s_j,
 * w_j = expf(s_j - m), l = sum_j w_j, acc_e = fmaf(w_j, V_je, acc_e);
 * O = acc / l, LSE = m + logf(l).
 *
 * Declares f32, f16 and bf16 storage (f32 compute: u = 2^-24), exp_ulps 1
 * (glibc expf and logf: below 1 ulp), no key_blocks (nb = 1).
 *
 * Backward (ABI v3 FEATURE3_BACKWARD), autograd's softmax backward with every
 * multiply-add fused, rows outside and keys inside: per batch element and KV
 * head, rows in query-position order with the G query heads interleaved
 * (i outer, head inner); per row that sees a key, over its visible keys from
 * the last to the first: s_j = fmaf-chained qs . k_j as the forward (qs = q *
 * scale, dimensions in reverse order), P_j = expf(s_j - LSE) from the LSE
 * handed in, dP_j = fmaf-chained dO . V_j; then D = sum_j P_j dP_j (fmaf,
 * keys last to first; the O handed in is never read), and the scaled
 * gradient of the score g_j = (P_j (dP_j - D)) * scale. dQ = fmaf-chained
 * sum_j g_j K_j; one running f32 sum per key over every row of the KV head,
 * dK_j = fmaf(g_j, q, dK_j) and dV_j = fmaf(P_j, dO, dV_j), rounded once to
 * the storage type at the end. No backward_blocks (one block each way). Keys
 * no row sees are never read and get 0; rows that see none get dQ = 0, add
 * nothing and their dO is not read. Claims the same bits every run. */
#include "panel_backward.h"

static size_t work_bytes(const void* state, int64_t lk, int64_t d, int64_t dv) {
  (void)state;
  return sizeof(float) * (size_t)(lk + d + dv);
}

static void row(const void* state, const panel_row* r, double* o, double* lse) {
  (void)state;
  float* w = (float*)r->work;
  float* qs = w + r->n;
  float* acc = qs + r->d;
  for (int64_t x = 0; x < r->d; ++x) qs[x] = r->q[x] * r->scale;
  float m = -INFINITY;
  for (int64_t j = r->n - 1; j >= 0; --j) {
    float dot = 0.0f;
    for (int64_t x = r->d - 1; x >= 0; --x) dot = fmaf(qs[x], r->k[j * r->d + x], dot);
    w[j] = dot;
    if (dot > m) m = dot;
  }
  float l = 0.0f;
  for (int64_t e = 0; e < r->dv; ++e) acc[e] = 0.0f;
  for (int64_t j = r->n - 1; j >= 0; --j) {
    const float wj = expf(w[j] - m);
    l += wj;
    for (int64_t e = 0; e < r->dv; ++e) acc[e] = fmaf(wj, r->v[j * r->dv + e], acc[e]);
  }
  for (int64_t e = 0; e < r->dv; ++e) o[e] = acc[e] / l;
  *lse = m + logf(l);
}

/* ---- Backward ---------------------------------------------------------------- */

typedef struct fma_buffers {
  float *k, *v, *dk, *dv;                /* every key of the KV head: K, V (decoded only when some row sees it), dK, dV */
  float *q, *qs, *d_o, *dq, *p, *dp, *g; /* one row: q, q * scale, dO, dQ; per key: P, dP, the scaled dS */
  char* seen;
} fma_buffers;

static void fma_free(fma_buffers* f) {
  free(f->k), free(f->v), free(f->dk), free(f->dv), free(f->q), free(f->qs), free(f->d_o), free(f->dq), free(f->p), free(f->dp),
      free(f->g), free(f->seen);
}

static int fma_alloc(fma_buffers* f, int64_t lk, int64_t d, int64_t dv) {
  const size_t n = (size_t)lk, fd = sizeof(float) * (size_t)d, fdv = sizeof(float) * (size_t)dv;
  f->k = (float*)malloc(n * fd), f->v = (float*)malloc(n * fdv), f->dk = (float*)malloc(n * fd), f->dv = (float*)malloc(n * fdv);
  f->q = (float*)malloc(fd), f->qs = (float*)malloc(fd), f->d_o = (float*)malloc(fdv), f->dq = (float*)malloc(fd);
  f->p = (float*)malloc(n * sizeof(float)), f->dp = (float*)malloc(n * sizeof(float)), f->g = (float*)malloc(n * sizeof(float));
  f->seen = (char*)malloc(n);
  if (f->k && f->v && f->dk && f->dv && f->q && f->qs && f->d_o && f->dq && f->p && f->dp && f->g && f->seen) return 0;
  fma_free(f);
  return 1;
}

static int backward(void* state, const attncheck_backward_problem* bp, char* err, size_t err_len) {
  const panel_instance* self = panel_backward_self(state);
  if (panel_backward_check(&self->kn, bp, err, err_len)) return 1;
  const attncheck_problem* p = bp->forward;
  const attncheck_dtype t = p->dtype;
  const int64_t group = p->hq / p->hkv, lk = p->lk, d = p->d, dv = p->dv;
  fma_buffers f;
  if (fma_alloc(&f, lk, d, dv)) return panel_fail(err, err_len, self->kn.name, "out of memory");
  for (int64_t b = 0; b < p->b; ++b)
    for (int64_t g = 0; g < p->hkv; ++g) {
      /* The keys some row of the group sees: decoded once; the others are never read. */
      for (int64_t j = 0; j < lk; ++j) {
        char seen = 0;
        for (int64_t i = 0; i < p->lq && !seen; ++i)
          for (int64_t hh = 0; hh < group && !seen; ++hh) seen = (char)panel_sees(p, b, g * group + hh, i, j);
        f.seen[j] = seen;
        for (int64_t x = 0; x < d; ++x) f.dk[j * d + x] = 0.0f;
        for (int64_t e = 0; e < dv; ++e) f.dv[j * dv + e] = 0.0f;
        if (!seen) continue;
        for (int64_t x = 0; x < d; ++x) f.k[j * d + x] = panel_load(t, p->k.data, panel_at4(p->k.stride, b, j, g, x));
        for (int64_t e = 0; e < dv; ++e) f.v[j * dv + e] = panel_load(t, p->v.data, panel_at4(p->v.stride, b, j, g, e));
      }
      for (int64_t i = 0; i < p->lq; ++i)
        for (int64_t hh = 0; hh < group; ++hh) {
          const int64_t h = g * group + hh;
          for (int64_t x = 0; x < d; ++x) f.dq[x] = 0.0f;
          if (panel_row_sees_any(p, b, h, i)) {
            const float lse = panel_lse_in(bp, b, h, i);
            for (int64_t x = 0; x < d; ++x) {
              f.q[x] = panel_load(t, p->q.data, panel_at4(p->q.stride, b, i, h, x));
              f.qs[x] = f.q[x] * p->scale;
            }
            for (int64_t e = 0; e < dv; ++e) f.d_o[e] = panel_load(t, bp->d_o.data, panel_at4(bp->d_o.stride, b, i, h, e));
            float big_d = 0.0f;
            for (int64_t j = lk - 1; j >= 0; --j) {
              if (!panel_sees(p, b, h, i, j)) continue;
              float s = 0.0f, dp = 0.0f;
              for (int64_t x = d - 1; x >= 0; --x) s = fmaf(f.qs[x], f.k[j * d + x], s);
              for (int64_t e = dv - 1; e >= 0; --e) dp = fmaf(f.d_o[e], f.v[j * dv + e], dp);
              f.p[j] = expf(s - lse);
              f.dp[j] = dp;
              big_d = fmaf(f.p[j], dp, big_d);
            }
            for (int64_t j = lk - 1; j >= 0; --j) {
              if (!panel_sees(p, b, h, i, j)) continue;
              f.g[j] = (f.p[j] * (f.dp[j] - big_d)) * p->scale;
              for (int64_t x = 0; x < d; ++x) {
                f.dq[x] = fmaf(f.g[j], f.k[j * d + x], f.dq[x]);
                f.dk[j * d + x] = fmaf(f.g[j], f.q[x], f.dk[j * d + x]);
              }
              for (int64_t e = 0; e < dv; ++e) f.dv[j * dv + e] = fmaf(f.p[j], f.d_o[e], f.dv[j * dv + e]);
            }
          }
          for (int64_t x = 0; x < d; ++x) panel_store(t, bp->dq, panel_at4(bp->dq_stride, b, i, h, x), (double)f.dq[x]);
        }
      for (int64_t j = 0; j < lk; ++j) {
        for (int64_t x = 0; x < d; ++x)
          panel_store(t, bp->dk, panel_at4(bp->dk_stride, b, j, g, x), f.seen[j] ? (double)f.dk[j * d + x] : 0.0);
        for (int64_t e = 0; e < dv; ++e)
          panel_store(t, bp->dv, panel_at4(bp->dv_stride, b, j, g, e), f.seen[j] ? (double)f.dv[j * dv + e] : 0.0);
      }
    }
  fma_free(&f);
  return 0;
}

/* No options. */
PANEL_EXPORT attncheck_instance* attncheck_subject_v3(const char* options, char* err, size_t err_len) {
  panel_instance* self = panel_new("fma", row, work_bytes, NULL, 0, options, err, err_len);
  if (self) panel_v3_backward(self, backward, NULL);
  return self ? &self->desc : NULL;
}
