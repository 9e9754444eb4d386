// The bundled kernel (impl/) behind the subject ABI (version 3): the gate
// checks it through exactly the interface a plugin uses. Each instance keeps
// its own tile sizes, parsed from its option string.
#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <new>

#include "attncheck/subject.h"
#include "attncheck/bundled_subjects.hpp"
#include "attncheck/environment.hpp"
#include "attncheck/subject_host.hpp"
#include "attnimpl/attention.hpp"
#include "attnimpl/backward.hpp"
#include "attnimpl/paged.hpp"
#include "builtin_cache.hpp"

namespace attncheck::builtin {

attnimpl::dtype to_impl(attncheck_dtype t) {
  switch (t) {
    case ATTNCHECK_F16: return attnimpl::dtype::f16;
    case ATTNCHECK_BF16: return attnimpl::dtype::bf16;
    default: return attnimpl::dtype::f32;
  }
}

attnimpl::config config_for(const instance* in, const attncheck_problem* p) {
  attnimpl::config cfg = in->tiles;
  cfg.threads = p->threads;
  return cfg;
}

void write_err(char* err, std::size_t len, const std::string& msg) {
  if (err && len) std::snprintf(err, len, "%s", msg.c_str());
}

namespace {

// An instruction set by name, one this CPU runs; `what` names where it came from.
bool parse_simd(const std::string& value, const std::string& what, attnimpl::isa& simd, std::string& why) {
  const auto which = attnimpl::parse_isa(value);
  if (!which || value.empty()) {
    why = what + ": simd takes auto, avx512, avx2 or portable";
    return false;
  }
  if (!attnimpl::isa_supported(*which)) {
    why = what + (*which == attnimpl::isa::avx512 ? ": this CPU lacks AVX-512 F, BW or VL (or AVX2, FMA or F16C)"
                                                  : ": this CPU lacks AVX2, FMA or F16C");
    return false;
  }
  simd = *which;
  return true;
}

}  // namespace

bool parse_options(const char* options, attnimpl::config& tiles, std::string& why) {
  // The instruction set starts from ATTNIMPL_ISA (docs/cli.md, "Environment"); simd= overrides it.
  if (const std::string& env = environment("ATTNIMPL_ISA");
      !env.empty() && !parse_simd(env, "environment variable ATTNIMPL_ISA='" + env + "'", tiles.simd, why))
    return false;
  std::string rest = options ? options : "";
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const std::string item = rest.substr(0, comma);
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    const auto eq = item.find('=');
    const std::string key = item.substr(0, eq), value = eq == std::string::npos ? "" : item.substr(eq + 1);
    if (key == "tiles") {
      if (value == "tiny") {
        tiles.q_tile = 2, tiles.k_tile = 3, tiles.split_keys = 6;  // tiny_tiles in subject_host.hpp
        continue;
      }
      if (value == "production") {
        tiles.q_tile = 0, tiles.k_tile = 0, tiles.split_keys = 0;
        continue;
      }
      why = "'" + item + "': tiles takes tiny or production";
      return false;
    }
    if (key == "simd") {  // the kernel's instruction set (attnimpl::isa)
      if (!parse_simd(value, "'" + item + "'", tiles.simd, why)) return false;
      continue;
    }
    std::int64_t* slot = key == "q_tile"       ? &tiles.q_tile
                         : key == "k_tile"     ? &tiles.k_tile
                         : key == "split_keys" ? &tiles.split_keys
                                               : nullptr;
    std::int64_t v = -1;
    if (slot) {
      auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
      if (ec != std::errc() || ptr != value.data() + value.size()) v = -1;
    }
    if (!slot || v < 0 || v > 65536) {
      why = "'" + item +
            "': expected q_tile=N, k_tile=N or split_keys=N with N in [0, 65536] (0: production), tiles=tiny or "
            "simd=auto|avx2|portable";
      return false;
    }
    *slot = v;
  }
  return true;
}

// The contract 1.1 variants of a version 3 problem (none where the host's
// problem is too short to hold the pointer, or it is NULL).
attnimpl::variants variants_of(const attncheck_problem* p) {
  attnimpl::variants var;
  const bool holds = p->struct_size >= offsetof(attncheck_problem, variants) + sizeof p->variants;
  const attncheck_variants* v = holds ? p->variants : nullptr;
  if (!v) return var;
  var.window_left = v->window_left;
  var.window_right = v->window_right;
  var.chunk = v->chunk;
  var.softcap = v->softcap;
  var.alibi = v->alibi;
  var.sinks = v->sinks;
  if (v->bias)
    var.bias = {v->bias, to_impl(v->bias_dtype), {v->bias_stride[0], v->bias_stride[1], v->bias_stride[2], v->bias_stride[3]}};
  return var;
}

namespace {

int report(const attnimpl::status& st, char* err, std::size_t err_len) {
  if (st.ok()) return 0;
  write_err(err, err_len, st.message);
  return 1;
}

attnimpl::tensor_in tensor_of(const attncheck_tensor& t, attnimpl::dtype type) {
  return {t.data, type, {t.stride[0], t.stride[1], t.stride[2], t.stride[3]}};
}

attnimpl::paged_kv paged_of(const attncheck_paged_kv& pg, attnimpl::dtype type) {
  attnimpl::paged_kv kv;
  kv.page_size = pg.page_size;
  kv.num_pages = pg.num_pages;
  kv.k_pages = tensor_of(pg.k_pages, type);
  kv.v_pages = tensor_of(pg.v_pages, type);
  kv.table = pg.block_table;
  kv.table_stride = pg.block_table_stride;
  kv.max_pages = pg.max_pages;
  return kv;
}

// The paged and ragged forms (docs/abi.md "Paged K/V", "Ragged batches"):
// attnimpl's paged_attention and ragged_attention take them as they are.
int attend_forms(const attncheck_problem* p, const attncheck_paged_kv* pg, const attncheck_ragged* rg,
                 const attnimpl::config& cfg, char* err, std::size_t err_len) {
  const auto t = to_impl(p->dtype);
  const attnimpl::shape dims{p->b, p->hq, p->hkv, p->lq, p->lk, p->d, p->dv};
  const attnimpl::tensor_out o{p->o, t, {p->o_stride[0], p->o_stride[1], p->o_stride[2], p->o_stride[3]}};
  attnimpl::lse_out lse;
  if (p->lse) lse = {p->lse, {p->lse_stride[0], p->lse_stride[1], p->lse_stride[2]}};
  attnimpl::mask_in mask;
  if (p->mask) mask = {p->mask, {p->mask_stride[0], p->mask_stride[1], p->mask_stride[2], p->mask_stride[3]}};
  const attnimpl::paged_kv kv = pg ? paged_of(*pg, t) : attnimpl::paged_kv{};
  if (!rg) {
    attnimpl::paged_attention_args a;
    a.dims = dims;
    a.q = tensor_of(p->q, t);
    a.kv = kv;
    a.o = o;
    a.lse = lse;
    a.scale = p->scale;
    a.causal = p->causal != 0;
    a.key_len = p->key_len;
    a.mask = mask;
    a.var = variants_of(p);
    return report(attnimpl::paged_attention(a, cfg), err, err_len);
  }
  attnimpl::ragged_attention_args a;
  a.dims = dims;
  a.cu_seqlens_q = rg->cu_seqlens_q;
  a.cu_seqlens_k = rg->cu_seqlens_k;
  a.q = tensor_of(p->q, t);
  a.k = tensor_of(p->k, t);
  a.v = tensor_of(p->v, t);
  a.paged = pg ? &kv : nullptr;
  a.key_len = pg ? p->key_len : nullptr;
  a.o = o;
  a.lse = lse;
  a.scale = p->scale;
  a.causal = p->causal != 0;
  a.mask = mask;
  a.var = variants_of(p);
  return report(attnimpl::ragged_attention(a, cfg), err, err_len);
}

int attend(void* state, const attncheck_problem* p, char* err, std::size_t err_len) {
  // paged and ragged are read only where the host's problem is long enough to hold them.
  const bool has_forms = p->struct_size >= offsetof(attncheck_problem, ragged) + sizeof p->ragged;
  if (has_forms && (p->paged || p->ragged))
    return attend_forms(p, p->paged, p->ragged, config_for(static_cast<instance*>(state), p), err, err_len);
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
  a.var = variants_of(p);
  const auto st = attnimpl::attention(a, config_for(static_cast<instance*>(state), p));
  if (!st.ok()) {
    write_err(err, err_len, st.message);
    return 1;
  }
  return 0;
}

std::int64_t key_blocks(void* state, const attncheck_problem* p) {
  return attnimpl::key_blocks(p->lk, config_for(static_cast<instance*>(state), p), variants_of(p));
}

// The backward pass's blocks: the instance's query and key tiles (0, the
// production default, is 64 each: attnimpl::backward_config), the
// problem's thread count and the instance's instruction set.
attnimpl::backward_config backward_config_of(const instance* in, const attncheck_problem* p) {
  return {in->tiles.q_tile, in->tiles.k_tile, p->threads, in->tiles.simd};
}

// dQ, dK, dV (and d(sink)) of a problem with any of the score variants
// (docs/spec.md "Backward"): impl's backward takes the forward's variants.
int attend_backward(void* state, const attncheck_backward_problem* bp, char* err, std::size_t err_len) {
  const attncheck_problem* p = bp->forward;
  attnimpl::backward_args a;
  a.dims = {p->b, p->hq, p->hkv, p->lq, p->lk, p->d, p->dv};
  const auto t = to_impl(p->dtype);
  const auto in = [t](const void* data, const std::int64_t* st) {
    return attnimpl::tensor_in{data, t, {st[0], st[1], st[2], st[3]}};
  };
  const auto out = [t](void* data, const std::int64_t* st) {
    return attnimpl::tensor_out{data, t, {st[0], st[1], st[2], st[3]}};
  };
  a.q = in(p->q.data, p->q.stride);
  a.k = in(p->k.data, p->k.stride);
  a.v = in(p->v.data, p->v.stride);
  a.o = in(bp->o.data, bp->o.stride);
  a.lse = bp->lse;
  a.lse_stride = {bp->lse_stride[0], bp->lse_stride[1], bp->lse_stride[2]};
  a.d_o = in(bp->d_o.data, bp->d_o.stride);
  a.dq = out(bp->dq, bp->dq_stride);
  a.dk = out(bp->dk, bp->dk_stride);
  a.dv = out(bp->dv, bp->dv_stride);
  a.scale = p->scale;
  a.causal = p->causal != 0;
  a.key_len = p->key_len;
  if (p->mask) a.mask = {p->mask, {p->mask_stride[0], p->mask_stride[1], p->mask_stride[2], p->mask_stride[3]}};
  a.var = variants_of(p);
  a.d_sinks = bp->d_sinks;
  const auto st = attnimpl::attention_backward(a, backward_config_of(static_cast<instance*>(state), p));
  if (!st.ok()) {
    write_err(err, err_len, st.message);
    return 1;
  }
  return 0;
}

void backward_blocks(void* state, const attncheck_backward_problem* bp, std::int64_t* dq_blocks, std::int64_t* dkv_blocks) {
  const attncheck_problem* p = bp->forward;
  const auto [dq, dkv] = attnimpl::backward_blocks({p->b, p->hq, p->hkv, p->lq, p->lk, p->d, p->dv},
                                                   backward_config_of(static_cast<instance*>(state), p));
  *dq_blocks = dq;
  *dkv_blocks = dkv;
}

void destroy(attncheck_instance* self) { delete static_cast<instance*>(self->state); }

}  // namespace

void describe(instance& in, const char* name) {
  attncheck_instance& d = in.desc;
  d.abi_version = ATTNCHECK_SUBJECT_ABI_VERSION_4;
  d.struct_size = sizeof d;
  // Every contract 1.1 score variant, in the one-shot call and the paged and
  // ragged forms (docs/impl.md); the cache path takes none.
  d.features_v3 = ATTNCHECK_FEATURE3_WINDOW | ATTNCHECK_FEATURE3_CHUNK | ATTNCHECK_FEATURE3_SOFTCAP | ATTNCHECK_FEATURE3_SINKS |
                  ATTNCHECK_FEATURE3_ALIBI | ATTNCHECK_FEATURE3_BIAS | ATTNCHECK_FEATURE3_BACKWARD |
                  ATTNCHECK_FEATURE3_BACKWARD_VARIANTS | ATTNCHECK_FEATURE3_PAGED | ATTNCHECK_FEATURE3_RAGGED;
  // Backward (every score variant, d(sink) too, impl/src/backward): one fixed order of
  // every sum whatever the thread count or instruction set, multiplies and
  // adds only (no contraction), so the same bits everywhere.
  // Paged and ragged (attnimpl/paged.hpp): the dense form's engine, whose
  // arithmetic for a row depends only on the keys it sees, never on where
  // they sit, the batch or Lq (tests/impl/paged_test.cpp, every ISA and
  // thread count), so the forms give the dense form's bits.
  d.invariances_v3 = ATTNCHECK_CLAIM3_BACKWARD_DETERMINISTIC | ATTNCHECK_CLAIM3_PAGE_PLACEMENT |
                     ATTNCHECK_CLAIM3_PAGED_EQUALS_DENSE | ATTNCHECK_CLAIM3_RAGGED_EQUALS_DENSE;
  d.tanh_ulps = attnimpl::tanh_ulps();
  // The scale folded into Q in f32 (impl/src/engine): Q or K * 2^k with scale * 2^-k gives the same products, bit for bit.
  d.invariances_v4 = ATTNCHECK_CLAIM4_SCALE_EXACT;
  const attnimpl::config& t = in.tiles;
  in.name = name;
  if (t.q_tile || t.k_tile || t.split_keys)
    in.name += " q_tile=" + std::to_string(t.q_tile) + ",k_tile=" + std::to_string(t.k_tile) +
               ",split_keys=" + std::to_string(t.split_keys);
  if (t.simd != attnimpl::isa::automatic) in.name += std::string(" simd=") + attnimpl::isa_name(t.simd);
  d.name = in.name.c_str();
  d.dtypes = (1u << ATTNCHECK_F32) | (1u << ATTNCHECK_F16) | (1u << ATTNCHECK_BF16);
  d.features = ATTNCHECK_FEATURE_CAUSAL | ATTNCHECK_FEATURE_PADDING | ATTNCHECK_FEATURE_MASK | ATTNCHECK_FEATURE_LSE |
               ATTNCHECK_FEATURE_THREADS;
  // Block boundaries at fixed key positions and a fixed merge order (docs/impl.md):
  d.invariances = ATTNCHECK_CLAIM_DETERMINISTIC | ATTNCHECK_CLAIM_THREADS | ATTNCHECK_CLAIM_BATCH | ATTNCHECK_CLAIM_LAYOUT |
                  ATTNCHECK_CLAIM_LQ;
  d.compute_unit_roundoff = 0x1p-24;
  // The same on both instruction sets: the portable path computes the AVX2
  // path's bits (tests/impl/isa_test.cpp).
  d.exp_ulps = attnimpl::exp_ulps();
  // Where the kernel changes path: its tiles as resolved; at the default
  // query tile, the 128-row slices of a unit (128 / G positions: 128 for
  // G = 1, then 64, 42, 32, 16, 8) and the units of about 512 rows (512 / G
  // positions for G = 1, 2, 3; attnimpl::q_tile_for); the 8-wide vectors of
  // D and Dv.
  attnimpl::config r = attnimpl::resolve(t);
  d.hints.q_tile = t.q_tile > 0 ? t.q_tile : 128;
  d.hints.k_tile = r.k_tile;
  d.hints.split_keys = r.split_keys;
  if (t.q_tile <= 0) {
    const std::int64_t per_group[] = {64, 42, 32, 16, 8, 512, 256, 170};
    static_assert(std::size(per_group) <= ATTNCHECK_SIZE_HINT_SLOTS);
    for (std::size_t i = 0; i < std::size(per_group); ++i) d.hints.lengths[i] = per_group[i];
  }
  d.hints.head_dims[0] = 8;
  d.state = &in;
  d.key_blocks = key_blocks;
  d.attend = attend;
  d.attend_backward = attend_backward;
  d.backward_blocks = backward_blocks;
  d.destroy = destroy;
  install_cache(d);
}

}  // namespace attncheck::builtin

namespace attncheck {

attncheck_instance* builtin_instance(const char* options, char* err, std::size_t err_len) {
  auto* in = new (std::nothrow) builtin::instance{};
  if (!in) return nullptr;
  std::string why;
  if (!builtin::parse_options(options, in->tiles, why)) {
    builtin::write_err(err, err_len, why);
    delete in;
    return nullptr;
  }
  builtin::describe(*in, "attnimpl");
  return &in->desc;
}

}  // namespace attncheck
