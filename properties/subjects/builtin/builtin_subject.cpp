// The bundled kernel (impl/) behind the subject ABI: the gate checks it
// through exactly the interface a plugin uses.
#include <cstdio>
#include <cstring>

#include "attncheck/subject.h"
#include "attncheck/subject_host.hpp"
#include "attnimpl/attention.hpp"
#include "builtin_cache.hpp"

namespace attncheck {

namespace builtin {

attnimpl::dtype to_impl(attncheck_dtype t) {
  switch (t) {
    case ATTNCHECK_F16: return attnimpl::dtype::f16;
    case ATTNCHECK_BF16: return attnimpl::dtype::bf16;
    default: return attnimpl::dtype::f32;
  }
}

namespace {
// Tile sizes for the whole process, set by subject::load("builtin:k_tile=3,...").
attnimpl::config tiles{};
}  // namespace

void set_tiles(std::int64_t q_tile, std::int64_t k_tile, std::int64_t split_keys) {
  tiles.q_tile = q_tile, tiles.k_tile = k_tile, tiles.split_keys = split_keys;
}

attnimpl::config config_for(const attncheck_problem* p) {
  attnimpl::config cfg = tiles;
  cfg.threads = p->threads;
  return cfg;
}

void write_err(char* err, std::size_t len, const std::string& msg) {
  if (err && len) std::snprintf(err, len, "%s", msg.c_str());
}

namespace {

int attend(const attncheck_problem* p, char* err, std::size_t err_len) {
  attnimpl::attention_args a;
  a.dims = {p->b, p->hq, p->hkv, p->lq, p->lk, p->d, p->dv};
  const auto t = to_impl(p->dtype);
  a.q = {p->q.data, t, {p->q.stride[0], p->q.stride[1], p->q.stride[2], p->q.stride[3]}};
  a.k = {p->k.data, t, {p->k.stride[0], p->k.stride[1], p->k.stride[2], p->k.stride[3]}};
  a.v = {p->v.data, t, {p->v.stride[0], p->v.stride[1], p->v.stride[2], p->v.stride[3]}};
  a.o = {p->o, t, {p->o_stride[0], p->o_stride[1], p->o_stride[2], p->o_stride[3]}};
  if (p->lse) a.lse = {p->lse, {p->lse_stride[0], p->lse_stride[1], p->lse_stride[2]}};
  a.scale = p->scale;
  a.causal = p->causal != 0;
  a.key_len = p->key_len;
  if (p->mask) a.mask = {p->mask, {p->mask_stride[0], p->mask_stride[1], p->mask_stride[2], p->mask_stride[3]}};
  const auto st = attnimpl::attention(a, config_for(p));
  if (!st.ok()) {
    write_err(err, err_len, st.message);
    return 1;
  }
  return 0;
}

std::int64_t key_blocks(const attncheck_problem* p) { return attnimpl::key_blocks(p->lk, config_for(p)); }

attncheck_subject make_desc() {
  attncheck_subject d{};
  d.abi_version = ATTNCHECK_SUBJECT_ABI_VERSION;
  d.name = "attnimpl";
  d.dtypes = (1u << ATTNCHECK_F32) | (1u << ATTNCHECK_F16) | (1u << ATTNCHECK_BF16);
  d.features = ATTNCHECK_FEATURE_CAUSAL | ATTNCHECK_FEATURE_PADDING | ATTNCHECK_FEATURE_MASK | ATTNCHECK_FEATURE_LSE |
               ATTNCHECK_FEATURE_THREADS;
  // Block boundaries at fixed key positions and a fixed merge order (impl/README):
  d.invariances = ATTNCHECK_CLAIM_DETERMINISTIC | ATTNCHECK_CLAIM_THREADS | ATTNCHECK_CLAIM_BATCH |
                  ATTNCHECK_CLAIM_LAYOUT | ATTNCHECK_CLAIM_LQ;
  d.compute_unit_roundoff = 0x1p-24;
  d.exp_ulps = attnimpl::exp_ulps();
  d.key_blocks = key_blocks;
  d.attend = attend;
  install_cache(d);
  return d;
}

}  // namespace
}  // namespace builtin

void configure_builtin(std::int64_t q_tile, std::int64_t k_tile, std::int64_t split_keys) {
  builtin::set_tiles(q_tile, k_tile, split_keys);
}

const attncheck_subject* builtin_subject() {
  static const attncheck_subject desc = builtin::make_desc();
  return &desc;
}

}  // namespace attncheck
