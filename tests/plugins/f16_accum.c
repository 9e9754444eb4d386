/* An f16-accumulator attention subject (ABI v2) for the probabilistic bound's
 * tests (docs/bound.md, "The probabilistic bound"): online softmax over
 * blocks of 64 keys whose O accumulator has binary16's precision (11-bit
 * significands), as in kernels that run P V with f16 accumulation. Per key:
 * the f32 score, w = expf(s - m) rounded to 11 bits, the product w * v rounded
 * to 11 bits and added to the accumulator, rounded to 11 bits; each rescale
 * multiplies it by expf(m_old - m_new) rounded to 11 bits. Every such
 * operation has 11-bit operands, so computing it in float and rounding once
 * more is one correctly rounded 11-bit operation (float's 24 bits >= 2 * 11 + 2:
 * double rounding is innocuous). The row sum L and the final division are f32.
 *
 * The exponent range stays f32's: the contract takes compute with at least
 * f32's range (docs/spec.md, "Storage types and compute"), and a true binary16
 * accumulator, which overflows past 65504 and flushes weights below 2^-24 to
 * its subnormals, is outside the bound's class (docs/bound.md).
 *
 * Declared: u = 2^-11 (the f16 accumulator: the coarsest rounding of the
 * chain), exp_ulps = 1.5 (expf within 1 f32 ulp, then one f16 rounding:
 * below (1 + 2^-10) u), nb = ceil(n / 64).
 *
 * Option skip_rescale=1 makes the mutant: when the running maximum rises,
 * L is rescaled but the accumulator is not, so the keys before the rise keep
 * weights exp(S_j - m_old) in O: an O(1) error on rows whose maximum arrives
 * late. Only f16; causal and key padding; LSE. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attncheck/subject.h"

#define F16_BLOCK 64

typedef struct f16_accum {
  attncheck_instance desc; /* first, so &desc is the instance */
  int skip_rescale;        /* the mutant */
  char name[48];
} f16_accum;

/* Rounds a normal float to the nearest value with an 11-bit significand (ties
 * to even), binary16's precision in f32's exponent range; zeros, subnormals
 * (f32's own spacing, within the bound's underflow terms), inf and NaN stay. */
static float f16(float x) {
  uint32_t b;
  memcpy(&b, &x, sizeof b);
  const uint32_t exponent = b & 0x7f800000u;
  if (exponent == 0 || exponent == 0x7f800000u) return x;
  b += 0x0fffu + ((b >> 13) & 1u);
  b &= ~0x1fffu;
  memcpy(&x, &b, sizeof x);
  return x;
}

static float bits_float(uint32_t b) {
  float x;
  memcpy(&x, &b, sizeof x);
  return x;
}

/* binary16 bits to float (exact). */
static float load16(const void* base, int64_t at) {
  const uint16_t h = ((const uint16_t*)base)[at];
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) return (sign ? -1.0f : 1.0f) * ldexpf((float)m, -24);
  if (e == 31) return bits_float(sign | 0x7f800000u | (m << 13));
  return bits_float(sign | ((e + 112u) << 23) | (m << 13));
}

/* A float to the nearest binary16 (ties to even), as bits. */
static uint16_t store16(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) return (uint16_t)(sign | (x > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (x >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);                                  /* >= 65520: inf */
  if (x < 0x38800000u) return (uint16_t)(sign | (uint16_t)lrintf(bits_float(x) * 0x1p24f)); /* subnormal: m 2^-24 */
  return (uint16_t)(sign | (((x + 0x0fffu + ((x >> 13) & 1u)) >> 13) - 0x1c000u));
}

static int64_t key_blocks(void* state, const attncheck_problem* p) {
  (void)state;
  return p->lk > 0 ? (p->lk + F16_BLOCK - 1) / F16_BLOCK : 1;
}

static int attend(void* state, const attncheck_problem* p, char* err, size_t err_len) {
  const f16_accum* self = (const f16_accum*)state;
  if (p->dtype != ATTNCHECK_F16 || p->hkv < 1 || p->hq % p->hkv != 0) {
    snprintf(err, err_len, "f16_accum: f16 only, hq must be a multiple of hkv");
    return 1;
  }
  float* acc = (float*)malloc(sizeof(float) * (size_t)(p->dv > 0 ? p->dv : 1));
  if (!acc) {
    snprintf(err, err_len, "f16_accum: out of memory");
    return 2;
  }
  uint16_t* o = (uint16_t*)p->o;
  const int64_t group = p->hq / p->hkv;
  float s[F16_BLOCK];
  for (int64_t b = 0; b < p->b; ++b) {
    const int64_t n = p->key_len ? p->key_len[b] : p->lk;
    for (int64_t h = 0; h < p->hq; ++h) {
      const int64_t g = h / group;
      for (int64_t i = 0; i < p->lq; ++i) {
        const int64_t pos = n - p->lq + i; /* bottom-right causal alignment */
        const int64_t last = p->causal ? (pos < n - 1 ? pos : n - 1) : n - 1;
        float m = -INFINITY, l = 0.0f;
        for (int64_t e = 0; e < p->dv; ++e) acc[e] = 0.0f;
        for (int64_t j0 = 0; j0 <= last; j0 += F16_BLOCK) {
          const int64_t j1 = j0 + F16_BLOCK - 1 < last ? j0 + F16_BLOCK - 1 : last;
          float bm = -INFINITY;
          for (int64_t j = j0; j <= j1; ++j) {
            float dot = 0.0f;
            for (int64_t x = 0; x < p->d; ++x)
              dot += load16(p->q.data, b * p->q.stride[0] + i * p->q.stride[1] + h * p->q.stride[2] + x * p->q.stride[3]) *
                     load16(p->k.data, b * p->k.stride[0] + j * p->k.stride[1] + g * p->k.stride[2] + x * p->k.stride[3]);
            s[j - j0] = dot * p->scale;
            if (s[j - j0] > bm) bm = s[j - j0];
          }
          const float m_new = bm > m ? bm : m;
          if (m != -INFINITY && m_new > m) {
            const float alpha = expf(m - m_new);
            l *= alpha;
            if (!self->skip_rescale) {
              const float alpha16 = f16(alpha);
              for (int64_t e = 0; e < p->dv; ++e) acc[e] = f16(acc[e] * alpha16);
            }
          }
          for (int64_t j = j0; j <= j1; ++j) {
            const float w = f16(expf(s[j - j0] - m_new));
            l += w;
            for (int64_t e = 0; e < p->dv; ++e) {
              const float v =
                  load16(p->v.data, b * p->v.stride[0] + j * p->v.stride[1] + g * p->v.stride[2] + e * p->v.stride[3]);
              acc[e] = f16(acc[e] + f16(w * v));
            }
          }
          m = m_new;
        }
        for (int64_t e = 0; e < p->dv; ++e)
          o[b * p->o_stride[0] + i * p->o_stride[1] + h * p->o_stride[2] + e * p->o_stride[3]] =
              store16(last < 0 ? 0.0f : acc[e] / l);
        if (p->lse)
          p->lse[b * p->lse_stride[0] + h * p->lse_stride[1] + i * p->lse_stride[2]] = last < 0 ? -INFINITY : m + logf(l);
      }
    }
  }
  free(acc);
  return 0;
}

static void destroy(attncheck_instance* self) { free(self); }

/* Options: "" or "skip_rescale=0" (correct), "skip_rescale=1" (the mutant). */
__attribute__((visibility("default"))) attncheck_instance* attncheck_subject_v2(const char* options, char* err, size_t err_len) {
  int skip = 0;
  if (options && *options) {
    if (strcmp(options, "skip_rescale=1") == 0)
      skip = 1;
    else if (strcmp(options, "skip_rescale=0") != 0) {
      snprintf(err, err_len, "'%s': the only option is skip_rescale=0 or skip_rescale=1", options);
      return NULL;
    }
  }
  f16_accum* self = (f16_accum*)calloc(1, sizeof *self);
  if (!self) {
    snprintf(err, err_len, "out of memory");
    return NULL;
  }
  self->skip_rescale = skip;
  snprintf(self->name, sizeof self->name, "f16_accum%s", skip ? " skip_rescale=1" : "");
  attncheck_instance* d = &self->desc;
  d->abi_version = ATTNCHECK_SUBJECT_ABI_VERSION_2;
  d->struct_size = sizeof *d;
  d->name = self->name;
  d->dtypes = 1u << ATTNCHECK_F16;
  d->features = ATTNCHECK_FEATURE_CAUSAL | ATTNCHECK_FEATURE_PADDING | ATTNCHECK_FEATURE_LSE;
  d->invariances = ATTNCHECK_CLAIM_DETERMINISTIC | ATTNCHECK_CLAIM_LAYOUT | ATTNCHECK_CLAIM_BATCH | ATTNCHECK_CLAIM_LQ;
  d->compute_unit_roundoff = 0x1p-11; /* the f16 accumulator */
  d->exp_ulps = 1.5;
  d->hints.k_tile = F16_BLOCK;
  d->hints.lengths[0] = 4096;
  d->state = self;
  d->key_blocks = key_blocks;
  d->attend = attend;
  d->destroy = destroy;
  return d;
}
