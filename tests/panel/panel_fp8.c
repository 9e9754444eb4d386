/* Panel kernel fp8: attention on fp8 inputs as FlashAttention 3's fp8
 * forward computes it (docs/spec.md "fp8 storage"), written from the spec
 * and subject.h alone. panel.h's reading of fp8 inputs (panel_head_of): the
 * stored values decoded to f32 as they are (every e4m3 and e5m2 value is
 * exact in f32) and never multiplied by their descales; the scores
 * s_j = (q . k_j) * c of the raw values, with c = fl(fl(s_q s_k) * scale) the
 * descales folded into the scale; and O = fl(fl(acc / l) * s_v), V's descale on
 * the output. The row is panel_online_row over tiles of 64 keys (an online
 * softmax in f32, expf); inputs not in fp8 (f32, f16, bf16) are read the same
 * way, with descales of 1.
 *
 * That is not the naive subject's arithmetic (each value times its descale
 * as it is read): it checks the bound's descale terms (docs/bound.md "fp8
 * storage") on the other common form. Declared: u = 2^-24, exp 1 ulp, nb =
 * ceil(Lk / 64), the scale applied after the dot product, fp8 inputs
 * (e4m3, e5m2) with tensor and head descales in the one-shot call. Its cache
 * takes no fp8 (the host hands it none). */
#include "panel.h"

#define FP8_TILE 64

static size_t work_bytes(const void* state, int64_t lk, int64_t d, int64_t dv) {
  (void)state, (void)lk, (void)d;
  return sizeof(float) * (size_t)(FP8_TILE + dv);
}

static void row(const void* state, const panel_row* r, double* o, double* lse) {
  (void)state;
  panel_online_row(r, FP8_TILE, o, lse);
}

static int64_t tiles(void* state, const attncheck_problem* p) {
  (void)state;
  return (p->lk + FP8_TILE - 1) / FP8_TILE;
}

static const attncheck_profile profile = {.struct_size = sizeof(attncheck_profile), .scale_mode = ATTNCHECK_SCALE_AFTER_DOT};

PANEL_EXPORT attncheck_instance* attncheck_subject_v4(const char* options, char* err, size_t err_len) {
  panel_instance* self = panel_new("fp8", row, work_bytes, NULL, FP8_TILE, options, err, err_len);
  if (!self) return NULL;
  self->kn.dtypes |= (1u << ATTNCHECK_E4M3) | (1u << ATTNCHECK_E5M2);
  self->desc.dtypes = self->kn.dtypes;
  self->desc.abi_version = ATTNCHECK_SUBJECT_ABI_VERSION_4;
  self->desc.features_v4 = ATTNCHECK_FEATURE4_FP8;
  self->desc.key_blocks = tiles;
  self->desc.hints.k_tile = FP8_TILE;
  self->desc.profile = &profile;
  return &self->desc;
}
