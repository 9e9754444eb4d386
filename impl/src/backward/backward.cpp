// FlashAttention 2's backward pass (attnimpl/backward.hpp) on register-blocked
// f32 tiles, built once per instruction set (backward/kernel.hpp).
#include "attnimpl/backward.hpp"

// Everything from outside comes before the instruction-set switches below
// (as kernel_isa_prelude.hpp does for the forward): functions those headers
// define stay built for the baseline.
#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "../convert.hpp"
#include "../engine.hpp"
#include "../mutation.hpp"

namespace attnimpl {

namespace {

std::int64_t tile_of(std::int64_t t) { return t > 0 ? t : 64; }
std::size_t z(std::int64_t x) { return static_cast<std::size_t>(x); }

status check(const backward_args& a, const backward_config& cfg) {
  const shape& s = a.dims;
  if (s.b < 1 || s.hq < 1 || s.hkv < 1 || s.lq < 1 || s.lk < 1 || s.d < 1 || s.dv < 1)
    return status::invalid("dims: every size must be >= 1");
  if (s.hq % s.hkv != 0) return status::invalid("dims: hq must be a multiple of hkv");
  if (!a.q.data || !a.k.data || !a.v.data || !a.o.data || !a.d_o.data || !a.lse || !a.dq.data || !a.dk.data || !a.dv.data)
    return status::invalid("backward_args: q, k, v, o, lse, d_o, dq, dk and dv must be set");
  if (cfg.q_tile < 0 || cfg.k_tile < 0) return status::invalid("backward_config: tiles must be >= 0");
  if (!isa_supported(cfg.simd)) return status::invalid("backward_config: this CPU does not run the instruction set asked for");
  if (a.key_len)
    for (std::int64_t b = 0; b < s.b; ++b)
      if (a.key_len[b] < 0 || a.key_len[b] > s.lk) return status::invalid("key_len: each entry must lie in [0, lk]");
  return status::success();
}

}  // namespace

std::pair<std::int64_t, std::int64_t> backward_blocks(const shape& dims, const backward_config& cfg) {
  const std::int64_t bq = tile_of(cfg.q_tile), bk = tile_of(cfg.k_tile);
  return {(dims.lk + bk - 1) / bk, (dims.hq / std::max<std::int64_t>(1, dims.hkv)) * ((dims.lq + bq - 1) / bq)};
}

namespace {

// Rows of f32 are padded with zeros to a multiple of 16 floats (a vector of
// every instruction set divides it; the padding is computed, never stored).
constexpr std::int64_t lanes = 16;
std::int64_t padded(std::int64_t n) { return (n + lanes - 1) / lanes * lanes; }

// Row (b, i) may see keys [0, key_limit) (padding and causal, bottom-right
// aligned as the forward), within the mask.
std::int64_t key_limit(const backward_args& a, std::int64_t b, std::int64_t i) {
  const shape& s = a.dims;
  const std::int64_t n = a.key_len ? a.key_len[b] : s.lk;
  if (!a.causal || ATTNIMPL_MUTANT(backward_causal_ignored)) return n;
  const std::int64_t pos = ATTNIMPL_MUTANT(backward_causal_top_left) ? i : n - s.lq + i;
  return std::clamp<std::int64_t>(pos + 1, 0, n);
}

bool mask_allows(const backward_args& a, std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) {
  return !a.mask.data ||
         a.mask.data[b * a.mask.stride[0] + h * a.mask.stride[1] + i * a.mask.stride[2] + j * a.mask.stride[3]] != 0;
}

// One call's constants.
struct job {
  const backward_args& a;
  std::int64_t bq, bk;
  float scale;
};

// The f32 inputs and accumulators of one (batch element, KV head): its G
// query heads' rows (Q, dO, D, LSE, dQ), one key block's K and V (row-major
// and transposed), its dK and dV sums, and one query block's scores, dP, P
// and dS over the key block. Each worker thread owns one.
struct scratch {
  std::vector<float> q, d_o, dq, big_d, lse, o_row, part;
  std::vector<std::int64_t> limit;
  std::vector<char> sees;
  std::vector<float> k, v, kt, vt, dk_blk, dv_blk;
  std::vector<float> s, dp, p, ds;
  std::vector<char> seen, vis;
  std::vector<std::int64_t> cnt, row_lo, key_lo, key_hi;  // a partly visible block: each row's keys, each key's rows
  // The mutant backward_dq_order_nondeterministic only: how far this call
  // rotates the order of the key blocks and of the keys in each block's dQ
  // partial (0 otherwise: key order).
  std::int64_t dq_rotation = 0;
};

// The instruction sets' builds of the loops. Functions defined between a
// push and its pop are built for that set; everything in them is local to
// this file (anonymous namespace), so no other object can be handed one.
namespace portable {
struct vec {
  using t = float;
  static constexpr int width = 1;
  static t zero() { return 0.0f; }
  static t load(const float* p) { return *p; }
  static t bcast(const float* p) { return *p; }
  static void store(float* p, t v) { *p = v; }
  static t fma(t a, t b, t c) { return std::fma(a, b, c); }  // rounded once, as the FMA units
  static t add(t a, t b) { return a + b; }
};
constexpr int rows_max = 2, vectors_max = 16;
void exp_n(const float* x, float* y, std::size_t n) { engine::exp_array(x, y, n, isa::portable); }
#include "kernel.hpp"
}  // namespace portable

#if defined(__x86_64__) || defined(_M_X64)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif
namespace avx2 {
struct vec {
  using t = __m256;
  static constexpr int width = 8;
  static t zero() { return _mm256_setzero_ps(); }
  static t load(const float* p) { return _mm256_loadu_ps(p); }
  static t bcast(const float* p) { return _mm256_broadcast_ss(p); }
  static void store(float* p, t v) { _mm256_storeu_ps(p, v); }
  static t fma(t a, t b, t c) { return _mm256_fmadd_ps(a, b, c); }
  static t add(t a, t b) { return _mm256_add_ps(a, b); }
};
constexpr int rows_max = 6, vectors_max = 2;  // 12 accumulators of the 16 registers
void exp_n(const float* x, float* y, std::size_t n) { engine::avx2::exp_array(x, y, n); }
#include "kernel.hpp"
}  // namespace avx2
#if defined(__clang__)
#pragma clang attribute pop
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")
#endif
namespace avx512 {
struct vec {
  using t = __m512;
  static constexpr int width = 16;
  static t zero() { return _mm512_setzero_ps(); }
  static t load(const float* p) { return _mm512_loadu_ps(p); }
  static t bcast(const float* p) { return _mm512_set1_ps(*p); }
  static void store(float* p, t v) { _mm512_storeu_ps(p, v); }
  static t fma(t a, t b, t c) { return _mm512_fmadd_ps(a, b, c); }
  static t add(t a, t b) { return _mm512_add_ps(a, b); }
};
constexpr int rows_max = 6, vectors_max = 4;  // 24 accumulators of the 32 registers
void exp_n(const float* x, float* y, std::size_t n) { engine::avx512::exp_array(x, y, n); }
#include "kernel.hpp"
}  // namespace avx512
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif

}  // namespace

status attention_backward(const backward_args& a, const backward_config& cfg) {
  if (status st = check(a, cfg); !st.ok()) return st;
  const shape& s = a.dims;
  const job jb{a, tile_of(cfg.q_tile), tile_of(cfg.k_tile), a.scale ? *a.scale : default_scale(s.d)};
  auto* head = portable::one_kv_head;
#if defined(__x86_64__) || defined(_M_X64)
  const isa which = resolve_isa(cfg.simd);
  if (which == isa::avx512) head = avx512::one_kv_head;
  if (which == isa::avx2) head = avx2::one_kv_head;
#endif
  // Each (batch element, KV head) is independent: its dK, dV and its query
  // heads' dQ rows are its own, so the threads split them and the bits do
  // not depend on how many there are. Small problems run on the caller.
  const std::int64_t heads = s.b * s.hkv;
  const double work =
      static_cast<double>(s.b * s.hq) * static_cast<double>(s.lq) * static_cast<double>(s.lk) * static_cast<double>(s.d + s.dv);
  int threads = cfg.threads > 0 ? cfg.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = static_cast<int>(std::min<double>({static_cast<double>(threads), static_cast<double>(heads), work / 1e6 + 1}));
  // The mutant backward_dq_order_nondeterministic: dQ's sums in an order
  // that changes with every call, as a kernel that adds them with atomics.
  std::int64_t dq_rotation = 0;
  if (ATTNIMPL_MUTANT(backward_dq_order_nondeterministic)) {
    static std::atomic<std::int64_t> calls{0};
    dq_rotation = calls.fetch_add(1);
  }
  const auto run = [&](int t) {
    scratch w;
    w.dq_rotation = dq_rotation;
    for (std::int64_t x = t; x < heads; x += threads) head(jb, x / s.hkv, x % s.hkv, w);
  };
  if (threads <= 1) {
    run(0);
  } else {
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(run, t);
    run(0);
    for (auto& th : pool) th.join();
  }
  return status::success();
}

}  // namespace attnimpl
