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
#include <type_traits>
#include <vector>

#include "../convert.hpp"
#include "../engine.hpp"
#include "../isa_target.hpp"
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
  if (status st = check_variants(a.var, s.hq); !st.ok()) return st;
  if (a.var.sinks && !a.d_sinks) return status::invalid("d_sinks: must be set (hq entries) when var.sinks is set");
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

// Row (b, i)'s aligned position p = n[b] - lq + i (causal, window, chunk
// and ALiBi use it, as the forward does).
std::int64_t position(const backward_args& a, std::int64_t b, std::int64_t i) {
  return (a.key_len ? a.key_len[b] : a.dims.lk) - a.dims.lq + i;
}

// Row (b, i) may see keys [lo, hi): padding and causal (bottom-right aligned
// as the forward), a window and a chunk (contract 1.1); within the mask and
// the bias's finite entries (allowed). Empty: lo = hi = 0.
std::pair<std::int64_t, std::int64_t> key_range(const backward_args& a, std::int64_t b, std::int64_t i) {
  const std::int64_t n = a.key_len ? a.key_len[b] : a.dims.lk, pos = position(a, b, i);
  std::int64_t lo = 0, hi = n;
  if (a.causal && !ATTNIMPL_MUTANT(backward_causal_ignored))
    hi = std::clamp<std::int64_t>((ATTNIMPL_MUTANT(backward_causal_top_left) ? i : pos) + 1, 0, n);
  const variants& var = a.var;
  if (!ATTNIMPL_MUTANT(backward_window_ignored)) {
    if (var.window_left >= 0) lo = std::max(lo, pos - var.window_left);
    if (var.window_right >= 0) hi = std::min(hi, pos + var.window_right + 1);
  }
  if (var.chunk > 0) {
    const std::int64_t c = var.chunk;
    const std::int64_t start = (pos >= 0 ? pos / c : -((-pos + c - 1) / c)) * c;  // floor(pos / c) * c
    lo = std::max(lo, start);
    hi = std::min(hi, start + c);
  }
  if (hi <= lo) lo = hi = 0;
  return {lo, hi};
}

bool mask_allows(const backward_args& a, std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) {
  return !a.mask.data ||
         a.mask.data[b * a.mask.stride[0] + h * a.mask.stride[1] + i * a.mask.stride[2] + j * a.mask.stride[3]] != 0;
}

// Bias[b, h, i, j0 .. j0 + n - 1] as f32 into dst.
void load_bias(const backward_args& a, std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j0, std::int64_t n,
               float* dst) {
  const bias_in& t = a.var.bias;
  const std::int64_t off = b * t.stride[0] + h * t.stride[1] + i * t.stride[2] + j0 * t.stride[3];
  convert::load_row(dst, static_cast<const char*>(t.data) + off * convert::size_of(t.type), t.type, t.stride[3], n);
}

// The mask and the bias allow pair (b, h, i, j) (a -inf bias entry hides its key).
bool allowed(const backward_args& a, std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) {
  if (!mask_allows(a, b, h, i, j)) return false;
  if (!a.var.bias.data) return true;
  float x = 0.0f;
  load_bias(a, b, h, i, j, 1, &x);
  return x != -std::numeric_limits<float>::infinity();
}

// One call's constants.
struct job {
  const backward_args& a;
  std::int64_t bq, bk;
  float scale;
  bool ranges;       // a window or a chunk: a row's keys may start past 0
  bool pairwise;     // a mask or a bias: pairs within a row's range may be hidden
  bool terms;        // softcap, ALiBi or bias: the scores are more than scale q.k
  float* sink_part;  // with sinks: per (b, h), sum over i of P_sink D (f32, i order); null otherwise
};

// The f32 inputs and accumulators of one (batch element, KV head): its G
// query heads' rows (Q, dO, D, LSE, dQ), one key block's K and V (row-major
// and transposed), its dK and dV sums, and one query block's scores, dP, P
// and dS over the key block. Each worker thread owns one.
struct scratch {
  std::vector<float> q, d_o, dq, big_d, lse, o_row, part;
  std::vector<std::int64_t> limit, first, pos;  // each row's keys [first, limit), its aligned position
  std::vector<char> sees;
  std::vector<float> k, v, kt, vt, dk_blk, dv_blk;
  std::vector<float> s, dp, p, ds;
  std::vector<float> th, bias;  // the variants: tanh(x / c) of each pair (softcap), the bias's entries
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
void exp_n(const float* x, float* y, std::size_t n) { engine::portable::entry_points.exp_array(x, y, n); }
void tanh_n(const float* x, float* y, std::size_t n) { engine::portable::entry_points.tanh_array(x, y, n); }
#include "kernel.hpp"
}  // namespace portable

#if defined(__x86_64__) || defined(_M_X64)
ATTNIMPL_TARGET_BEGIN(ATTNIMPL_AVX2_FEATURES)
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
void exp_n(const float* x, float* y, std::size_t n) { engine::avx2::entry_points.exp_array(x, y, n); }
void tanh_n(const float* x, float* y, std::size_t n) { engine::avx2::entry_points.tanh_array(x, y, n); }
#include "kernel.hpp"
}  // namespace avx2
ATTNIMPL_TARGET_END
ATTNIMPL_TARGET_BEGIN(ATTNIMPL_AVX512_FEATURES)
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
void exp_n(const float* x, float* y, std::size_t n) { engine::avx512::entry_points.exp_array(x, y, n); }
void tanh_n(const float* x, float* y, std::size_t n) { engine::avx512::entry_points.tanh_array(x, y, n); }
#include "kernel.hpp"
}  // namespace avx512
ATTNIMPL_TARGET_END
#endif

}  // namespace

status attention_backward(const backward_args& a, const backward_config& cfg) {
  if (status st = check(a, cfg); !st.ok()) return st;
  const shape& s = a.dims;
  const variants& var = a.var;
  // With sinks: each (b, h)'s sum of P_sink D, written by the thread of its
  // KV head, then summed over b in b order below (the same bits at any thread count).
  std::vector<float> sink_part(var.sinks ? z(s.b * s.hq) : 0, 0.0f);
  const job jb{a,
               tile_of(cfg.q_tile),
               tile_of(cfg.k_tile),
               a.scale ? *a.scale : default_scale(s.d),
               var.window_left >= 0 || var.window_right >= 0 || var.chunk > 0,
               a.mask.data != nullptr || var.bias.data != nullptr,
               var.softcap > 0.0f || var.alibi != nullptr || var.bias.data != nullptr,
               var.sinks ? sink_part.data() : nullptr};
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
  // dL/dsinks[h] = -sum_b sum_i P_sink D (0 exactly for a sink of -inf: its P_sink is 0).
  if (var.sinks)
    for (std::int64_t h = 0; h < s.hq; ++h) {
      float total = 0.0f;
      for (std::int64_t b = 0; b < s.b; ++b) total += sink_part[z(b * s.hq + h)];
      a.d_sinks[h] = ATTNIMPL_MUTANT(backward_sink_grad_dropped) || var.sinks[h] == -std::numeric_limits<float>::infinity()
                         ? 0.0f
                         : 0.0f - total;
    }
  return status::success();
}

}  // namespace attnimpl
