/* Panel kernel f64: binary64 from the decoded inputs to the end, rounded once
 * into O's storage type (LSE once into binary32). Scores s_j = (q . k_j) *
 * scale in double (products of binary32 values are exact); two-pass softmax:
 * m = max_j s_j, w_j = exp(s_j - m), l and acc_e summed in key order; O = acc / l,
 * LSE = m + log(l).
 *
 * Declares f32, f16 and bf16 storage with binary64 compute (u = 2^-53, the
 * bound then takes binary64's range), exp_ulps 1 (glibc exp and log: below
 * 1 ulp), no key_blocks (nb = 1).
 *
 * Backward (ABI v3 FEATURE3_BACKWARD), binary64 throughout and keys outside:
 * per batch element and KV head, each row of the group first gets, in
 * double, its decoded q and dO, D = sum_e dO_e O_e from the O handed in and
 * the LSE handed in. Then per key j that some row sees (the others are never
 * read and get 0), over every row that sees it (query heads of the group in
 * order, rows in order): s = (q . k_j) * scale, P = exp(s - LSE),
 * dP = dO . V_j, dS = P (dP - D); dK_j += dS q and dV_j += P dO in the key's
 * own double sums, and dS k_j is scattered into the row's double dQ (so dQ
 * sums its keys in key order, one running sum). dK = scale dK_acc and
 * dQ = scale dQ_acc in double; each gradient rounded once to the storage
 * type. Rows that see no key get dQ = 0, add nothing and their dO and O are
 * not read. Declares u = 2^-53 for the backward as for the forward, no
 * backward_blocks (one block each way), and the same bits every run. */
#include "panel_backward.h"

static size_t work_bytes(const void* state, int64_t lk, int64_t d, int64_t dv) {
  (void)state, (void)d;
  return sizeof(double) * (size_t)(lk + dv);
}

static void row(const void* state, const panel_row* r, double* o, double* lse) {
  (void)state;
  double* w = (double*)r->work;
  double* acc = w + r->n;
  double m = -INFINITY;
  for (int64_t j = 0; j < r->n; ++j) {
    double dot = 0.0;
    for (int64_t x = 0; x < r->d; ++x) dot += (double)r->q[x] * (double)r->k[j * r->d + x];
    w[j] = dot * (double)r->scale;
    if (w[j] > m) m = w[j];
  }
  double l = 0.0;
  for (int64_t e = 0; e < r->dv; ++e) acc[e] = 0.0;
  for (int64_t j = 0; j < r->n; ++j) {
    const double wj = exp(w[j] - m);
    l += wj;
    for (int64_t e = 0; e < r->dv; ++e) acc[e] += wj * (double)r->v[j * r->dv + e];
  }
  for (int64_t e = 0; e < r->dv; ++e) o[e] = acc[e] / l;
  *lse = m + log(l);
}

/* ---- Backward ---------------------------------------------------------------- */

typedef struct f64_buffers {
  double *q, *d_o, *big_d, *lse, *dq; /* per row of the group: q (d), dO (dv), D, LSE, dQ (d) */
  double *k, *v, *dk, *dv;            /* the current key: K, V, dK, dV */
  char* row_any;
} f64_buffers;

static void f64_free(f64_buffers* f) {
  free(f->q), free(f->d_o), free(f->big_d), free(f->lse), free(f->dq), free(f->k), free(f->v), free(f->dk), free(f->dv),
      free(f->row_any);
}

static int f64_alloc(f64_buffers* f, int64_t rows, int64_t d, int64_t dv) {
  const size_t r = (size_t)rows, fd = sizeof(double) * (size_t)d, fdv = sizeof(double) * (size_t)dv;
  f->q = (double*)malloc(r * fd), f->d_o = (double*)malloc(r * fdv), f->big_d = (double*)malloc(r * sizeof(double));
  f->lse = (double*)malloc(r * sizeof(double)), f->dq = (double*)malloc(r * fd);
  f->k = (double*)malloc(fd), f->v = (double*)malloc(fdv), f->dk = (double*)malloc(fd), f->dv = (double*)malloc(fdv);
  f->row_any = (char*)malloc(r);
  if (f->q && f->d_o && f->big_d && f->lse && f->dq && f->k && f->v && f->dk && f->dv && f->row_any) return 0;
  f64_free(f);
  return 1;
}

static int backward(void* state, const attncheck_backward_problem* bp, char* err, size_t err_len) {
  const panel_instance* self = panel_backward_self(state);
  if (panel_backward_check(&self->kn, bp, err, err_len)) return 1;
  const attncheck_problem* p = bp->forward;
  const attncheck_dtype t = p->dtype;
  const int64_t group = p->hq / p->hkv, lq = p->lq, d = p->d, dv = p->dv;
  const double scale = (double)p->scale;
  f64_buffers f;
  if (f64_alloc(&f, group * lq, d, dv)) return panel_fail(err, err_len, self->kn.name, "out of memory");
  for (int64_t b = 0; b < p->b; ++b)
    for (int64_t g = 0; g < p->hkv; ++g) {
      for (int64_t hh = 0; hh < group; ++hh)
        for (int64_t i = 0; i < lq; ++i) {
          const int64_t h = g * group + hh, r = hh * lq + i;
          f.row_any[r] = (char)panel_row_sees_any(p, b, h, i);
          if (!f.row_any[r]) continue;
          for (int64_t x = 0; x < d; ++x) {
            f.q[r * d + x] = (double)panel_load(t, p->q.data, panel_at4(p->q.stride, b, i, h, x));
            f.dq[r * d + x] = 0.0;
          }
          double big_d = 0.0;
          for (int64_t e = 0; e < dv; ++e) {
            f.d_o[r * dv + e] = (double)panel_load(t, bp->d_o.data, panel_at4(bp->d_o.stride, b, i, h, e));
            big_d += f.d_o[r * dv + e] * (double)panel_load(t, bp->o.data, panel_at4(bp->o.stride, b, i, h, e));
          }
          f.big_d[r] = big_d;
          f.lse[r] = (double)panel_lse_in(bp, b, h, i);
        }
      for (int64_t j = 0; j < p->lk; ++j) {
        int loaded = 0;
        for (int64_t x = 0; x < d; ++x) f.dk[x] = 0.0;
        for (int64_t e = 0; e < dv; ++e) f.dv[e] = 0.0;
        for (int64_t hh = 0; hh < group; ++hh)
          for (int64_t i = 0; i < lq; ++i) {
            const int64_t h = g * group + hh, r = hh * lq + i;
            if (!panel_sees(p, b, h, i, j)) continue;
            if (!loaded) {
              for (int64_t x = 0; x < d; ++x) f.k[x] = (double)panel_load(t, p->k.data, panel_at4(p->k.stride, b, j, g, x));
              for (int64_t e = 0; e < dv; ++e) f.v[e] = (double)panel_load(t, p->v.data, panel_at4(p->v.stride, b, j, g, e));
              loaded = 1;
            }
            const double* q = f.q + r * d;
            const double* d_o = f.d_o + r * dv;
            double s = 0.0, dp = 0.0;
            for (int64_t x = 0; x < d; ++x) s += q[x] * f.k[x];
            const double pj = exp(s * scale - f.lse[r]);
            for (int64_t e = 0; e < dv; ++e) dp += d_o[e] * f.v[e];
            const double ds = pj * (dp - f.big_d[r]);
            for (int64_t x = 0; x < d; ++x) {
              f.dk[x] += ds * q[x];
              f.dq[r * d + x] += ds * f.k[x];
            }
            for (int64_t e = 0; e < dv; ++e) f.dv[e] += pj * d_o[e];
          }
        for (int64_t x = 0; x < d; ++x)
          panel_store(t, bp->dk, panel_at4(bp->dk_stride, b, j, g, x), loaded ? scale * f.dk[x] : 0.0);
        for (int64_t e = 0; e < dv; ++e) panel_store(t, bp->dv, panel_at4(bp->dv_stride, b, j, g, e), loaded ? f.dv[e] : 0.0);
      }
      for (int64_t hh = 0; hh < group; ++hh)
        for (int64_t i = 0; i < lq; ++i) {
          const int64_t r = hh * lq + i;
          for (int64_t x = 0; x < d; ++x)
            panel_store(t, bp->dq, panel_at4(bp->dq_stride, b, i, g * group + hh, x),
                        f.row_any[r] ? scale * f.dq[r * d + x] : 0.0);
        }
    }
  f64_free(&f);
  return 0;
}

/* No options. */
PANEL_EXPORT attncheck_instance* attncheck_subject_v3(const char* options, char* err, size_t err_len) {
  panel_instance* self = panel_new("f64", row, work_bytes, NULL, 0, options, err, err_len);
  if (self) {
    self->desc.compute_unit_roundoff = 0x1p-53;
    panel_v3_backward(self, backward, NULL);
  }
  return self ? &self->desc : NULL;
}
