// attnimpl: a fast, deterministic CPU attention kernel (FlashAttention-2 style).
// Standalone: depends on nothing of attncheck. The contract it follows is
// docs/spec.md (shapes, bottom-right causal, padding, allowed-mask, masked rows).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace attnimpl {

/// Storage type of Q, K, V and O. Compute is always f32; LSE is always f32.
enum class dtype : std::uint8_t { f32, f16, bf16 };

enum class status_code : std::uint8_t { ok, invalid_argument };

/// Result of every entry point: bad arguments are reported, never crashed on.
struct status {
  status_code code = status_code::ok;
  std::string message;  ///< names the argument and the rule it broke
  bool ok() const { return code == status_code::ok; }
  static status success() { return {}; }
  static status invalid(std::string what) { return {status_code::invalid_argument, std::move(what)}; }
};

/// Element strides of a (batch, seq, head, dim) tensor. Any value, 0 included
/// (a zero stride broadcasts an input; outputs must not alias).
using strides4 = std::array<std::int64_t, 4>;

/// Read-only strided tensor: element (b, s, h, d) lives at data + b*s0 + s*s1 + h*s2 + d*s3.
struct tensor_in {
  const void* data = nullptr;
  dtype type = dtype::f32;
  strides4 stride{};
};

/// Writable strided tensor, same addressing as tensor_in.
struct tensor_out {
  void* data = nullptr;
  dtype type = dtype::f32;
  strides4 stride{};
};

/// Optional log-sum-exp output LSE[b, h, i] (f32); data == nullptr: not wanted.
struct lse_out {
  float* data = nullptr;
  std::array<std::int64_t, 3> stride{};  ///< over (b, h, i)
};

/// Optional boolean allowed-mask over (b, h, i, j): nonzero = the key MAY be
/// attended (PyTorch SDPA convention). A zero stride broadcasts that axis.
struct mask_in {
  const std::uint8_t* data = nullptr;
  strides4 stride{};  ///< over (b, h, i, j)
};

/// Optional additive bias Bias[b, h, i, j] (contract 1.1): its own storage
/// type, any element strides over (b, h, i, j), 0 broadcasting an axis; h is
/// the query head, i the query index (0 .. lq - 1), j the key. An entry of
/// -inf masks its key exactly as a false mask entry; +inf and NaN are not
/// legal entries (not checked: the kernel does not scan the tensor).
struct bias_in {
  const void* data = nullptr;  ///< null: no bias
  dtype type = dtype::f32;
  strides4 stride{};
};

/// The score variants of contract 1.1 (docs/spec.md "Variants"), every one
/// off by default. With p = n[b] - lq + i the aligned position of query i and
/// x = scale * q.k:
///   S = softcap(x) + alibi[h] * (j - p) + Bias[b, h, i, j]
/// then the masks (padding, causal, mask, window, chunk, Bias != -inf), then
/// the softmax with the sink in the denominator:
///   O = sum_j exp(S_j) V_j / (exp(sinks[h]) + sum_j exp(S_j)).
/// A row with no visible key gives O = 0 and LSE = sinks[h] (-inf without sinks).
struct variants {
  std::int64_t window_left = -1;   ///< key j visible only if j >= p - window_left; -1: unbounded
  std::int64_t window_right = -1;  ///< key j visible only if j <= p + window_right; -1: unbounded
  std::int64_t chunk = 0;          ///< C >= 1: visible only if floor(j / C) == floor(p / C); 0: off
  float softcap = 0.0f;            ///< c > 0 (finite): x becomes c * tanh(x / c); 0: off
  const float* alibi = nullptr;    ///< hq finite slopes m_h (query head h); null: off
  bias_in bias;                    ///< optional additive bias
  const float* sinks = nullptr;    ///< hq sink logits sigma_h (-inf: none; NaN, +inf invalid); null: off

  bool any() const { return window_left >= 0 || window_right >= 0 || chunk > 0 || softcap > 0.0f || alibi || bias.data || sinks; }
};

/// Problem sizes (docs/spec.md): Q (b, lq, hq, d), K (b, lk, hkv, d), V (b, lk, hkv, dv),
/// O (b, lq, hq, dv). hq % hkv == 0; query head h uses KV head h / (hq / hkv).
struct shape {
  std::int64_t b = 1, hq = 1, hkv = 1, lq = 1, lk = 1, d = 1, dv = 1;
};

/// The kernel's instruction set. It is built three times: for AVX-512
/// (F+BW+VL, with AVX2+FMA+F16C), for AVX2+FMA+F16C and in portable C++ (any
/// CPU). All compute the same bits (tests/impl/isa_test.cpp), so the choice
/// changes speed only. automatic: AVX-512 where the CPU has it (and the OS
/// saves its registers), else AVX2 likewise, else portable. The kernel reads
/// no environment variable (the suite's builtin subject takes ATTNIMPL_ISA).
enum class isa : std::uint8_t { automatic, avx2, portable, avx512 };

/// Tuning knobs. Results are bit-for-bit the same for every `threads`;
/// they may differ (within the bound of docs/bound.md) between different k_tile/split_keys.
struct config {
  int threads = 0;              ///< worker threads, caller included; 0: hardware concurrency
  std::int64_t q_tile = 0;      ///< query positions per work unit (rows = G * q_tile); 0: see q_tile_for()
  std::int64_t k_tile = 0;      ///< keys per online-softmax block, blocks start at key 0; 0: default
  std::int64_t split_keys = 0;  ///< keys per split-KV chunk, rounded up to a multiple of k_tile; 0: default
  isa simd = isa::automatic;    ///< instruction set; avx2/avx512 where the CPU lacks it is an invalid_argument
};

/// One attention call. key_len (b entries, each in [0, lk]) is the per-batch
/// valid key count n[b]; causal is bottom-right aligned to n[b]:
/// query i sits at pos = n[b] - lq + i and sees key j iff j <= pos.
struct attention_args {
  shape dims;
  tensor_in q, k, v;
  tensor_out o;
  lse_out lse;                 ///< optional
  std::optional<float> scale;  ///< nullopt: default_scale(d)
  bool causal = false;
  const std::int64_t* key_len = nullptr;  ///< optional, b entries
  mask_in mask;                           ///< optional
  variants var;                           ///< optional (contract 1.1), all off by default
};

/// Computes O (and LSE) per docs/spec.md. Fully masked rows give O = 0, LSE = -inf.
/// Returns invalid_argument (and writes nothing) for bad shapes, null
/// pointers, hq % hkv != 0, key_len out of range, a bad variants field
/// (named in the message) or a bad config.
status attention(const attention_args& args, const config& cfg = {});

/// False only for isa::avx2 on a CPU without AVX2, FMA and F16C, and for
/// isa::avx512 on one without those and AVX-512 F, BW and VL.
bool isa_supported(isa which);

/// The instruction set `requested` runs on (automatic resolved as above;
/// other values returned as they are, supported or not).
isa resolve_isa(isa requested);

/// "auto", "avx2", "portable", "avx512".
const char* isa_name(isa which);

/// The inverse of isa_name ("" is auto); nullopt for anything else.
std::optional<isa> parse_isa(std::string_view name);

/// invalid_argument naming the field when `requested` asks for an
/// instruction set this CPU lacks.
status check_isa(isa requested);

/// 1/sqrt(d) rounded once to f32, the contract's default scale.
float default_scale(std::int64_t d);

/// The config with every 0 replaced by the value the kernel uses.
config resolve(const config& cfg);

/// Query positions per work unit for these sizes: cfg.q_tile if set, else
/// about 512 rows (max(1, 512 / G) positions), halved down to about 128 rows
/// while that leaves fewer than 8 units per thread. Never changes a bit of
/// the result: a row's arithmetic does not depend on the rows it shares a
/// unit with.
std::int64_t q_tile_for(const shape& s, const config& cfg);

/// Declared accuracy of the kernel's exp (c_exp of the bound of docs/bound.md), in ulps of
/// the f32 result (ulp of a subnormal result: 2^-149). Measured in tests/impl.
double exp_ulps();

/// Declared accuracy of the kernel's tanh (softcap; c_t of docs/bound.md), in
/// ulps of the f32 result. Measured in tests/impl/tanh_accuracy_test.cpp.
double tanh_ulps();

/// nb of the bound of docs/bound.md for rows over lk keys: online-softmax blocks
/// ceil(lk / k_tile) plus split-KV merges ceil(lk / split_keys) - 1.
std::int64_t key_blocks(std::int64_t lk, const config& cfg = {});

/// nb with variants: the above plus 1 when sinks are set (the sink is merged
/// after the keys, one more merge). Windows and chunks only skip blocks, so
/// the count over lk stays an upper bound.
std::int64_t key_blocks(std::int64_t lk, const config& cfg, const variants& var);

/// invalid_argument naming the field when var breaks a rule of `variants`
/// (hq: the length of alibi and sinks).
status check_variants(const variants& var, std::int64_t hq);

}  // namespace attnimpl
