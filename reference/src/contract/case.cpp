// The case type: enum names, docs/spec.md visibility, slot usage, fingerprint.
#include "attncheck/case.hpp"

#include "attncheck/enum_names.hpp"

#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <utility>

namespace attncheck {

namespace {

// Enum <-> name tables; the names are the one-line form's spelling.
constexpr name_table<value_kind, 13> value_names{{
    {value_kind::dyadic, "dyadic"},
    {value_kind::normal, "normal"},
    {value_kind::uniform, "uniform"},
    {value_kind::large_logits, "large_logits"},
    {value_kind::dominant, "dominant"},
    {value_kind::equal_keys, "equal_keys"},
    {value_kind::huge_v, "huge_v"},
    {value_kind::tiny_v, "tiny_v"},
    {value_kind::far_below, "far_below"},
    {value_kind::far_above, "far_above"},
    {value_kind::underflow_gaps, "underflow_gaps"},
    {value_kind::masked_lead, "masked_lead"},
    {value_kind::max_v, "max_v"},
}};
constexpr name_table<layout_kind, 3> layout_names{
    {{layout_kind::bshd, "bshd"}, {layout_kind::bhsd, "bhsd"}, {layout_kind::padded, "padded"}}};
constexpr name_table<poison_kind, 3> poison_names{
    {{poison_kind::none, "none"}, {poison_kind::nan, "nan"}, {poison_kind::big, "big"}}};
constexpr name_table<sink_kind, 6> sink_names{{{sink_kind::none, "none"},
                                               {sink_kind::normal, "normal"},
                                               {sink_kind::high, "high"},
                                               {sink_kind::low, "low"},
                                               {sink_kind::neginf, "neginf"},
                                               {sink_kind::mixed, "mixed"}}};
constexpr name_table<alibi_kind, 4> alibi_names{
    {{alibi_kind::none, "none"}, {alibi_kind::standard, "standard"}, {alibi_kind::random, "random"}, {alibi_kind::zero, "zero"}}};
constexpr name_table<bias_kind, 3> bias_names{
    {{bias_kind::normal, "normal"}, {bias_kind::masking, "masking"}, {bias_kind::huge, "huge"}}};
constexpr name_table<grad_kind, 3> grad_names{
    {{grad_kind::dyadic, "dyadic"}, {grad_kind::normal, "normal"}, {grad_kind::adversarial, "adversarial"}}};
constexpr name_table<page_order_kind, 3> page_order_names{
    {{page_order_kind::shuffled, "shuffled"}, {page_order_kind::in_order, "in_order"}, {page_order_kind::reversed, "reversed"}}};
constexpr name_table<table_tail_kind, 2> table_tail_names{
    {{table_tail_kind::stale, "stale"}, {table_tail_kind::invalid, "invalid"}}};
constexpr name_table<descale_granularity, 3> descale_granularity_names{
    {{descale_granularity::none, "none"}, {descale_granularity::tensor, "tensor"}, {descale_granularity::head, "head"}}};
constexpr name_table<descale_kind, 5> descale_kind_names{{{descale_kind::natural, "natural"},
                                                          {descale_kind::unit, "unit"},
                                                          {descale_kind::wide, "wide"},
                                                          {descale_kind::spread, "spread"},
                                                          {descale_kind::edges, "edges"}}};

// floor(a / b) for b > 0, also for negative a (positions before the first key).
std::int64_t floor_div(std::int64_t a, std::int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

}  // namespace

std::string_view name(value_kind k) { return name_in(value_names, k); }
std::optional<value_kind> parse_value_kind(std::string_view s) { return parse_in(value_names, s); }
std::string_view name(layout_kind k) { return name_in(layout_names, k); }
std::optional<layout_kind> parse_layout_kind(std::string_view s) { return parse_in(layout_names, s); }
std::string_view name(poison_kind k) { return name_in(poison_names, k); }
std::optional<poison_kind> parse_poison_kind(std::string_view s) { return parse_in(poison_names, s); }
std::string_view name(sink_kind k) { return name_in(sink_names, k); }
std::optional<sink_kind> parse_sink_kind(std::string_view s) { return parse_in(sink_names, s); }
std::string_view name(alibi_kind k) { return name_in(alibi_names, k); }
std::optional<alibi_kind> parse_alibi_kind(std::string_view s) { return parse_in(alibi_names, s); }
std::string_view name(bias_kind k) { return name_in(bias_names, k); }
std::optional<bias_kind> parse_bias_kind(std::string_view s) { return parse_in(bias_names, s); }
std::string_view name(page_order_kind k) { return name_in(page_order_names, k); }
std::optional<page_order_kind> parse_page_order_kind(std::string_view s) { return parse_in(page_order_names, s); }
std::string_view name(table_tail_kind k) { return name_in(table_tail_names, k); }
std::optional<table_tail_kind> parse_table_tail_kind(std::string_view s) { return parse_in(table_tail_names, s); }
std::string_view name(grad_kind k) { return name_in(grad_names, k); }
std::optional<grad_kind> parse_grad_kind(std::string_view s) { return parse_in(grad_names, s); }
std::string_view name(descale_granularity g) { return name_in(descale_granularity_names, g); }
std::optional<descale_granularity> parse_descale_granularity(std::string_view s) {
  return parse_in(descale_granularity_names, s);
}
std::string_view name(descale_kind k) { return name_in(descale_kind_names, k); }
std::optional<descale_kind> parse_descale_kind(std::string_view s) { return parse_in(descale_kind_names, s); }

std::int64_t attn_case::valid_keys(std::int64_t bi) const { return key_len.empty() ? lk : key_len[static_cast<std::size_t>(bi)]; }

float attn_case::effective_scale() const {
  if (scale) return *scale;
  // sqrt and / are correctly rounded in IEEE arithmetic, so this is the same
  // float everywhere (the double rounding to float is deterministic too).
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
}

bool attn_case::mask_allows(std::int64_t bi, std::int64_t h, std::int64_t i, std::int64_t j) const {
  if (!has_mask()) return true;
  const auto& s = mask_shape;
  // A size-1 mask dim broadcasts: every index reads its entry 0.
  const std::int64_t idx =
      (((s[0] == 1 ? 0 : bi) * s[1] + (s[1] == 1 ? 0 : h)) * s[2] + (s[2] == 1 ? 0 : i)) * s[3] + (s[3] == 1 ? 0 : j);
  return mask[static_cast<std::size_t>(idx)] != 0;
}

const char* attn_case::hidden_by(std::int64_t bi, std::int64_t h, std::int64_t i, std::int64_t j) const {
  const std::int64_t n = valid_keys(bi);
  if (j >= n) return "padded: past key_len";
  // Bottom-right: the last query sits on the last valid key.
  const std::int64_t pos = (n - lq) + i;
  if (causal && j > pos) return "causally hidden";
  const score_variants& w = variants;
  if (w.window_left >= 0 && j < pos - w.window_left) return "outside the window";  // both ends inclusive
  if (w.window_right >= 0 && j > pos + w.window_right) return "outside the window";
  if (w.chunk > 0 && floor_div(j, w.chunk) != floor_div(pos, w.chunk)) return "outside the chunk";
  if (!mask_allows(bi, h, i, j)) return "masked by the boolean mask";
  // A bias entry of -inf masks the key (torch's float attn_mask); before the bias is drawn, nothing.
  if (w.has_bias() && !w.bias.bits.empty() && bias_at(bi, h, i, j) == -std::numeric_limits<double>::infinity())
    return "masked by a -inf bias";
  return nullptr;
}

double attn_case::bias_at(std::int64_t bi, std::int64_t h, std::int64_t i, std::int64_t j) const {
  const score_variants& w = variants;
  if (!w.has_bias()) return 0;
  const auto& s = w.bias_shape;
  return w.bias.at(s[0] == 1 ? 0 : bi, s[1] == 1 ? 0 : h, s[2] == 1 ? 0 : i, s[3] == 1 ? 0 : j);
}

double attn_case::alibi_at(std::int64_t bi, std::int64_t h, std::int64_t i, std::int64_t j) const {
  if (!variants.has_alibi()) return 0;
  return static_cast<double>(variants.alibi_slopes[static_cast<std::size_t>(h)]) * static_cast<double>(j - position(bi, i));
}

double attn_case::sink_of(std::int64_t h) const {
  if (!variants.has_sinks()) return -std::numeric_limits<double>::infinity();
  return static_cast<double>(variants.sink_logits[static_cast<std::size_t>(h)]);
}

slot_usage used_slots(const attn_case& c) {
  slot_usage u;
  u.query_rows.assign(static_cast<std::size_t>(c.b * c.lq * c.hq), 0);
  u.keys.assign(static_cast<std::size_t>(c.b * c.lk * c.hkv), 0);
  for (std::int64_t bi = 0; bi < c.b; ++bi)
    for (std::int64_t h = 0; h < c.hq; ++h)
      for (std::int64_t i = 0; i < c.lq; ++i)
        for (std::int64_t j = 0; j < c.lk; ++j) {
          if (!c.visible(bi, h, i, j)) continue;
          u.query_rows[static_cast<std::size_t>((bi * c.lq + i) * c.hq + h)] = 1;
          u.keys[static_cast<std::size_t>((bi * c.lk + j) * c.hkv + c.kv_head(h))] = 1;
        }
  return u;
}

namespace {

struct fnv1a {
  std::uint64_t h = 0xcbf29ce484222325ull;
  void byte(unsigned char b) {
    h ^= b;
    h *= 0x100000001b3ull;
  }
  void u64(std::uint64_t v) {
    for (int s = 0; s < 64; s += 8) byte(static_cast<unsigned char>(v >> s));
  }
  void text(std::string_view s) {
    u64(s.size());
    for (char ch : s) byte(static_cast<unsigned char>(ch));
  }
  void tensor_(const tensor& t) {
    u64(static_cast<std::uint64_t>(t.type));
    for (int a = 0; a < 4; ++a) {
      u64(static_cast<std::uint64_t>(t.shape[a]));
      u64(static_cast<std::uint64_t>(t.stride[a]));
    }
    u64(static_cast<std::uint64_t>(t.offset));
    u64(t.bits.size());
    for (std::uint32_t b : t.bits) u64(b);
  }
};

}  // namespace

std::uint64_t fingerprint(const attn_case& c) {
  fnv1a f;
  f.text(to_line(c));
  f.u64(c.mask.size());
  for (std::uint8_t m : c.mask) f.byte(m);
  f.tensor_(c.q);
  f.tensor_(c.k);
  f.tensor_(c.v);
  if (c.variants.any()) {  // contract 1.0 cases keep their fingerprints
    const score_variants& w = c.variants;
    for (const std::vector<float>* v : {&w.sink_logits, &w.alibi_slopes}) {
      f.u64(v->size());
      for (float x : *v) f.u64(std::bit_cast<std::uint32_t>(x));
    }
    f.tensor_(w.bias);
  }
  return f.h;
}

}  // namespace attncheck
