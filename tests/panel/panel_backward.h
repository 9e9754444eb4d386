/* The plumbing the panel's backward kernels share (docs/spec.md "Backward",
 * docs/abi.md "The backward problem"): which keys a row sees, element
 * addresses of the strided tensors the host hands in, and the version 3
 * instance that declares ATTNCHECK_FEATURE3_BACKWARD. Each kernel writes its
 * own loops and arithmetic; nothing here computes a gradient.
 *
 * Written from docs/spec.md, docs/abi.md and subject.h alone, independent of
 * impl/ and of properties/subjects/. */
#ifndef ATTNCHECK_PANEL_BACKWARD_H
#define ATTNCHECK_PANEL_BACKWARD_H

#include "panel.h"

/* Element (a, b, c, d) of a 4-d strided view. */
static inline int64_t panel_at4(const int64_t* stride, int64_t a, int64_t b, int64_t c, int64_t d) {
  return a * stride[0] + b * stride[1] + c * stride[2] + d * stride[3];
}

/* The valid keys of batch element b (padding). */
static inline int64_t panel_valid_keys(const attncheck_problem* p, int64_t b) { return p->key_len ? p->key_len[b] : p->lk; }

/* Whether row (b, h, i) sees key j (docs/spec.md "Visibility"): j among the
 * valid keys, not after the row's position under bottom-right causal
 * alignment (position valid - lq + i), and allowed by the mask. */
static inline int panel_sees(const attncheck_problem* p, int64_t b, int64_t h, int64_t i, int64_t j) {
  const int64_t valid = panel_valid_keys(p, b);
  if (j < 0 || j >= valid) return 0;
  if (p->causal && j > valid - p->lq + i) return 0;
  if (p->mask && !p->mask[panel_at4(p->mask_stride, b, h, i, j)]) return 0;
  return 1;
}

/* Whether row (b, h, i) sees any key at all. */
static inline int panel_row_sees_any(const attncheck_problem* p, int64_t b, int64_t h, int64_t i) {
  const int64_t valid = panel_valid_keys(p, b);
  for (int64_t j = 0; j < valid; ++j)
    if (panel_sees(p, b, h, i, j)) return 1;
  return 0;
}

/* The LSE handed in for row (b, h, i). */
static inline float panel_lse_in(const attncheck_backward_problem* bp, int64_t b, int64_t h, int64_t i) {
  return bp->lse[b * bp->lse_stride[0] + h * bp->lse_stride[1] + i * bp->lse_stride[2]];
}

/* What a backward kernel must refuse: undeclared storage, bad shapes, a score
 * variant (none is declared, so none should ever come). */
static inline int panel_backward_check(const panel_kernel* kn, const attncheck_backward_problem* bp, char* err, size_t err_len) {
  const attncheck_problem* p = bp->forward;
  if (!p) return panel_fail(err, err_len, kn->name, "backward problem without its forward problem");
  if (panel_check(kn, p, err, err_len)) return 1;
  if (p->struct_size >= offsetof(attncheck_problem, ragged) + sizeof p->ragged && (p->variants || p->paged || p->ragged))
    return panel_fail(err, err_len, kn->name, "backward takes contract 1.0 problems only (no variant, paged or ragged form)");
  return 0;
}

/* Turns a version 2 panel instance into a version 3 one that declares the
 * backward pass (and only it among the version 3 features), claiming the
 * same bits every run: every panel backward runs one fixed order on one thread. */
static inline void panel_v3_backward(panel_instance* self,
                                     int (*backward)(void*, const attncheck_backward_problem*, char*, size_t),
                                     void (*blocks)(void*, const attncheck_backward_problem*, int64_t*, int64_t*)) {
  self->desc.abi_version = ATTNCHECK_SUBJECT_ABI_VERSION_3;
  self->desc.struct_size = sizeof(attncheck_instance);
  self->desc.features_v3 = ATTNCHECK_FEATURE3_BACKWARD;
  self->desc.invariances_v3 = ATTNCHECK_CLAIM3_BACKWARD_DETERMINISTIC;
  self->desc.tanh_ulps = 0.0;
  self->desc.attend_backward = backward;
  self->desc.backward_blocks = blocks;
}

/* The instance behind an entry point's state (the state is the instance's panel_kernel). */
static inline const panel_instance* panel_backward_self(void* state) { return panel_self(((const panel_kernel*)state)->state); }

#endif /* ATTNCHECK_PANEL_BACKWARD_H */
