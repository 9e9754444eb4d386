/* Panel kernel online: one-pass online softmax over tiles of key positions,
 * the tile an option (tile=N, default 64; the panel gates 1, 7, 64 and 256).
 * Per tile: scores s_j = (q . k_j) * scale in f32 (dot product in dimension
 * order), the tile's max; when it raises the running max m, the running sum
 * l and accumulator acc are rescaled by expf(m_old - m_new) (skipped while
 * nothing was seen); then w_j = expf(s_j - m), l += w_j, acc += w_j V_j.
 * O = acc / l, LSE = m + logf(l). Tiles the row's visibility empties are
 * skipped.
 *
 * Declares f32, f16 and bf16 storage (f32 compute: u = 2^-24), exp_ulps 1
 * (glibc expf and logf: below 1 ulp), nb = ceil(Lk / tile) (one rescale per
 * tile), size hint k_tile = tile.
 *
 * Backward (ABI v3 FEATURE3_BACKWARD), FlashAttention 2's loop order: per
 * batch element and KV head, key blocks of `tile` positions outside and, per
 * query head of the group, query blocks of `tile` rows inside. Per row, once:
 * D = sum_e dO_e O_e (f32, e in order) from the O handed in, and the LSE handed
 * in times log2(e). Per visible pair: s = (q . k_j) * scale in f32,
 * P = exp2f(s log2(e) - LSE log2(e)), dP = dO . V_j, dS = P (dP - D). Each
 * query block sums P dO and dS Q into its own partials for the key block's
 * keys, then adds them into the key block's f32 dV and dK (dkv_blocks =
 * G ceil(Lq / tile) query-block partials per key); each row sums dS K_j over
 * the key block into a partial that is added into its f32 dQ, in key-block
 * order (dq_blocks = ceil(Lk / tile)). dK = scale dK_acc and dQ = scale dQ_acc
 * in f32 at the end, each rounded once to the storage type. Keys no row sees
 * are never read and get 0; rows that see none get dQ = 0, add nothing and
 * their dO and O are not read. Claims the same bits every run (one thread,
 * one order). */
#include "panel_backward.h"

static size_t work_bytes(const void* state, int64_t lk, int64_t d, int64_t dv) {
  const panel_instance* self = panel_self(state);
  (void)lk, (void)d;
  return sizeof(float) * (size_t)(self->size + dv);
}

static void row(const void* state, const panel_row* r, double* o, double* lse) {
  panel_online_row(r, panel_self(state)->size, o, lse);
}

/* ---- Backward ---------------------------------------------------------------- */

static void backward_blocks(void* state, const attncheck_backward_problem* bp, int64_t* dq_blocks, int64_t* dkv_blocks) {
  const panel_instance* self = panel_backward_self(state);
  const attncheck_problem* p = bp->forward;
  *dq_blocks = (p->lk + self->size - 1) / self->size;
  *dkv_blocks = (p->hq / p->hkv) * ((p->lq + self->size - 1) / self->size);
}

/* The buffers of one backward call, all f32 (char flags apart). */
typedef struct fa2_buffers {
  float *q, *d_o, *big_d, *lse2, *dq,
      *pq; /* per row of the group: q (d), dO (dv), D, LSE log2(e), dQ (d); pq: one row's block partial */
  float *k, *v, *dk, *dv, *pk, *pv; /* per key of the block: K, V, dK, dV, and one query block's partials */
  char *row_any, *key_seen, *block_seen;
} fa2_buffers;

static void fa2_free(fa2_buffers* f) {
  free(f->q), free(f->d_o), free(f->big_d), free(f->lse2), free(f->dq), free(f->pq);
  free(f->k), free(f->v), free(f->dk), free(f->dv), free(f->pk), free(f->pv);
  free(f->row_any), free(f->key_seen), free(f->block_seen);
}

static int fa2_alloc(fa2_buffers* f, int64_t rows, int64_t tile, int64_t d, int64_t dv) {
  const size_t r = (size_t)rows, t = (size_t)tile, fd = sizeof(float) * (size_t)d, fdv = sizeof(float) * (size_t)dv;
  f->q = (float*)malloc(r * fd), f->d_o = (float*)malloc(r * fdv), f->big_d = (float*)malloc(r * sizeof(float));
  f->lse2 = (float*)malloc(r * sizeof(float)), f->dq = (float*)malloc(r * fd), f->pq = (float*)malloc(fd);
  f->k = (float*)malloc(t * fd), f->v = (float*)malloc(t * fdv), f->dk = (float*)malloc(t * fd), f->dv = (float*)malloc(t * fdv);
  f->pk = (float*)malloc(t * fd), f->pv = (float*)malloc(t * fdv);
  f->row_any = (char*)malloc(r), f->key_seen = (char*)malloc(t), f->block_seen = (char*)malloc(t);
  if (f->q && f->d_o && f->big_d && f->lse2 && f->dq && f->pq && f->k && f->v && f->dk && f->dv && f->pk && f->pv && f->row_any &&
      f->key_seen && f->block_seen)
    return 0;
  fa2_free(f);
  return 1;
}

static int backward(void* state, const attncheck_backward_problem* bp, char* err, size_t err_len) {
  const panel_instance* self = panel_backward_self(state);
  if (panel_backward_check(&self->kn, bp, err, err_len)) return 1;
  const attncheck_problem* p = bp->forward;
  const attncheck_dtype t = p->dtype;
  const int64_t tile = self->size, group = p->hq / p->hkv, lq = p->lq, lk = p->lk, d = p->d, dv = p->dv;
  const float log2e = 1.44269504088896340736f;
  fa2_buffers f;
  if (fa2_alloc(&f, group * lq, tile, d, dv)) return panel_fail(err, err_len, self->kn.name, "out of memory");
  for (int64_t b = 0; b < p->b; ++b)
    for (int64_t g = 0; g < p->hkv; ++g) {
      /* Rows of the group (r = hh lq + i, query head g G + hh): what each needs once. */
      for (int64_t hh = 0; hh < group; ++hh)
        for (int64_t i = 0; i < lq; ++i) {
          const int64_t h = g * group + hh, r = hh * lq + i;
          f.row_any[r] = (char)panel_row_sees_any(p, b, h, i);
          if (!f.row_any[r]) continue;
          for (int64_t x = 0; x < d; ++x) {
            f.q[r * d + x] = panel_load(t, p->q.data, panel_at4(p->q.stride, b, i, h, x));
            f.dq[r * d + x] = 0.0f;
          }
          float big_d = 0.0f;
          for (int64_t e = 0; e < dv; ++e) {
            const float d_o = panel_load(t, bp->d_o.data, panel_at4(bp->d_o.stride, b, i, h, e));
            f.d_o[r * dv + e] = d_o;
            big_d += d_o * panel_load(t, bp->o.data, panel_at4(bp->o.stride, b, i, h, e));
          }
          f.big_d[r] = big_d;
          f.lse2[r] = panel_lse_in(bp, b, h, i) * log2e;
        }
      for (int64_t j0 = 0; j0 < lk; j0 += tile) {
        const int64_t j1 = j0 + tile < lk ? j0 + tile : lk;
        /* The block's keys that some row of the group sees: only those are read. */
        for (int64_t j = j0; j < j1; ++j) {
          char seen = 0;
          for (int64_t hh = 0; hh < group && !seen; ++hh)
            for (int64_t i = 0; i < lq && !seen; ++i) seen = (char)panel_sees(p, b, g * group + hh, i, j);
          f.key_seen[j - j0] = seen;
          for (int64_t x = 0; x < d; ++x) f.dk[(j - j0) * d + x] = 0.0f;
          for (int64_t e = 0; e < dv; ++e) f.dv[(j - j0) * dv + e] = 0.0f;
          if (!seen) continue;
          for (int64_t x = 0; x < d; ++x) f.k[(j - j0) * d + x] = panel_load(t, p->k.data, panel_at4(p->k.stride, b, j, g, x));
          for (int64_t e = 0; e < dv; ++e) f.v[(j - j0) * dv + e] = panel_load(t, p->v.data, panel_at4(p->v.stride, b, j, g, e));
        }
        for (int64_t hh = 0; hh < group; ++hh) {
          const int64_t h = g * group + hh;
          for (int64_t i0 = 0; i0 < lq; i0 += tile) {
            const int64_t i1 = i0 + tile < lq ? i0 + tile : lq;
            for (int64_t j = j0; j < j1; ++j) {
              f.block_seen[j - j0] = 0;
              for (int64_t x = 0; x < d; ++x) f.pk[(j - j0) * d + x] = 0.0f;
              for (int64_t e = 0; e < dv; ++e) f.pv[(j - j0) * dv + e] = 0.0f;
            }
            for (int64_t i = i0; i < i1; ++i) {
              const int64_t r = hh * lq + i;
              if (!f.row_any[r]) continue;
              const float* q = f.q + r * d;
              const float* d_o = f.d_o + r * dv;
              int hit = 0;
              for (int64_t x = 0; x < d; ++x) f.pq[x] = 0.0f;
              for (int64_t j = j0; j < j1; ++j) {
                if (!panel_sees(p, b, h, i, j)) continue;
                const float* k = f.k + (j - j0) * d;
                const float* v = f.v + (j - j0) * dv;
                float s = 0.0f;
                for (int64_t x = 0; x < d; ++x) s += q[x] * k[x];
                s *= p->scale;
                const float pj = exp2f(s * log2e - f.lse2[r]);
                float dp = 0.0f;
                for (int64_t e = 0; e < dv; ++e) dp += d_o[e] * v[e];
                const float ds = pj * (dp - f.big_d[r]);
                for (int64_t e = 0; e < dv; ++e) f.pv[(j - j0) * dv + e] += pj * d_o[e];
                for (int64_t x = 0; x < d; ++x) f.pk[(j - j0) * d + x] += ds * q[x];
                for (int64_t x = 0; x < d; ++x) f.pq[x] += ds * k[x];
                f.block_seen[j - j0] = 1;
                hit = 1;
              }
              if (hit)
                for (int64_t x = 0; x < d; ++x) f.dq[r * d + x] += f.pq[x];
            }
            /* Only keys this query block saw take its partials: a row that does not see a key changes none of its bits. */
            for (int64_t j = j0; j < j1; ++j) {
              if (!f.block_seen[j - j0]) continue;
              for (int64_t x = 0; x < d; ++x) f.dk[(j - j0) * d + x] += f.pk[(j - j0) * d + x];
              for (int64_t e = 0; e < dv; ++e) f.dv[(j - j0) * dv + e] += f.pv[(j - j0) * dv + e];
            }
          }
        }
        for (int64_t j = j0; j < j1; ++j) {
          const int seen = f.key_seen[j - j0];
          for (int64_t x = 0; x < d; ++x)
            panel_store(t, bp->dk, panel_at4(bp->dk_stride, b, j, g, x),
                        seen ? (double)(p->scale * f.dk[(j - j0) * d + x]) : 0.0);
          for (int64_t e = 0; e < dv; ++e)
            panel_store(t, bp->dv, panel_at4(bp->dv_stride, b, j, g, e), seen ? (double)f.dv[(j - j0) * dv + e] : 0.0);
        }
      }
      for (int64_t hh = 0; hh < group; ++hh)
        for (int64_t i = 0; i < lq; ++i) {
          const int64_t r = hh * lq + i;
          for (int64_t x = 0; x < d; ++x)
            panel_store(t, bp->dq, panel_at4(bp->dq_stride, b, i, g * group + hh, x),
                        f.row_any[r] ? (double)(p->scale * f.dq[r * d + x]) : 0.0);
        }
    }
  fa2_free(&f);
  return 0;
}

/* Options: "tile=N" (1 <= N <= 65536), or "" for the default 64. */
PANEL_EXPORT attncheck_instance* attncheck_subject_v3(const char* options, char* err, size_t err_len) {
  static const panel_option tile = {"tile", 64, 1, 65536};
  panel_instance* self = panel_new("online", row, work_bytes, &tile, 0, options, err, err_len);
  if (!self) return NULL;
  self->desc.hints.k_tile = self->size;
  self->desc.key_blocks = panel_tiles;
  self->desc.hints.q_tile = self->size;
  panel_v3_backward(self, backward, backward_blocks);
  return &self->desc;
}
