/* attncheck subject ABI, versions 1, 2 and 3.
 *
 * Any attention implementation is checked through this one C header.
 *
 * Version 2 (preferred): a plugin is a shared library exporting
 *
 *     attncheck_instance* attncheck_subject_v2(const char* options, char* err, size_t err_len);
 *
 * which makes one INSTANCE from an option string ("key=value,key=value", ""
 * for the defaults; the host passes what follows the first ':' of
 * `--subject PATH:options`). The instance carries its name, capabilities,
 * the numbers the error bound needs, the invariances it claims, the sizes at
 * which its code changes path (size hints) and its entry points; every entry
 * point receives the instance's `state`. Two instances of one plugin never
 * share configuration. Unknown options must be refused (NULL and a message
 * naming the option). The host calls `destroy` once when done.
 *
 * Both entry points are declared at the end of this header, inside
 * extern "C": a C++ plugin that includes it gets unmangled names.
 *
 * Version 1: a plugin exporting `const attncheck_subject* attncheck_subject_v1(void)`
 * (one static description, no options, no size hints) keeps loading and
 * passing unchanged; the host adapts it.
 *
 * The versions, the rules they keep and the design of version 3 (variants,
 * paged K/V, ragged batches, backward): docs/abi.md.
 *
 * Semantics are those of docs/spec.md (the attention contract). All sizes and
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

#define ATTNCHECK_SUBJECT_ABI_VERSION_1 1u
/* Version 1 under its first name, which plugins written against the version 1
 * header use: an alias kept for their source compatibility. */
#define ATTNCHECK_SUBJECT_ABI_VERSION ATTNCHECK_SUBJECT_ABI_VERSION_1

typedef enum attncheck_dtype {
  ATTNCHECK_F32 = 0,  /* IEEE binary32 */
  ATTNCHECK_F16 = 1,  /* IEEE binary16 */
  ATTNCHECK_BF16 = 2, /* bfloat16: the top half of a binary32 */
  /* Version 4, with ATTNCHECK_FEATURE4_FP8: storage of Q, K and V only, in
   * attncheck_quant (never O or a bias). One byte each. */
  ATTNCHECK_E4M3 = 3, /* OCP E4M3FN: no infinities, S.1111.111 its one NaN, largest 448 */
  ATTNCHECK_E5M2 = 4  /* OCP E5M2: IEEE-like, largest 57344 */
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

/* Parts of a version 3 problem and the backward problem (below, and in the
 * issues that define them: docs/abi.md); a version 1 or 2 subject never meets them. */
typedef struct attncheck_variants attncheck_variants;
typedef struct attncheck_paged_kv attncheck_paged_kv;
typedef struct attncheck_ragged attncheck_ragged;
typedef struct attncheck_backward_problem attncheck_backward_problem;
/* Parts of a version 4 instance (docs/abi.md "Version 4"): the profile, the
 * conventions (empty rows, masked slots, flushed intermediates and outputs),
 * the static limits and the quantization (fp8 inputs with tensor and head
 * descales) are built (below). */
typedef struct attncheck_profile attncheck_profile;
typedef struct attncheck_conventions attncheck_conventions;
typedef struct attncheck_limits attncheck_limits;
typedef struct attncheck_quant attncheck_quant;

/* One attention call: O[b,i,h,:] and optionally LSE[b,h,i].
 *
 * What the subject may assume about the inputs (docs/spec.md "Masked slots
 * are ignored, bit for bit"): a slot of Q, K or V that no visible pair reads
 * -- a key hidden by the mask, the causal limit or a window, a key at or past
 * key_len[b], a query row that sees no key, a page or slot a block table does
 * not name -- may hold anything, and the laws fill such slots with NaN (any
 * payload), +-inf or the largest finite value. Skip them; never weight them
 * by zero (0 * NaN = NaN reaches O), unless the instance declares the
 * convention ATTNCHECK_MASKED_WEIGHTED_BY_ZERO: then such slots hold finite
 * values no larger in magnitude than the largest used one, and must still
 * not move O or LSE by a bit. Slots that visible pairs read hold the
 * case's values, finite unless the case is about non-finite inputs. The
 * tensors are read-only and never overlap the outputs; bytes around O and
 * LSE are guard bands the host checks, so write each output element once and
 * nothing else. */
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
  /* ---- version 3: read only by a version 3 subject, each NULL unless the
   * problem uses that part and the subject declared it (docs/abi.md) ---- */
  const attncheck_variants* variants; /* window, chunk, softcap, sinks, ALiBi, bias */
  const attncheck_paged_kv* paged;    /* K and V through a block table (docs/abi.md) */
  const attncheck_ragged* ragged;     /* packed sequences (docs/abi.md) */
  /* ---- version 4: NULL unless the problem holds fp8 inputs and the subject
   * declared ATTNCHECK_FEATURE4_FP8 (attncheck_quant below) ---- */
  const attncheck_quant* quant;
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
  uint32_t abi_version; /* ATTNCHECK_SUBJECT_ABI_VERSION_1 */
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

/* The one exported symbol of a version 1 plugin. */
typedef const attncheck_subject* (*attncheck_subject_entry)(void);
#define ATTNCHECK_SUBJECT_ENTRY "attncheck_subject_v1"

/* ---- Version 2 ---------------------------------------------------------- */

#define ATTNCHECK_SUBJECT_ABI_VERSION_2 2u
#define ATTNCHECK_SIZE_HINT_SLOTS 8

/* Limits the host enforces on every subject (version 1 and 2); a subject
 * outside them is refused at load with an error naming the field. */
#define ATTNCHECK_MIN_UNIT_ROUNDOFF 0x1p-64 /* compute_unit_roundoff >= 2^-64 */
#define ATTNCHECK_MAX_UNIT_ROUNDOFF 0x1p-8  /* compute_unit_roundoff <= 2^-8 (2^-24 is f32 compute) */
#define ATTNCHECK_MAX_EXP_ULPS 4096.0       /* 0 <= exp_ulps <= 4096 */
#define ATTNCHECK_MAX_SIZE_HINT 1048576     /* every size hint in [0, 2^20] */
#define ATTNCHECK_ERR_CAPACITY 512          /* err_len the host passes to every entry point */
/* nb from key_blocks is clamped to [1, max(1, 2 Lk)]: one rescale and one merge per key at most. */
#define ATTNCHECK_MAX_KEY_BLOCKS_PER_KEY 2
/* tests/abi/abi_limits_test.cpp checks each limit against the host's checks. */

/* Where a subject's code changes path. Generators lean to each hint +-1, to
 * its multiples and to masks that blank whole tiles. 0 means "none" and ends
 * the lists. A subject without hints is probed at the common production
 * values (16, 32, 64, 128, 256, 512, 1024). */
typedef struct attncheck_size_hints {
  int64_t q_tile;                               /* query rows per tile, or 0 */
  int64_t k_tile;                               /* keys per online-softmax block, or 0 */
  int64_t split_keys;                           /* keys per split-KV chunk, or 0 */
  int64_t lengths[ATTNCHECK_SIZE_HINT_SLOTS];   /* other Lq/Lk thresholds (e.g. a prefill path at Lq >= 64) */
  int64_t head_dims[ATTNCHECK_SIZE_HINT_SLOTS]; /* D/Dv thresholds or vector widths (e.g. 8, 64) */
} attncheck_size_hints;

typedef struct attncheck_instance {
  uint32_t abi_version;         /* ATTNCHECK_SUBJECT_ABI_VERSION_2 */
  uint32_t struct_size;         /* sizeof(attncheck_instance) of the plugin */
  const char* name;             /* may describe the options, e.g. "attnimpl k_tile=7" */
  uint32_t dtypes;              /* bit (1u << dtype) for each dtype taken */
  uint32_t features;            /* ATTNCHECK_FEATURE_* */
  uint32_t invariances;         /* ATTNCHECK_CLAIM_* */
  double compute_unit_roundoff; /* u of the compute type: in [ATTNCHECK_MIN_UNIT_ROUNDOFF, ATTNCHECK_MAX_UNIT_ROUNDOFF] */
  double exp_ulps;              /* c_exp, in ulps: in [0, ATTNCHECK_MAX_EXP_ULPS] */
  attncheck_size_hints hints;
  void* state; /* the instance's own data, passed to every entry point */

  /* nb for the bound (see version 1); NULL: 1. The host clamps it to [1, max(1, 2 Lk)]. */
  int64_t (*key_blocks)(void* state, const attncheck_problem* p);
  /* Required. */
  int (*attend)(void* state, const attncheck_problem* p, char* err, size_t err_len);
  /* Cache: all set when ATTNCHECK_FEATURE_CACHE, else NULL (semantics as in version 1). */
  void* (*cache_create)(void* state, const attncheck_cache_config* cfg, char* err, size_t err_len);
  int (*cache_append)(void* state, void* cache, const attncheck_tensor* k, const attncheck_tensor* v, int64_t c,
                      const int64_t* count, char* err, size_t err_len);
  int (*cache_attend)(void* state, void* cache, const attncheck_problem* p, char* err, size_t err_len);
  void (*cache_free)(void* state, void* cache);
  /* Releases the instance (this struct included, if the plugin allocated it). */
  void (*destroy)(struct attncheck_instance* self);

  /* ---- version 3: read when abi_version >= 3 and struct_size covers them ---- */
  uint32_t features_v3;    /* ATTNCHECK_FEATURE3_* */
  uint32_t invariances_v3; /* ATTNCHECK_CLAIM3_* */
  double tanh_ulps;        /* c_tanh, in ulps, with FEATURE3_SOFTCAP: in [0, ATTNCHECK_MAX_TANH_ULPS] */
  /* Backward: set iff FEATURE3_BACKWARD, else NULL (docs/abi.md). */
  int (*attend_backward)(void* state, const attncheck_backward_problem* p, char* err, size_t err_len);
  /* nb of the backward bound: dQ's key blocks of a row, and the query blocks summed
   * into one key's dK and dV. NULL: 1 each. */
  void (*backward_blocks)(void* state, const attncheck_backward_problem* p, int64_t* dq_blocks, int64_t* dkv_blocks);

  /* ---- version 4: read when abi_version >= 4 and struct_size covers them (docs/abi.md "Version 4") ---- */
  uint32_t features_v4;    /* ATTNCHECK_FEATURE4_* */
  uint32_t invariances_v4; /* ATTNCHECK_CLAIM4_* */
  /* NULL: every stage at compute_unit_roundoff, as version 3 (attncheck_profile below). */
  const attncheck_profile* profile;
  /* NULL: the contract's conventions (attncheck_conventions below). */
  const attncheck_conventions* conventions;
  /* NULL: no static limits; a case may still be declined (attncheck_limits below). */
  const attncheck_limits* limits;
  /* Designed (docs/abi.md) and not built yet: this host refuses an instance
   * that sets it, rather than not judge it. NULL. */
  int (*cache_append_v4)(void* state, void* cache, const attncheck_tensor* k, const attncheck_tensor* v, int64_t c,
                         const int64_t* count, const attncheck_quant* quant, char* err, size_t err_len);
} attncheck_instance;

/* The size of a version 2 instance: what a version 2 plugin built against an
 * older header reports in struct_size, and the least the host accepts. */
#define ATTNCHECK_INSTANCE_V2_SIZE offsetof(attncheck_instance, features_v3)

/* The exported symbol of a version 2 plugin (it may export version 1 too; the host prefers 2). */
typedef attncheck_instance* (*attncheck_subject_entry_v2)(const char* options, char* err, size_t err_len);
#define ATTNCHECK_SUBJECT_ENTRY_V2 "attncheck_subject_v2"

/* ---- Version 3 (docs/abi.md) --------------------------------------------- */

/* A version 3 plugin exports attncheck_subject_v3 (the signature of version 2)
 * and returns an attncheck_instance whose abi_version is 3, with the version 3
 * fields at its end (struct_size = sizeof(attncheck_instance); one that ends
 * before features_v3 loads with no version 3 feature). The host looks for
 * _v3, then _v2, then _v1. Fields of a part the subject did not declare hold
 * their neutral values (window -1/-1, chunk 0, softcap 0, NULL pointers), and
 * the host never hands a subject a problem that uses an undeclared part. */
#define ATTNCHECK_SUBJECT_ABI_VERSION_3 3u
#define ATTNCHECK_SUBJECT_ENTRY_V3 "attncheck_subject_v3"

/* Feature bits of attncheck_instance.features_v3. An unknown bit is refused at load. */
#define ATTNCHECK_FEATURE3_WINDOW 0x001u    /* sliding window (left, right) */
#define ATTNCHECK_FEATURE3_CHUNK 0x002u     /* chunked local attention */
#define ATTNCHECK_FEATURE3_SOFTCAP 0x004u   /* logit softcap; declares tanh_ulps */
#define ATTNCHECK_FEATURE3_SINKS 0x008u     /* one sink logit per query head */
#define ATTNCHECK_FEATURE3_ALIBI 0x010u     /* ALiBi slopes per query head */
#define ATTNCHECK_FEATURE3_BIAS 0x020u      /* additive bias tensor */
#define ATTNCHECK_FEATURE3_PAGED 0x040u     /* K and V in a page arena through a block table (docs/abi.md) */
#define ATTNCHECK_FEATURE3_RAGGED 0x080u    /* packed sequences, cu_seqlens (docs/abi.md) */
#define ATTNCHECK_FEATURE3_BACKWARD 0x100u  /* attend_backward (docs/abi.md) */
#define ATTNCHECK_FEATURE3_BIAS_GRAD 0x200u /* d(bias) from the backward pass (docs/abi.md) */
/* attend_backward takes the score variants the subject declares (window, chunk,
 * softcap, sinks with d_sinks, ALiBi, bias); without it the host hands backward
 * contract 1.0 problems only (docs/abi.md "The backward problem"). */
#define ATTNCHECK_FEATURE3_BACKWARD_VARIANTS 0x400u
/* The bits this header defines; a host refuses any other. */
#define ATTNCHECK_FEATURE3_KNOWN 0x7ffu

/* Claim bits of attncheck_instance.invariances_v3, checked bit for bit. */
#define ATTNCHECK_CLAIM3_PAGE_PLACEMENT 0x01u         /* where pages sit in the arena changes no bit */
#define ATTNCHECK_CLAIM3_PAGED_EQUALS_DENSE 0x02u     /* the paged form gives the dense form's bits */
#define ATTNCHECK_CLAIM3_RAGGED_EQUALS_DENSE 0x04u    /* a packed sequence gives its batch-of-one bits */
#define ATTNCHECK_CLAIM3_BACKWARD_DETERMINISTIC 0x08u /* backward: same call, any thread count, same bits */
#define ATTNCHECK_CLAIM3_KNOWN 0x0fu

/* ---- Version 4 (docs/abi.md "Version 4") ------------------------------------ */

/* A version 4 plugin exports attncheck_subject_v4 (the signature of version 2)
 * and returns an instance whose abi_version is 4 with the version 4 fields at
 * its end; one whose struct_size ends before features_v4 loads as version 3.
 * The host looks for _v4, _v3, _v2, then _v1. */
#define ATTNCHECK_SUBJECT_ABI_VERSION_4 4u
#define ATTNCHECK_SUBJECT_ENTRY_V4 "attncheck_subject_v4"
/* The size of a version 3 instance: what a plugin built against a version 3 header reports. */
#define ATTNCHECK_INSTANCE_V3_SIZE offsetof(attncheck_instance, features_v4)

/* Feature bits of attncheck_instance.features_v4. An unknown bit is refused at load. */
/* Takes e4m3 and e5m2 storage of Q, K and V (their bits in dtypes) with
 * descales, through problem->quant (attncheck_quant below). */
#define ATTNCHECK_FEATURE4_FP8 0x01u
#define ATTNCHECK_FEATURE4_KNOWN 0x01u

/* Claim bits of attncheck_instance.invariances_v4, checked bit for bit. */
/* Q * 2^k with scale * 2^-k (or K likewise) gives the same bits wherever no
 * intermediate leaves the normal range (the scale applied after the dot
 * product, or folded into Q or K; not split as sqrt(scale) into both). Without
 * it the scale law judges these scalings within the bound. */
#define ATTNCHECK_CLAIM4_SCALE_EXACT 0x01u
#define ATTNCHECK_CLAIM4_KNOWN 0x01u

/* fp8 storage with descales (docs/abi.md "The problem grows at its end",
 * docs/spec.md "fp8 storage"). A stored value x with descale s means x * s
 * exactly; the oracle computes attention on those values, so the subject is
 * judged on what it was given. Descales are contiguous f32, finite and
 * positive. problem->dtype is q_dtype; o_dtype is O's (f32, f16 or bf16). */
#define ATTNCHECK_DESCALE_NONE 0u   /* no descale: NULL, the stored value is the value */
#define ATTNCHECK_DESCALE_TENSOR 1u /* one value */
#define ATTNCHECK_DESCALE_HEAD 2u   /* Q: (b, hq); K and V: (b, hkv), row-major */
/* ATTNCHECK_DESCALE_BLOCK (3) and _TOKEN (4) are designed (docs/abi.md), not built. */
struct attncheck_quant {
  uint32_t struct_size;                                 /* sizeof(attncheck_quant) of the host */
  int32_t q_dtype, k_dtype, v_dtype, o_dtype;           /* each an attncheck_dtype; K and V may differ from Q */
  uint32_t q_granularity, k_granularity, v_granularity; /* ATTNCHECK_DESCALE_* */
  int64_t k_block, v_block;                             /* keys per descale with _BLOCK (not built: 0) */
  const float* q_descale;                               /* NULL with _NONE */
  const float* k_descale;
  const float* v_descale;
  float o_scale; /* with FEATURE4_OUTPUT_SCALE (not built): 1 */
};

/* The stage-wise precision profile (docs/abi.md "Stage-wise precision
 * profile"; each stage's term: docs/bound.md "Stage-wise profiles"). It
 * belongs to the instance (the plugin allocates it, writes struct_size, and
 * keeps it until destroy). A unit of 0 inherits compute_unit_roundoff, so an
 * all-zero profile is the version 3 declaration: one u for every stage. Units
 * lie in [ATTNCHECK_MIN_UNIT_ROUNDOFF, ATTNCHECK_MAX_UNIT_ROUNDOFF]; anything
 * else is refused at load, naming the field. */
#define ATTNCHECK_EXACT (-1.0)          /* qk_product_u: exact products; exp_ulps: correctly rounded (1/2 ulp) */
#define ATTNCHECK_SCALE_ANY 0u          /* any way docs/spec.md allows (the bound counts the costliest) */
#define ATTNCHECK_SCALE_AFTER_DOT 1u    /* scale * (q . k) */
#define ATTNCHECK_SCALE_INTO_Q 2u       /* (scale * q) . k */
#define ATTNCHECK_SCALE_INTO_K 3u       /* q . (scale * k) */
#define ATTNCHECK_SCALE_SQRT_SPLIT 4u   /* (r q) . (r k), r = sqrt(scale) */
#define ATTNCHECK_SCALE_LOG2E_FOLDED 5u /* (q . k) * (scale * log2 e), then exp2 */
#define ATTNCHECK_P_COMPUTE 0u          /* P kept at the compute unit */
#define ATTNCHECK_P_F32 1u
#define ATTNCHECK_P_BF16 2u
#define ATTNCHECK_P_F16 3u
#define ATTNCHECK_P_E4M3 4u /* OCP E4M3FN (u 2^-4, smallest subnormal 2^-9); no fp8 input needed */
#define ATTNCHECK_P_E5M2 5u /* OCP E5M2 (u 2^-3, smallest subnormal 2^-16) */
#define ATTNCHECK_P_FACTOR_NONE 0u
#define ATTNCHECK_P_FACTOR_POW2 1u       /* P * 2^p_factor_log2 before its rounding, divided out after P V */
#define ATTNCHECK_P_FACTOR_ROW 2u        /* a per-row factor (fp8's; not built: refused) */
#define ATTNCHECK_ROW_SUM_BEFORE_CAST 0u /* L sums the weights before P's rounding */
#define ATTNCHECK_ROW_SUM_AFTER_CAST 1u  /* L sums the rounded P */
struct attncheck_profile {
  uint32_t struct_size; /* sizeof(attncheck_profile) of the plugin */
  /* S = scale * Q K^T */
  double qk_product_u; /* each product q_d k_d: 0 inherit, ATTNCHECK_EXACT: exact (bf16 or f16 products into f32) */
  double qk_accum_u;   /* the dot product's additions (a tensor core that truncates declares its own) */
  uint32_t scale_mode; /* ATTNCHECK_SCALE_* */
  /* softmax */
  double
      exp_ulps; /* 0 inherit the instance's exp_ulps; ATTNCHECK_EXACT: correctly rounded; else in (0, ATTNCHECK_MAX_EXP_ULPS] */
  double rescale_u; /* the online softmax's rescale products; 0 inherit */
  /* P before P V */
  uint32_t p_format;     /* ATTNCHECK_P_* */
  uint32_t p_factor;     /* ATTNCHECK_P_FACTOR_* */
  int32_t p_factor_log2; /* with _POW2: in [-64, the format's largest exponent - 1] */
  uint32_t row_sum;      /* ATTNCHECK_ROW_SUM_* (with p_format not _COMPUTE) */
  uint32_t p_saturates;  /* fp8 P formats only, 0 or 1 (moot: no weight times a factor reaches the largest value) */
  double pv_accum_u;     /* the P V accumulation (ggml's f16 accumulator: 2^-11); 0 inherit */
  /* outputs */
  double lse_u; /* the LSE's log and add; 0 inherit */
};

/* Conventions (docs/abi.md "Conventions"): what a kernel does where the
 * contract's choice is one of several in production. It belongs to the
 * instance, as the profile. Zero in every field is the contract's choice. */
#define ATTNCHECK_EMPTY_O_ZERO 0u            /* a row that sees no key: O = 0 (the contract's) */
#define ATTNCHECK_EMPTY_O_NAN 1u             /* O = NaN */
#define ATTNCHECK_EMPTY_O_UNSPECIFIED 2u     /* any value: excused, never judged */
#define ATTNCHECK_EMPTY_LSE_MINUS_INF 0u     /* LSE = -inf (the contract's) */
#define ATTNCHECK_EMPTY_LSE_PLUS_INF 1u      /* LSE = +inf (FlashAttention 2) */
#define ATTNCHECK_EMPTY_LSE_ZERO 2u          /* LSE = 0 */
#define ATTNCHECK_EMPTY_LSE_UNSPECIFIED 3u   /* any value: excused, never judged */
#define ATTNCHECK_MASKED_SKIPPED 0u          /* masked and padded slots are never read (the contract's) */
#define ATTNCHECK_MASKED_WEIGHTED_BY_ZERO 1u /* read and weighted by exactly zero: the laws fill them finite */
#define ATTNCHECK_FLUSH_INPUTS 0x1u          /* every input below 2^-126 in magnitude read as 0 (DAZ) */
#define ATTNCHECK_FLUSH_INTERMEDIATES 0x2u   /* every f32 result below 2^-126 becomes 0 */
#define ATTNCHECK_FLUSH_OUTPUTS 0x4u         /* O and LSE below their type's smallest normal stored as 0 */
struct attncheck_conventions {
  uint32_t struct_size;   /* sizeof(attncheck_conventions) of the plugin */
  uint32_t empty_row_o;   /* ATTNCHECK_EMPTY_O_*: a row with no visible key (and no sink) */
  uint32_t empty_row_lse; /* ATTNCHECK_EMPTY_LSE_* */
  uint32_t masked_slots;  /* ATTNCHECK_MASKED_* */
  uint32_t flush;         /* ATTNCHECK_FLUSH_* bits; 0: subnormals honoured (the contract's) */
};

/* Static limits (docs/abi.md "Static limits"): the shapes and parameters a
 * kernel takes, declared once so that the generators draw inside them and no
 * case is spent on a decline. It belongs to the instance, as the profile. A
 * zero field is "no limit". The host never hands a subject a case outside its
 * limits: such a case is declined on the subject's behalf, counted under the
 * limit's name, even under --strict-declines. Built: the head sizes, Dv = D,
 * causal Lq <= Lk, the smallest Lk, the largest group, the scale's signs, the
 * bias storage types, the ALiBi distance and the geometric slope rule at
 * any max_bias in (0, 64] (8: the published family); a version 4 host
 * refuses a slope list (designed, not judged yet). */
#define ATTNCHECK_SCALE_SIGN_POSITIVE 0x1u   /* scale > 0 (the default 1/sqrt(D) is positive) */
#define ATTNCHECK_SCALE_SIGN_ZERO 0x2u       /* scale = 0 */
#define ATTNCHECK_SCALE_SIGN_NEGATIVE 0x4u   /* scale < 0 */
#define ATTNCHECK_ALIBI_ANY 0u               /* any slopes (the contract's) */
#define ATTNCHECK_ALIBI_GEOMETRIC 1u         /* slopes from alibi_max_bias, BLOOM's and ggml's rule */
#define ATTNCHECK_ALIBI_LIST 2u              /* exactly alibi_slope_list, per head in order (not judged yet) */
#define ATTNCHECK_MAX_LIMIT_HEAD_DIM 4096    /* max_head_dim, head_dim_multiple and head_dims[] in [0, 4096] */
#define ATTNCHECK_MAX_LIMIT_MIN_LK 4096      /* min_lk in [0, 4096] */
#define ATTNCHECK_MAX_LIMIT_DISTANCE 1048576 /* alibi_max_distance in [0, 2^20], and 0 or >= min_lk - 1 */
#define ATTNCHECK_MAX_LIMIT_MAX_BIAS 64      /* alibi_max_bias in (0, 64], an f32 value */
struct attncheck_limits {
  uint32_t struct_size;                         /* sizeof(attncheck_limits) of the plugin */
  int64_t max_head_dim;                         /* D and Dv at most this; 0: none */
  int64_t head_dim_multiple;                    /* D and Dv multiples of this; 0 or 1: none */
  int64_t head_dims[ATTNCHECK_SIZE_HINT_SLOTS]; /* only these D and Dv (0 ends the list; all 0: any) */
  int32_t dv_equals_d;                          /* 1: Dv = D only */
  int32_t causal_lq_at_most_lk;                 /* 1: a causal problem has Lq <= Lk */
  int64_t min_lk;                               /* the smallest Lk taken; 0: 1 */
  int64_t max_group;                            /* the largest Hq / Hkv; 0: any, 1: no GQA */
  uint32_t scale_signs;                         /* ATTNCHECK_SCALE_SIGN_* bits taken; 0: all */
  uint32_t bias_dtypes;                         /* bits (1u << ATTNCHECK_F32 etc.) of the bias storage types; 0: all three */
  int64_t alibi_max_distance;    /* with ALiBi, the largest |j - p| held exactly: max(Lk, Lq) - 1 at most; 0: any */
  uint32_t alibi_slopes;         /* ATTNCHECK_ALIBI_* */
  double alibi_max_bias;         /* with ATTNCHECK_ALIBI_GEOMETRIC */
  const float* alibi_slope_list; /* with ATTNCHECK_ALIBI_LIST: alibi_slope_count slopes */
  int64_t alibi_slope_count;
};

/* What an entry point returns. 0 is success, any other status a failure,
 * except ATTNCHECK_DECLINED from a version 4 instance: "this case is outside
 * what I compute", with a short, stable reason in err ("head size > 256";
 * the text up to the first ':' is the reason's key). The gate counts declines
 * per law and reason, draws another case in its place, and never calls a
 * decline a failure (unless run with --strict-declines); a law whose cases
 * are mostly declined is UNJUDGED. A declined call must leave its outputs
 * unwritten. From a version 1 to 3 instance, 2 is a failure like any other. */
#define ATTNCHECK_OK 0
#define ATTNCHECK_DECLINED 2

/* Limits of version 3, enforced at load and on every problem the host builds. */
#define ATTNCHECK_MAX_TANH_ULPS 4096.0      /* 0 <= tanh_ulps <= 4096, as exp_ulps */
#define ATTNCHECK_MAX_PAGE_SIZE 512         /* page_size in [1, 512] (docs/abi.md) */
#define ATTNCHECK_MAX_RAGGED_SEQUENCES 4096 /* B of a packed batch (docs/abi.md) */

/* problem->variants: the score variants of contract 1.1 (docs/spec.md "Variants"): per visible pair,
 * s = softcap(scale * q.k) + alibi[h] * (j - p) + bias[b,h,i,j], then the masks
 * (window, chunk, a -inf bias entry), then the softmax with sinks[h] in the
 * denominator; p = n[b] - lq + i. A row that sees no key gets O = 0 and
 * LSE = sinks[h] (-inf without a sink). */
struct attncheck_variants {
  uint32_t struct_size; /* sizeof(attncheck_variants) of the host */
  int64_t window_left;  /* -1: unbounded; else key j visible only if j >= p - window_left */
  int64_t window_right; /* -1: unbounded; else key j visible only if j <= p + window_right */
  int64_t chunk;        /* 0: none; else key j visible only if floor(j / chunk) == floor(p / chunk) */
  float softcap;        /* 0: none; else s = softcap * tanh(scale * q.k / softcap) */
  const float* sinks;   /* NULL, or hq sink logits (f32; -inf allowed: no sink for that head) */
  const float* alibi;   /* NULL, or hq slopes: s += alibi[h] * (j - p) */
  const void* bias;     /* NULL, or bias[b,h,i,j] of bias_dtype, added to s; -inf masks the key */
  attncheck_dtype bias_dtype;
  int64_t bias_stride[4]; /* over (b, h, i, j), in elements; 0 broadcasts that dimension */
};

/* problem->paged: K and V in a page arena through a block table (FEATURE3_PAGED;
 * docs/abi.md "Paged K/V", docs/spec.md "Paged KV"). Logical key j < n[b] of
 * sequence b is slot j % page_size of page block_table[b * block_table_stride
 * + j / page_size] in k_pages and v_pages; problem->k and ->v are unused (data
 * NULL) and problem->key_len always gives n[b]. Entries of a row past
 * ceil(n[b] / page_size), slots past n[b] in the last page and every page no
 * valid entry names are unspecified (stale page numbers, -1, numbers out of
 * range; NaN or huge canaries): never read them. Pages may be shared between
 * rows; the arenas and the table are read-only. */
struct attncheck_paged_kv {
  uint32_t struct_size;       /* sizeof(attncheck_paged_kv) of the host */
  int64_t page_size;          /* P, in [1, ATTNCHECK_MAX_PAGE_SIZE] */
  int64_t num_pages;          /* pages in each arena (may exceed what the batch uses) */
  attncheck_tensor k_pages;   /* K arena, (num_pages, P, Hkv, D) order, any strides */
  attncheck_tensor v_pages;   /* V arena, (num_pages, P, Hkv, Dv) order, any strides */
  const int32_t* block_table; /* b rows of max_pages entries */
  int64_t block_table_stride; /* entries from one row to the next, >= max_pages */
  int64_t max_pages;          /* entries per row, >= ceil(n[b] / P) for every b */
};

/* problem->ragged: packed sequences (FEATURE3_RAGGED; docs/abi.md "Ragged
 * batches", docs/spec.md "Ragged batches"). Query i of sequence b is row
 * cu_seqlens_q[b] + i of Q and O, taken along stride[1] (stride[0] unused),
 * and of LSE along lse_stride[2] (lse_stride[0] unused); key j is row
 * cu_seqlens_k[b] + j of K and V unless paged (then cu_seqlens_k is NULL and
 * key_len gives n[b]); otherwise key_len is NULL. Each sequence is its own
 * problem (positions p = n[b] - lq[b] + i); lq and lk bound the lengths; a mask
 * or a bias is indexed by the query and key within the sequence. Zero-length
 * sequences are legal on either side; write every valid row and nothing else. */
struct attncheck_ragged {
  uint32_t struct_size;        /* sizeof(attncheck_ragged) of the host */
  const int64_t* cu_seqlens_q; /* b + 1 offsets: 0 = cu[0] <= cu[1] <= ... = total_q */
  const int64_t* cu_seqlens_k; /* b + 1 offsets into K and V; NULL with paged */
  int64_t total_q, total_k;    /* rows of the packed tensors */
};

/* The backward problem (FEATURE3_BACKWARD; docs/abi.md "The backward problem",
 * docs/spec.md "Backward"): given the forward problem's Q, K, V (and its
 * masks, padding, scale, GQA mapping), the forward O and LSE handed in and the
 * output gradient dO, the subject writes dQ, dK and dV of L = sum dO * O.
 * Every tensor has the forward's storage dtype except lse (f32). dK and dV of
 * a key no row sees (masked, padded, causally hidden) are exactly 0; a row that
 * sees no key adds nothing (its dQ is 0). A KV head's dK and dV are the sums
 * over its G query heads. With FEATURE3_BACKWARD_VARIANTS the forward problem
 * may carry variants: under a softcap c the score's gradient is multiplied by
 * 1 - tanh^2(scale q.k / c); with sinks the subject also writes d_sinks[h] =
 * -sum over (b, i) of exp(sink_h - LSE) D (D = rowsum(dO O); 0 for a -inf
 * sink). The host poisons every output element and the guard bands around
 * each buffer before the call and checks them after it. */
struct attncheck_backward_problem {
  uint32_t struct_size;             /* sizeof(attncheck_backward_problem) of the host */
  const attncheck_problem* forward; /* shapes, masks, scale, q, k, v; its o and lse are NULL and not written */
  attncheck_tensor o;               /* the forward O handed in, (B, Lq, Hq, Dv) */
  const float* lse;                 /* the forward LSE handed in, [b,h,i] over lse_stride (-inf: the row sees nothing) */
  int64_t lse_stride[3];
  attncheck_tensor d_o; /* dO, (B, Lq, Hq, Dv) */
  void* dq;             /* output (B, Lq, Hq, D) */
  int64_t dq_stride[4];
  void* dk; /* output (B, Lk, Hkv, D): a KV head's sum over its G query heads */
  int64_t dk_stride[4];
  void* dv; /* output (B, Lk, Hkv, Dv) */
  int64_t dv_stride[4];
  float* d_sinks; /* Hq entries (f32) when the forward has sinks, else NULL (FEATURE3_BACKWARD_VARIANTS) */
  void* d_bias;   /* with FEATURE3_BIAS_GRAD and a bias, else NULL (not handed out yet) */
  int64_t d_bias_stride[4];
};

/* ---- The entry points ---------------------------------------------------- */

/* A plugin defines one or both. Declared here, inside extern "C", so that a
 * C++ plugin including this header defines them with C linkage (unmangled
 * names the host finds) and a definition with the wrong signature does not
 * compile; with default visibility, so that -fvisibility=hidden still
 * exports them. */
#if defined(__GNUC__) || defined(__clang__)
#define ATTNCHECK_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define ATTNCHECK_PLUGIN_EXPORT
#endif
ATTNCHECK_PLUGIN_EXPORT attncheck_instance* attncheck_subject_v4(const char* options, char* err, size_t err_len);
ATTNCHECK_PLUGIN_EXPORT attncheck_instance* attncheck_subject_v3(const char* options, char* err, size_t err_len);
ATTNCHECK_PLUGIN_EXPORT attncheck_instance* attncheck_subject_v2(const char* options, char* err, size_t err_len);
ATTNCHECK_PLUGIN_EXPORT const attncheck_subject* attncheck_subject_v1(void);

#ifdef __cplusplus
}
#endif

#endif /* ATTNCHECK_SUBJECT_H */
