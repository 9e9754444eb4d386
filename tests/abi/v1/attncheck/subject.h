/* attncheck subject ABI, version 1.
 *
 * Any attention implementation is checked through this one C header. A
 * plugin is a shared library exporting
 *
 *     const attncheck_subject* attncheck_subject_v1(void);
 *
 * which returns a static description: name, capabilities, the numbers the
 * error bound needs, the invariances it claims, and its entry points.
 * Semantics are those of SPEC.md (the attention contract). All sizes and
 * strides are in elements, int64. Laws a subject cannot take (a dtype,
 * a mask kind or the cache it does not declare) are reported as skipped.
 */
#ifndef ATTNCHECK_SUBJECT_H
#define ATTNCHECK_SUBJECT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ATTNCHECK_SUBJECT_ABI_VERSION 1u

typedef enum attncheck_dtype {
  ATTNCHECK_F32 = 0, /* IEEE binary32 */
  ATTNCHECK_F16 = 1, /* IEEE binary16 */
  ATTNCHECK_BF16 = 2 /* bfloat16: the top half of a binary32 */
} attncheck_dtype;

/* Capability bits (attncheck_subject.features). */
#define ATTNCHECK_FEATURE_CAUSAL 0x01u  /* bottom-right causal mask */
#define ATTNCHECK_FEATURE_PADDING 0x02u /* per-batch key lengths */
#define ATTNCHECK_FEATURE_MASK 0x04u    /* boolean allowed-mask with broadcast */
#define ATTNCHECK_FEATURE_LSE 0x08u     /* fills lse when asked */
#define ATTNCHECK_FEATURE_CACHE 0x10u   /* cache_* entry points are set */
#define ATTNCHECK_FEATURE_THREADS 0x20u /* honours attncheck_problem.threads */

/* Invariance claims (attncheck_subject.invariances): checked bit for bit. */
#define ATTNCHECK_CLAIM_DETERMINISTIC 0x01u /* same call, same bits */
#define ATTNCHECK_CLAIM_THREADS 0x02u       /* any thread count, same bits */
#define ATTNCHECK_CLAIM_BATCH 0x04u         /* a row alone == the row inside any batch */
#define ATTNCHECK_CLAIM_CACHE 0x08u         /* prefill == any chunking through the cache */
#define ATTNCHECK_CLAIM_LAYOUT 0x10u        /* strided == contiguous inputs and output */
#define ATTNCHECK_CLAIM_LQ 0x20u            /* a row's bits do not depend on Lq (chunking without a cache) */

/* A read-only strided tensor (B, L, H, D order for Q, K, V). */
typedef struct attncheck_tensor {
  const void* data;  /* address of element [0,0,0,0] */
  int64_t stride[4]; /* >= 0; never read outside the described view */
} attncheck_tensor;

/* One attention call: O[b,i,h,:] and optionally LSE[b,h,i]. */
typedef struct attncheck_problem {
  uint32_t struct_size;  /* sizeof(attncheck_problem) of the caller */
  attncheck_dtype dtype; /* storage type of q, k, v and o */
  int64_t b, hq, hkv, lq, lk, d, dv;
  float scale;            /* as given; the subject must not recompute it */
  int32_t causal;         /* bottom-right, aligned to the valid keys */
  int32_t threads;        /* 0: the subject's default; >0: use this many */
  const int64_t* key_len; /* NULL, or b valid-key counts in [0, lk] */
  const uint8_t* mask;    /* NULL, or allowed-mask: 1 = may attend */
  int64_t mask_stride[4]; /* over (b, h, i, j); 0 broadcasts that dim */
  attncheck_tensor q, k, v;
  void* o; /* output, (B, Lq, Hq, Dv) */
  int64_t o_stride[4];
  float* lse; /* NULL, or output LSE[b,h,i] (f32; -inf for rows that see nothing) */
  int64_t lse_stride[3];
} attncheck_problem;

/* A KV cache for cache_* entry points: b sequences of hkv heads. */
typedef struct attncheck_cache_config {
  uint32_t struct_size;
  attncheck_dtype dtype;
  int64_t b, hkv, d, dv;
  int64_t capacity;          /* tokens per sequence the caller will append at most */
  int64_t page_size;         /* tokens per page (>= 1); a hint for non-paged caches */
  const int64_t* page_order; /* NULL, or a permutation of the physical pages to hand out, in order */
  int64_t page_count;        /* entries in page_order */
} attncheck_cache_config;

/* Error reporting: entry points return 0 on success; otherwise nonzero and a
 * NUL-terminated message in err (at most err_len bytes including the NUL). */
typedef struct attncheck_subject {
  uint32_t abi_version; /* ATTNCHECK_SUBJECT_ABI_VERSION */
  const char* name;
  uint32_t dtypes;              /* bit (1u << dtype) for each dtype taken */
  uint32_t features;            /* ATTNCHECK_FEATURE_* */
  uint32_t invariances;         /* ATTNCHECK_CLAIM_* */
  double compute_unit_roundoff; /* u of the compute type, e.g. 0x1p-24 for f32 */
  double exp_ulps;              /* declared accuracy of exp (c_exp), in ulps */

  /* nb for the bound: online-softmax rescales plus merges over a row of the
   * problem (1 for an algorithm that sees all keys at once). NULL: 1. */
  int64_t (*key_blocks)(const attncheck_problem* p);

  /* Computes the problem. Required. */
  int (*attend)(const attncheck_problem* p, char* err, size_t err_len);

  /* Cache (all set when ATTNCHECK_FEATURE_CACHE, else NULL). */
  void* (*cache_create)(const attncheck_cache_config* cfg, char* err, size_t err_len);
  /* Appends count[bi] <= k.shape tokens to sequence bi from rows 0..count[bi]-1
   * of k (b, c, hkv, d) and v (b, c, hkv, dv). */
  int (*cache_append)(void* cache, const attncheck_tensor* k, const attncheck_tensor* v, int64_t c, const int64_t* count,
                      char* err, size_t err_len);
  /* Attends p->lq new queries of every sequence to that sequence's cached keys
   * (the queries are its last lq tokens; bottom-right causal when p->causal).
   * Reads p->q, p->o, p->lse, p->scale, p->threads, p->causal; p->lk is the
   * cache capacity, p->k, p->v, p->key_len and p->mask are ignored. */
  int (*cache_attend)(void* cache, const attncheck_problem* p, char* err, size_t err_len);
  void (*cache_free)(void* cache);
} attncheck_subject;

/* The one exported symbol of a plugin. */
typedef const attncheck_subject* (*attncheck_subject_entry)(void);
#define ATTNCHECK_SUBJECT_ENTRY "attncheck_subject_v1"

#ifdef __cplusplus
}
#endif

#endif /* ATTNCHECK_SUBJECT_H */
