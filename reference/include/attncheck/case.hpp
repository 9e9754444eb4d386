// The one case type: a whole attention problem (docs/spec.md), used by the
// reference, the subjects, the properties, the fuzzers, the CLI and case files.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "attncheck/dtype.hpp"
#include "attncheck/tensor.hpp"

namespace attncheck {

/// Bad input: names the field and the limit it broke. Every reader of
/// outside input (case files, one-line form, CLI, environment) throws this.
class input_error : public std::runtime_error {
 public:
  input_error(std::string field, const std::string& what) : std::runtime_error(field + ": " + what), field_(std::move(field)) {}
  const std::string& field() const { return field_; }

 private:
  std::string field_;
};

/// How materialize() draws tensor values from the seed. Ordered from the
/// simplest (what shrinking moves toward) to the most hostile.
enum class value_kind : std::uint8_t {
  dyadic,          ///< small exact values k/4 in [-2, 2]: products and sums exact
  normal,          ///< N(0, 1)
  uniform,         ///< U(-1, 1)
  large_logits,    ///< Q, K scaled so |scores| reach ~1e4 (f32) or the type's limit
  dominant,        ///< one key per row far above the others
  equal_keys,      ///< every key the same: weights uniform
  huge_v,          ///< |V| ~ 1e3..1e30 (clipped to the type)
  tiny_v,          ///< |V| near the smallest normal, subnormals included
  far_below,       ///< every score of a row near -C, C in 1e4..1e30 (f32/bf16) or up to 6e4 (f16): a shared offset far below 0
  far_above,       ///< every score of a row near +C: a shared offset far above 0
  underflow_gaps,  ///< gaps below the row maximum spread over [0, 120], across exp's underflow (~87 normal, ~104 subnormal)
  masked_lead,     ///< far_below scores, and a mask (when the case has one) that blanks the leading keys [0, 2^k), 2^k < Lk
  max_v,           ///< |V| in [M/2, M], M the largest value an f32 accumulator of Lk terms holds (type max for f16)
};
std::string_view name(value_kind k);
std::optional<value_kind> parse_value_kind(std::string_view s);

/// Memory layout of Q, K, V, O. Values never depend on it.
enum class layout_kind : std::uint8_t {
  bshd,    ///< dense (batch, seq, head, dim), the contract's own order
  bhsd,    ///< dense (batch, head, seq, dim): head-major, as in PyTorch SDPA
  padded,  ///< bshd with gaps between rows and heads and a nonzero offset
};
std::string_view name(layout_kind k);
std::optional<layout_kind> parse_layout_kind(std::string_view s);

/// What materialize() writes into slots that no visible pair uses.
enum class poison_kind : std::uint8_t { none, nan, big };  // big: +-1e30 (f32) / type max
std::string_view name(poison_kind k);
std::optional<poison_kind> parse_poison_kind(std::string_view s);

/// How materialize() draws the sink logits sigma_h (docs/spec.md "Attention sinks").
enum class sink_kind : std::uint8_t {
  none,    ///< no sink (sigma = -inf for every head, and the feature is off)
  normal,  ///< sigma_h ~ N(0, 4): comparable to the scores of unit-scale values
  high,    ///< sigma_h in [8, 64]: the sink dominates rows of ordinary scores
  low,     ///< sigma_h in [-64, -8]: the sink vanishes against ordinary scores
  neginf,  ///< sigma_h = -inf for every head: equals no sink
  mixed,   ///< each head draws one of normal, high, low, -inf
};
std::string_view name(sink_kind k);
std::optional<sink_kind> parse_sink_kind(std::string_view s);

/// How materialize() draws the ALiBi slopes m_h (docs/spec.md "ALiBi").
enum class alibi_kind : std::uint8_t {
  none,      ///< no ALiBi
  standard,  ///< the published family (Press et al.; BLOOM's rule for Hq not a power of two), positive slopes
  random,    ///< +-2^e, e uniform in [-10, 0]: both signs
  zero,      ///< every slope 0: equals no ALiBi
};
std::string_view name(alibi_kind k);
std::optional<alibi_kind> parse_alibi_kind(std::string_view s);

/// How materialize() draws the additive bias (docs/spec.md "Additive bias").
enum class bias_kind : std::uint8_t {
  normal,   ///< N(0, 1)
  masking,  ///< N(0, 1), with whole rows and columns of -inf and scattered -inf entries
  huge,     ///< +-2^e, e uniform in [10, 14] (1e3 .. 3e4): the bias dominates the scores
};
std::string_view name(bias_kind k);
std::optional<bias_kind> parse_bias_kind(std::string_view s);

/// How draw_grad_output() (attncheck/backward_oracle.hpp) draws dO from the
/// case's seed: the recipe of a backward case's output gradient.
enum class grad_kind : std::uint8_t {
  dyadic,       ///< small exact values k/4 in [-2, 2]
  normal,       ///< N(0, 1)
  adversarial,  ///< per row, one of: binades 2^-24..2^24, zero, near the smallest normal, alternating signs, near the type's max / (8 max(Dv, Lk))
};
std::string_view name(grad_kind k);
std::optional<grad_kind> parse_grad_kind(std::string_view s);

/// The optional score variants of contract 1.1 (docs/spec.md "Variants").
/// Every field at its default is off, and a case with all of them off is a
/// contract 1.0 case. Order of operations, per visible pair:
///   s = softcap(scale * q.k) + alibi + bias, then the masks, then the softmax with the sink.
struct score_variants {
  /// Sliding window around the aligned position p = n[b] - Lq + i: key j is
  /// visible only if p - window_left <= j <= p + window_right; -1 leaves that side unbounded.
  std::int64_t window_left = -1, window_right = -1;
  /// Chunked local attention: key j is visible only if floor(j / chunk) == floor(p / chunk); 0: off.
  std::int64_t chunk = 0;
  /// Logit softcap c > 0: the scaled score x becomes c * tanh(x / c); 0: off.
  float softcap = 0;
  /// Recipes (part of the one-line form); the values below are drawn from them.
  sink_kind sinks = sink_kind::none;
  alibi_kind alibi = alibi_kind::none;
  /// With alibi = standard: the rule's max_bias m, heads 0..n-1 getting
  /// 2^(-m (h+1) / n) (ggml's m0/m1 rule); 8 is the published family.
  float alibi_max_bias = 8;
  /// Bias broadcast shape over (B, Hq, Lq, Lk), each dim 1 or full; all zero: no bias.
  std::array<std::int64_t, 4> bias_shape{};
  dtype bias_type = dtype::f32;
  bias_kind bias_values = bias_kind::normal;

  /// Values: Hq sink logits (f32, -inf allowed), Hq ALiBi slopes (f32, finite),
  /// and the bias, dense row-major over bias_shape in bias_type (-inf masks the key).
  std::vector<float> sink_logits;
  std::vector<float> alibi_slopes;
  tensor bias;

  bool has_window() const { return window_left >= 0 || window_right >= 0; }
  bool has_chunk() const { return chunk > 0; }
  bool has_softcap() const { return softcap != 0; }
  bool has_sinks() const { return sinks != sink_kind::none; }
  bool has_alibi() const { return alibi != alibi_kind::none; }
  bool has_bias() const { return bias_shape[0] != 0; }
  /// True when any variant is on: the case needs contract 1.1.
  bool any() const { return has_window() || has_chunk() || has_softcap() || has_sinks() || has_alibi() || has_bias(); }
};

/// Where the paged form puts the logical pages in the arena (docs/spec.md "Paged KV").
enum class page_order_kind : std::uint8_t {
  shuffled,  ///< a permutation drawn from the case's seed
  in_order,  ///< logical page k at physical page k (the order a kernel must not depend on)
  reversed,  ///< logical page k at physical page num_pages - 1 - k
};
std::string_view name(page_order_kind k);
std::optional<page_order_kind> parse_page_order_kind(std::string_view s);

/// What the paged form writes into a block table's unspecified entries (past ceil(n[b] / P)).
enum class table_tail_kind : std::uint8_t {
  stale,    ///< page numbers of other sequences' live pages and of spare pages: real, finite data
  invalid,  ///< -1, num_pages, INT32_MAX, INT32_MIN and other numbers out of [0, num_pages)
};
std::string_view name(table_tail_kind k);
std::optional<table_tail_kind> parse_table_tail_kind(std::string_view s);

/// Contract 1.2's input forms (docs/spec.md "Paged KV", "Ragged batches"): how
/// a problem is handed to a subject, never what its answer is. All defaults:
/// the dense form. The host builds the arena, the table and the packed
/// tensors from these fields and the case's seed, so the one-line form replays them.
struct input_form {
  /// Paged K/V: page size P in [1, max_page_size]; 0: K and V dense.
  std::int64_t page_size = 0;
  page_order_kind page_order = page_order_kind::shuffled;
  /// Unused pages in the arena, and unspecified entries appended to every table row.
  std::int64_t spare_pages = 0;
  table_tail_kind table_tail = table_tail_kind::stale;
  /// The first shared_pages pages of every sequence are one set of pages
  /// (a shared prefix): materialize() draws keys [0, shared_pages * P) of
  /// every batch element equal to batch element 0's.
  std::int64_t shared_pages = 0;
  /// Ragged (packed) Q and O, and K and V unless paged.
  bool ragged = false;
  /// Ragged: queries of each sequence in [0, Lq], the last q_len[b] rows of
  /// batch element b; empty: Lq each.
  std::vector<std::int64_t> q_len;

  bool paged() const { return page_size > 0; }
  bool dense() const { return !paged() && !ragged; }
};
/// How the descales of an fp8 tensor are shared (docs/spec.md "fp8
/// storage"); the values are the ABI's ATTNCHECK_DESCALE_* (block and token
/// granularities are designed in docs/abi.md, not built).
enum class descale_granularity : std::uint8_t {
  none,    ///< no descale: the stored value is the value
  tensor,  ///< one descale for the whole tensor
  head,    ///< one per (batch, head): Q's per query head, K's and V's per KV head
};
std::string_view name(descale_granularity g);
std::optional<descale_granularity> parse_descale_granularity(std::string_view s);

/// How materialize() draws the descales of the fp8 tensors: the values are
/// first drawn as the recipe says (values=...), then divided by their
/// group's descale and rounded to the fp8 type (saturating at its largest
/// value: quantizing is the caller's business).
enum class descale_kind : std::uint8_t {
  natural,  ///< s = absmax / the format's largest value per group, rounded up to f32: the values span the format
  unit,     ///< s = 1: the values as the format holds them (small ones flush to zero, large ones saturate)
  wide,     ///< s = 2^e, e uniform in [-20, 20] per group: the values span the format times a far power of two
  spread,   ///< natural times 2^e, e uniform in [-12, 12] per group: heads' descales differ by orders of magnitude
  edges,    ///< natural, and a quarter of the values moved to the format's edges (its largest, smallest normal, subnormals)
};
std::string_view name(descale_kind k);
std::optional<descale_kind> parse_descale_kind(std::string_view s);

/// fp8 storage of Q, K and V with descales (docs/spec.md "fp8 storage"): a
/// stored value x with descale s means x * s exactly (in double: a 4-bit
/// significand times an f32's 24). The case's own type is then O's (and
/// that of any input not in fp8). All defaults: no fp8.
struct quantization {
  /// Storage of each input: e4m3 or e5m2, or nullopt for the case's type.
  std::optional<dtype> q_type, k_type, v_type;
  /// Each fp8 tensor's descale granularity (none for a tensor not in fp8).
  descale_granularity q_scale = descale_granularity::none, k_scale = descale_granularity::none,
                      v_scale = descale_granularity::none;
  descale_kind descales = descale_kind::natural;
  /// The descales, drawn from the recipe: f32, finite and positive. Tensor:
  /// one; head: (B, Hq) for Q, (B, Hkv) for K and V, row-major; none: empty.
  std::vector<float> q_descale, k_descale, v_descale;
  bool any() const { return q_type || k_type || v_type; }
  /// True when some input is stored in t.
  bool holds(dtype t) const { return q_type == t || k_type == t || v_type == t; }
};

/// Limits of the input forms; the host checks that they equal subject.h's
/// ATTNCHECK_MAX_PAGE_SIZE and ATTNCHECK_MAX_RAGGED_SEQUENCES.
inline constexpr std::int64_t max_page_size = 512;
inline constexpr std::int64_t max_ragged_sequences = 4096;
inline constexpr std::int64_t max_spare_pages = 1 << 16;

/// Limits that keep a hostile case from exhausting memory or time.
struct case_limits {
  std::int64_t max_dim = 1 << 20;          ///< any single size
  std::int64_t max_elements = 64ll << 20;  ///< elements of Q, K, V, O or the mask each
  std::int64_t max_bytes = 1ll << 30;      ///< all buffers of the case together
  /// Score entries B*Hq*Lq*Lk: the oracle's work and the size of its P.
  std::int64_t max_pairs = 1ll << 28;
};

/// One attention problem. Shapes follow docs/spec.md:
/// Q[b,i,h,d] (B,Lq,Hq,D), K[b,j,g,d] (B,Lk,Hkv,D), V[b,j,g,e] (B,Lk,Hkv,Dv),
/// O[b,i,h,e] (B,Lq,Hq,Dv), LSE[b,h,i].
struct attn_case {
  // Shapes: each in [1, case_limits::max_dim]. Lk >= 1 too: an empty cache is key_len[b] = 0.
  std::int64_t b = 1, hq = 1, hkv = 1, lq = 1, lk = 1, d = 1, dv = 1;
  /// Softmax scale as the subject receives it; nullopt means 1/sqrt(D) rounded to f32.
  std::optional<float> scale;
  /// Bottom-right causal mask aligned to the valid keys (docs/spec.md).
  bool causal = false;
  /// Key padding: valid key count per batch element, each in [0, lk]. Empty: all lk valid.
  std::vector<std::int64_t> key_len;
  /// Boolean allowed-mask, broadcast to (B, Hq, Lq, Lk): each dim 1 or full.
  /// mask_shape all zero means no mask. Row-major over mask_shape, 1 = allowed.
  std::array<std::int64_t, 4> mask_shape{};
  std::vector<std::uint8_t> mask;
  /// Storage type of O, and of Q, K and V unless quant gives them an fp8 type.
  dtype type = dtype::f32;
  /// Contract 1.1 variants (window, chunk, softcap, sinks, ALiBi, bias); all off by default.
  score_variants variants;
  /// Contract 1.2 input forms (paged K/V, ragged batches); dense by default.
  input_form form;
  /// fp8 storage of Q, K and V with descales; none by default.
  quantization quant;

  /// Recipe: how the tensors were (or are to be) drawn. Part of the one-line form.
  value_kind values = value_kind::normal;
  layout_kind layout = layout_kind::bshd;
  poison_kind poison = poison_kind::none;
  std::uint64_t seed = 0;
  /// Backward cases: the recipe of dO (draw_grad_output draws it from seed);
  /// nullopt for a forward case. Part of the one-line form (grad=...).
  std::optional<grad_kind> grad;

  /// Inputs; empty until materialize() or a case file fills them.
  tensor q, k, v;

  bool has_mask() const { return mask_shape[0] != 0; }
  bool has_padding() const { return !key_len.empty(); }
  std::int64_t group() const { return hq / hkv; }
  /// Ragged form: the queries of sequence bi (q_len[bi], or Lq); Lq for every other form.
  std::int64_t queries(std::int64_t bi) const {
    return form.ragged && !form.q_len.empty() ? form.q_len[static_cast<std::size_t>(bi)] : lq;
  }
  /// True when dense row i of batch element bi is part of the problem: every
  /// row, except in the ragged form the rows above a sequence's last q_len[bi].
  bool row_in_problem(std::int64_t bi, std::int64_t i) const { return i >= lq - queries(bi); }
  /// KV head of query head h: h / G (docs/spec.md head mapping).
  std::int64_t kv_head(std::int64_t h) const { return h / group(); }
  /// Storage types of the inputs: quant's fp8 type, or the case's type.
  dtype q_type() const { return quant.q_type.value_or(type); }
  dtype k_type() const { return quant.k_type.value_or(type); }
  dtype v_type() const { return quant.v_type.value_or(type); }
  /// The descale of Q's row (bi, h), of K's and V's KV head g in batch
  /// element bi: 1 without one.
  double q_descale_of(std::int64_t bi, std::int64_t h) const { return descale_in(quant.q_descale, quant.q_scale, bi * hq + h); }
  double k_descale_of(std::int64_t bi, std::int64_t g) const { return descale_in(quant.k_descale, quant.k_scale, bi * hkv + g); }
  double v_descale_of(std::int64_t bi, std::int64_t g) const { return descale_in(quant.v_descale, quant.v_scale, bi * hkv + g); }
  /// The exact values of the inputs: the stored value times its descale
  /// (exact in double). Every oracle and law reads inputs through these.
  double q_value(std::int64_t bi, std::int64_t i, std::int64_t h, std::int64_t x) const {
    return q.at(bi, i, h, x) * q_descale_of(bi, h);
  }
  double k_value(std::int64_t bi, std::int64_t j, std::int64_t g, std::int64_t x) const {
    return k.at(bi, j, g, x) * k_descale_of(bi, g);
  }
  double v_value(std::int64_t bi, std::int64_t j, std::int64_t g, std::int64_t e) const {
    return v.at(bi, j, g, e) * v_descale_of(bi, g);
  }
  /// Valid keys of batch element bi: key_len[bi], or lk without padding.
  std::int64_t valid_keys(std::int64_t bi) const;
  /// scale, or float(1.0 / sqrt(double(D))) when unset (IEEE ops only: portable).
  float effective_scale() const;
  /// The aligned position p = n[b] - Lq + i of query row i (causal, window and chunk use it).
  std::int64_t position(std::int64_t bi, std::int64_t i) const { return valid_keys(bi) - lq + i; }
  /// The docs/spec.md visibility M[b,h,i,j]: padding AND causal AND boolean mask
  /// AND window AND chunk AND a bias entry that is not -inf (once the bias is drawn).
  /// Indices within (B, Hq, Lq, Lk); the header must be valid.
  bool visible(std::int64_t bi, std::int64_t h, std::int64_t i, std::int64_t j) const {
    return hidden_by(bi, h, i, j) == nullptr;
  }
  /// Why key j is not visible to row i of head h, in words for a message
  /// ("padded: past key_len", "causally hidden", "outside the window",
  /// "outside the chunk", "masked by the boolean mask", "masked by a -inf
  /// bias"); nullptr when it is visible. The first rule that hides it, in
  /// visible()'s order.
  const char* hidden_by(std::int64_t bi, std::int64_t h, std::int64_t i, std::int64_t j) const;
  /// The bias at (b, h, i, j), broadcast over size-1 dims; 0 without a bias.
  double bias_at(std::int64_t bi, std::int64_t h, std::int64_t i, std::int64_t j) const;
  /// ALiBi's term m_h * (j - p) in exact arithmetic (double holds it: |j - p| < 2^21); 0 without ALiBi.
  double alibi_at(std::int64_t bi, std::int64_t h, std::int64_t i, std::int64_t j) const;
  /// Sink logit of query head h; -inf without sinks.
  double sink_of(std::int64_t h) const;
  /// The boolean mask alone at (b, h, i, j), broadcast over size-1 dims; true without a mask.
  bool mask_allows(std::int64_t bi, std::int64_t h, std::int64_t i, std::int64_t j) const;

 private:
  static double descale_in(const std::vector<float>& d, descale_granularity g, std::int64_t group) {
    if (g == descale_granularity::none || d.empty()) return 1.0;
    return static_cast<double>(d[g == descale_granularity::tensor ? 0 : static_cast<std::size_t>(group)]);
  }
};

/// One input's fp8 fields (docs/spec.md "fp8 storage"): the one table by
/// which every layer walks Q, K and V alike (the line form, case files,
/// validation, materialize, the laws, the stats, Python).
struct fp8_input {
  const char* name;         ///< "Q", "K", "V"
  const char* type_key;     ///< its storage type's key in the line form and case files: "qtype"
  const char* scale_key;    ///< its granularity's key: "qdescale"
  const char* descale_key;  ///< its descales' field (case files, validation, Python): "q_descale"
  tensor attn_case::*values;
  std::optional<dtype> quantization::*type;
  descale_granularity quantization::*scale;
  std::vector<float> quantization::*descale;
  bool query;  ///< Q: a descale per query head; K and V: per KV head
};
inline constexpr fp8_input fp8_inputs[] = {
    {"Q", "qtype", "qdescale", "q_descale", &attn_case::q, &quantization::q_type, &quantization::q_scale,
     &quantization::q_descale, true},
    {"K", "ktype", "kdescale", "k_descale", &attn_case::k, &quantization::k_type, &quantization::k_scale,
     &quantization::k_descale, false},
    {"V", "vtype", "vdescale", "v_descale", &attn_case::v, &quantization::v_type, &quantization::v_scale,
     &quantization::v_descale, false},
};
/// The descales granularity g needs for an input (query: Q's): 1 per
/// tensor, B times the heads per head, none without one.
inline std::int64_t descale_count(const attn_case& c, descale_granularity g, bool query) {
  if (g == descale_granularity::tensor) return 1;
  return g == descale_granularity::head ? c.b * (query ? c.hq : c.hkv) : 0;
}

/// Checks every field; throws input_error naming the field and the limit
/// (Hq % Hkv != 0, sizes < 1 or over the limits, products that overflow,
/// key_len count or range, mask shape not broadcastable or wrong length,
/// tensors of the wrong shape, type or storage length, views out of bounds).
/// With tensors_required false, a header without tensors is accepted.
void validate(const attn_case& c, bool tensors_required = true, const case_limits& limits = {});

/// Fills q, k, v (and the mask contents when mask_shape is set) from the
/// recipe (values, layout, poison, seed) deterministically: the same header
/// gives the same bits on every machine. Validates the header first.
void materialize(attn_case& c, const case_limits& limits = {});

/// The one-line form, e.g.
/// ATTN(b=2,hq=6,hkv=2,lq=1,lk=3,d=3,dv=5,causal,kpad=[3,1],mask=2x1x1x3,f16,values=dyadic,layout=bhsd,poison=nan,seed=42)
/// Shape fields and the dtype always print; other fields at their defaults are
/// left out; scale prints only when set (shortest round-trip). Mask contents and
/// tensors are not part of the line: materialize() redraws them from the seed.
std::string to_line(const attn_case& c);

/// Parses the one-line form back into a header (tensors empty; call
/// materialize to fill them). Throws input_error on anything malformed.
attn_case parse_line(std::string_view line, const case_limits& limits = {});

/// Shape of O: (B, Lq, Hq, Dv).
inline dims4 output_shape(const attn_case& c) { return {c.b, c.lq, c.hq, c.dv}; }

/// Allocates O (all +0) in the case's layout, so strided output is exercised too.
/// In the padded layout the gaps hold gap_sentinel(type), so a write outside
/// the view shows.
tensor make_output(const attn_case& c);

/// Allocates a tensor of the given shape in a layout: view elements +0, gaps
/// (padded layout only) gap_sentinel(t). Shape entries >= 1.
tensor make_tensor(dtype t, dims4 shape, layout_kind layout);

/// The quiet NaN with a recognizable payload that fills layout gaps:
/// 0x7fc0a5a5 (f32), 0x7ea5 (f16), 0x7fe5 (bf16), 0x7f (e4m3: its one NaN), 0x7e (e5m2).
std::uint32_t gap_sentinel(dtype t);

/// Which input slots some visible pair (b, h, i, j) uses; every other slot may
/// hold anything (docs/spec.md "Masked means ignored").
struct slot_usage {
  std::vector<std::uint8_t> query_rows;  ///< (B, Lq, Hq) row-major: row i of head h sees a key
  std::vector<std::uint8_t> keys;        ///< (B, Lk, Hkv) row-major: key j of KV head g is seen
  bool query_row(const attn_case& c, std::int64_t bi, std::int64_t i, std::int64_t h) const {
    return query_rows[static_cast<std::size_t>((bi * c.lq + i) * c.hq + h)] != 0;
  }
  bool key(const attn_case& c, std::int64_t bi, std::int64_t j, std::int64_t g) const {
    return keys[static_cast<std::size_t>((bi * c.lk + j) * c.hkv + g)] != 0;
  }
};
/// Computes slot usage from visible(); costs B*Hq*Lq*Lk. The header must be valid.
slot_usage used_slots(const attn_case& c);

/// A 64-bit FNV-1a hash of the one-line form, the mask and every tensor (shape,
/// stride, offset, storage bits): equal cases give equal fingerprints.
std::uint64_t fingerprint(const attn_case& c);

}  // namespace attncheck
