// The table of contract features (attncheck/features.hpp): each feature's
// ABI bit, names, one-line fields and their checks, in one entry.
#include "attncheck/features.hpp"

#include <cmath>
#include <limits>
#include <utility>

#include "attncheck/subject.h"
#include "line_parse.hpp"

namespace attncheck {

namespace {

using detail::fail;
using detail::parse_enum;
using detail::quoted;

std::string str(std::int64_t v) { return std::to_string(v); }

void need_value(std::string_view key, bool flag) {
  if (flag) fail(std::string(key), "needs a value (" + std::string(key) + "=...)");
}

void need_flag(std::string_view key, bool flag) {
  if (!flag) fail(std::string(key), "is a flag, write just '" + std::string(key) + "'");
}

std::string bracket_dims(const dims4& d) { return "[" + str(d[0]) + "," + str(d[1]) + "," + str(d[2]) + "," + str(d[3]) + "]"; }

// Sink logits and ALiBi slopes: one per query head when the feature is on, none when off.
void check_per_head(const attn_case& c, const char* field, const std::vector<float>& v, bool on, bool neginf_allowed,
                    bool tensors_required) {
  if (!on) {
    if (!v.empty()) fail(field, "has " + std::to_string(v.size()) + " values but the feature is off");
    return;
  }
  if (v.empty() && !tensors_required) return;
  if (static_cast<std::int64_t>(v.size()) != c.hq)
    fail(field, "has " + std::to_string(v.size()) + " values, hq=" + str(c.hq) + " needs one per query head");
  for (std::size_t h = 0; h < v.size(); ++h) {
    const bool ok = std::isfinite(v[h]) || (neginf_allowed && v[h] == -std::numeric_limits<float>::infinity());
    if (!ok)
      fail(std::string(field) + "[" + std::to_string(h) + "]",
           std::string("must be finite") + (neginf_allowed ? " or -inf" : "") + ", got " + std::to_string(v[h]));
  }
}

contract_feature entry(std::string name, feature_kind kind, int abi_word, std::uint32_t bit) {
  contract_feature f;
  f.name = std::move(name);
  f.kind = kind;
  f.abi_word = abi_word;
  f.bit = bit;
  return f;
}

contract_feature causal() {
  contract_feature f = entry("causal", feature_kind::mask, 1, ATTNCHECK_FEATURE_CAUSAL);
  f.label = "causal mask";
  f.cannot_take = "no causal mask";
  f.keys = {"causal"};
  f.present = [](const attn_case& c) { return c.causal; };
  f.clear = [](attn_case& c) { c.causal = false; };
  f.write = [](const attn_case& c, std::string& s) {
    if (c.causal) s += ",causal";
  };
  f.read = [](std::string_view key, std::string_view, bool flag, attn_case& c, const case_limits&) {
    need_flag(key, flag);
    c.causal = true;
  };
  return f;
}

contract_feature padding() {
  contract_feature f = entry("padding", feature_kind::mask, 1, ATTNCHECK_FEATURE_PADDING);
  f.label = "key padding";
  f.cannot_take = "no key padding";
  f.keys = {"kpad"};
  f.present = [](const attn_case& c) { return c.has_padding(); };
  f.clear = [](attn_case& c) { c.key_len.clear(); };
  f.write = [](const attn_case& c, std::string& s) {
    if (c.has_padding()) s += ",kpad=" + detail::list_text(c.key_len);
  };
  f.read = [](std::string_view key, std::string_view val, bool flag, attn_case& c, const case_limits& limits) {
    need_value(key, flag);
    c.key_len = detail::parse_list("kpad", val, "[n0,n1,...]", limits);
  };
  return f;
}

contract_feature mask() {
  contract_feature f = entry("mask", feature_kind::mask, 1, ATTNCHECK_FEATURE_MASK);
  f.label = "boolean mask";
  f.cannot_take = "no boolean mask";
  f.keys = {"mask"};
  f.present = [](const attn_case& c) { return c.has_mask(); };
  f.clear = [](attn_case& c) { c.mask_shape = {}, c.mask.clear(); };
  f.write = [](const attn_case& c, std::string& s) {
    if (c.has_mask()) s += ",mask=" + detail::dims_text(c.mask_shape);
  };
  f.read = [](std::string_view key, std::string_view val, bool flag, attn_case& c, const case_limits&) {
    need_value(key, flag);
    c.mask_shape = detail::parse_dims("mask", val);
  };
  return f;
}

contract_feature output(std::string name, std::uint32_t bit, std::string label, bool python_declarable) {
  contract_feature f = entry(std::move(name), feature_kind::output, 1, bit);
  f.label = std::move(label);
  f.cannot_take = "no " + f.label;
  f.python_declarable = python_declarable;
  return f;
}

contract_feature variant(std::string name, std::uint32_t bit, std::string label, std::string cannot_take, double share) {
  contract_feature f = entry(name, feature_kind::variant, 3, bit);
  f.label = std::move(label);
  f.cannot_take = std::move(cannot_take);
  f.keys = {name};
  f.share = share;
  f.python_keywords = {name};
  return f;
}

contract_feature window() {
  contract_feature f = variant("window", ATTNCHECK_FEATURE3_WINDOW, "window", "no sliding window", 0.8);
  f.present = [](const attn_case& c) { return c.variants.has_window(); };
  f.clear = [](attn_case& c) { c.variants.window_left = c.variants.window_right = -1; };
  f.write = [](const attn_case& c, std::string& s) {
    const score_variants& w = c.variants;
    if (w.has_window()) s += ",window=[" + str(w.window_left) + "," + str(w.window_right) + "]";
  };
  f.read = [](std::string_view key, std::string_view val, bool flag, attn_case& c, const case_limits&) {
    need_value(key, flag);
    const auto ends = val.size() >= 2 && val.front() == '[' && val.back() == ']'
                          ? detail::split(val.substr(1, val.size() - 2), ',')
                          : std::vector<std::string_view>{};
    if (ends.size() != 2) fail("window", "expected [left,right] (-1: unbounded), got " + quoted(val));
    c.variants.window_left = detail::parse_int<std::int64_t>("window", ends[0]);
    c.variants.window_right = detail::parse_int<std::int64_t>("window", ends[1]);
    if (!c.variants.has_window()) fail("window", "[-1,-1] is no window: leave the field out");
  };
  // A window wider than every position difference (|j - p| < lk + lq) is legal and means "unbounded".
  f.check = [](const attn_case& c, bool, const case_limits& limits) {
    for (auto [field, v] : {std::pair{"window_left", c.variants.window_left}, std::pair{"window_right", c.variants.window_right}})
      if (v < -1 || v > limits.max_dim)
        fail(field, "=" + str(v) + " is outside [-1, max_dim=" + str(limits.max_dim) + "] (-1: unbounded)");
  };
  return f;
}

contract_feature chunk() {
  contract_feature f = variant("chunk", ATTNCHECK_FEATURE3_CHUNK, "chunk", "no chunked attention", 0.25);
  f.present = [](const attn_case& c) { return c.variants.has_chunk(); };
  f.clear = [](attn_case& c) { c.variants.chunk = 0; };
  f.write = [](const attn_case& c, std::string& s) {
    if (c.variants.has_chunk()) s += ",chunk=" + str(c.variants.chunk);
  };
  f.read = [](std::string_view key, std::string_view val, bool flag, attn_case& c, const case_limits&) {
    need_value(key, flag);
    c.variants.chunk = detail::parse_int<std::int64_t>(key, val);
    if (c.variants.chunk < 1) fail("chunk", quoted(val) + " must be >= 1 (leave the field out for no chunking)");
  };
  f.check = [](const attn_case& c, bool, const case_limits& limits) {
    if (c.variants.chunk < 0 || c.variants.chunk > limits.max_dim)
      fail("chunk", "=" + str(c.variants.chunk) + " is outside [0, max_dim=" + str(limits.max_dim) + "] (0: off)");
  };
  return f;
}

contract_feature softcap() {
  contract_feature f = variant("softcap", ATTNCHECK_FEATURE3_SOFTCAP, "softcap", "no softcap", 0.875);
  f.present = [](const attn_case& c) { return c.variants.has_softcap(); };
  f.clear = [](attn_case& c) { c.variants.softcap = 0; };
  f.write = [](const attn_case& c, std::string& s) {
    if (c.variants.has_softcap()) s += ",softcap=" + detail::float_text(c.variants.softcap);
  };
  f.read = [](std::string_view key, std::string_view val, bool flag, attn_case& c, const case_limits&) {
    need_value(key, flag);
    c.variants.softcap = detail::parse_float(key, val);
    if (!(c.variants.softcap > 0)) fail("softcap", quoted(val) + " must be > 0 (leave the field out for no cap)");
  };
  f.check = [](const attn_case& c, bool, const case_limits&) {
    if (!(std::isfinite(c.variants.softcap) && c.variants.softcap >= 0)) fail("softcap", "must be finite and >= 0 (0: off)");
  };
  return f;
}

// A variant drawn by a named recipe (never "none" on the line) with one per-head tensor, as sinks and ALiBi are.
template <class Kind>
struct recipe_fields {
  const char* key;
  Kind score_variants::*kind;
  Kind last;  // the last recipe the enum knows
  std::vector<float> score_variants::*tensor;
  const char* tensor_key;
  bool neginf_allowed;
  std::optional<Kind> (*parse)(std::string_view);
  const char* choices;  // the recipes a line may name
  const char* noun;     // "is not a known <noun> recipe"
};

template <class Kind>
constexpr recipe_fields<Kind> recipe(const char* key, Kind score_variants::*kind, Kind last,
                                     std::vector<float> score_variants::*tensor, const char* tensor_key, bool neginf_allowed,
                                     std::optional<Kind> (*parse)(std::string_view), const char* choices, const char* noun) {
  return {key, kind, last, tensor, tensor_key, neginf_allowed, parse, choices, noun};
}

// The table holds plain function pointers, so these read R (a template argument) rather than capture it.
template <const auto& R>
void recipe_read(std::string_view key, std::string_view val, bool flag, attn_case& c, const case_limits&) {
  using kind = decltype(R.last);
  need_value(key, flag);
  const auto v = R.parse(val);
  if (!v || *v == kind::none) fail(R.key, quoted(val) + " is not one of " + R.choices);
  c.variants.*R.kind = *v;
}

template <const auto& R>
void recipe_check(const attn_case& c, bool tensors_required, const case_limits&) {
  using kind = decltype(R.last);
  if (static_cast<int>(c.variants.*R.kind) > static_cast<int>(R.last))
    fail(R.key, "is not a known " + std::string(R.noun) + " recipe");
  check_per_head(c, R.tensor_key, c.variants.*R.tensor, c.variants.*R.kind != kind::none, R.neginf_allowed, tensors_required);
}

template <const auto& R>
contract_feature per_head_recipe(contract_feature f) {
  using kind = decltype(R.last);
  f.present = [](const attn_case& c) { return c.variants.*R.kind != kind::none; };
  f.clear = [](attn_case& c) { c.variants.*R.kind = kind::none, (c.variants.*R.tensor).clear(); };
  f.write = [](const attn_case& c, std::string& s) {
    if (c.variants.*R.kind != kind::none) s += "," + std::string(R.key) + "=" + std::string(name(c.variants.*R.kind));
  };
  f.read = recipe_read<R>;
  f.check = recipe_check<R>;
  return f;
}

constexpr auto sink_recipe = recipe("sinks", &score_variants::sinks, sink_kind::mixed, &score_variants::sink_logits,
                                    "sink_logits", true, parse_sink_kind, "normal, high, low, neginf, mixed", "sink");
constexpr auto alibi_recipe = recipe("alibi", &score_variants::alibi, alibi_kind::zero, &score_variants::alibi_slopes,
                                     "alibi_slopes", false, parse_alibi_kind, "standard, random, zero", "ALiBi");

contract_feature sinks() {
  return per_head_recipe<sink_recipe>(variant("sinks", ATTNCHECK_FEATURE3_SINKS, "sinks", "no attention sinks", 0.83));
}

// The standard recipe's max_bias (score_variants::alibi_max_bias): on the line only where it is not 8.
contract_feature alibi() {
  contract_feature f = per_head_recipe<alibi_recipe>(variant("alibi", ATTNCHECK_FEATURE3_ALIBI, "alibi", "no ALiBi", 0.75));
  f.python_keywords = {"alibi_slopes"};
  f.keys = {"alibi", "alibi_max_bias"};
  f.keys_need_first = "alibi=standard";
  f.clear = [](attn_case& c) {
    c.variants.alibi = alibi_kind::none, c.variants.alibi_slopes.clear();
    c.variants.alibi_max_bias = 8;
  };
  f.write = [](const attn_case& c, std::string& s) {
    if (!c.variants.has_alibi()) return;
    s += ",alibi=" + std::string(name(c.variants.alibi));
    if (c.variants.alibi_max_bias != 8) s += ",alibi_max_bias=" + detail::float_text(c.variants.alibi_max_bias);
  };
  f.read = [](std::string_view key, std::string_view val, bool flag, attn_case& c, const case_limits& limits) {
    if (key != "alibi_max_bias") return recipe_read<alibi_recipe>(key, val, flag, c, limits);
    need_value(key, flag);
    c.variants.alibi_max_bias = detail::parse_float(key, val);
  };
  f.check = [](const attn_case& c, bool tensors_required, const case_limits& limits) {
    recipe_check<alibi_recipe>(c, tensors_required, limits);
    const float m = c.variants.alibi_max_bias;
    if (!(m > 0 && m <= 64)) fail("alibi_max_bias", "=" + detail::float_text(m) + " is outside (0, 64]");
    if (m != 8 && c.variants.alibi != alibi_kind::standard)
      fail("alibi_max_bias", "=" + detail::float_text(m) +
                                 " belongs to alibi=standard (the slope rule), not alibi=" + std::string(name(c.variants.alibi)));
  };
  return f;
}

contract_feature bias() {
  contract_feature f = variant("bias", ATTNCHECK_FEATURE3_BIAS, "bias", "no additive bias", 0.75);
  f.keys = {"bias", "bias_type", "bias_values"};
  f.keys_need_first = "bias=BxHxIxJ";
  f.present = [](const attn_case& c) { return c.variants.has_bias(); };
  f.clear = [](attn_case& c) {
    score_variants& w = c.variants;
    w.bias_shape = {};
    w.bias_type = dtype::f32;
    w.bias_values = bias_kind::normal;
    w.bias = tensor{};
  };
  f.write = [](const attn_case& c, std::string& s) {
    const score_variants& w = c.variants;
    if (!w.has_bias()) return;
    s += ",bias=" + detail::dims_text(w.bias_shape);
    if (w.bias_type != dtype::f32) s += ",bias_type=" + std::string(name(w.bias_type));
    if (w.bias_values != bias_kind::normal) s += ",bias_values=" + std::string(name(w.bias_values));
  };
  f.read = [](std::string_view key, std::string_view val, bool flag, attn_case& c, const case_limits&) {
    need_value(key, flag);
    if (key == "bias") {
      c.variants.bias_shape = detail::parse_dims("bias", val);
    } else if (key == "bias_type") {
      c.variants.bias_type = parse_enum("bias_type", val, parse_dtype, "f32, f16, bf16");
    } else {
      c.variants.bias_values = parse_enum("bias_values", val, parse_bias_kind, "normal, masking, huge");
    }
  };
  // The bias's recipe, broadcast shape, type and values (docs/spec.md "Additive bias").
  f.check = [](const attn_case& c, bool tensors_required, const case_limits& limits) {
    const score_variants& w = c.variants;
    if (static_cast<int>(w.bias_values) > static_cast<int>(bias_kind::huge)) fail("bias_values", "is not a known bias recipe");
    if (static_cast<int>(w.bias_type) > static_cast<int>(dtype::bf16)) fail("bias_type", "is not f32, f16 or bf16");
    const auto& bs = w.bias_shape;
    if (bs == std::array<std::int64_t, 4>{}) {
      if (!w.bias.bits.empty()) fail("bias", "has values but bias_shape is unset");
      return;
    }
    const std::array<std::pair<const char*, std::int64_t>, 4> full{{{"b", c.b}, {"hq", c.hq}, {"lq", c.lq}, {"lk", c.lk}}};
    for (int a = 0; a < 4; ++a)
      if (bs[a] != 1 && bs[a] != full[a].second)
        fail("bias_shape", "dim " + std::to_string(a) + " is " + str(bs[a]) + ", must be 1 or " + full[a].first + "=" +
                               str(full[a].second) + " (broadcast to b x hq x lq x lk)");
    const std::int64_t entries = bs[0] * bs[1] * bs[2] * bs[3];  // each dim 1 or a size whose product was checked
    if (entries > limits.max_elements)
      fail("bias_shape", "has " + str(entries) + " entries, over max_elements=" + str(limits.max_elements));
    if (w.bias.bits.empty()) {
      if (tensors_required) fail("bias", "is missing (bias_shape is set)");
      return;
    }
    if (w.bias.type != w.bias_type)
      fail("bias.type", "is " + std::string(name(w.bias.type)) + ", bias_type is " + std::string(name(w.bias_type)));
    if (w.bias.shape != bs) fail("bias.shape", "is " + bracket_dims(w.bias.shape) + ", bias_shape is " + bracket_dims(bs));
    const dims4 dense{bs[1] * bs[2] * bs[3], bs[2] * bs[3], bs[3], 1};
    if (w.bias.stride != dense || w.bias.offset != 0 || static_cast<std::int64_t>(w.bias.bits.size()) != entries)
      fail("bias", "must be dense row-major over bias_shape (" + str(entries) + " entries, offset 0)");
    for (std::size_t e = 0; e < w.bias.bits.size(); ++e) {
      const double x = decode(w.bias_type, w.bias.bits[e]);
      if (std::isnan(x) || x == std::numeric_limits<double>::infinity())
        fail("bias[" + std::to_string(e) + "]",
             "is " + std::string(std::isnan(x) ? "NaN" : "+inf") + ": a bias entry is finite, or -inf to mask its key");
    }
  };
  return f;
}

// The input forms' fields are checked with the rest of the form (case_validate.cpp's validate_form).
contract_feature paged() {
  contract_feature f = entry("paged", feature_kind::input_form, 3, ATTNCHECK_FEATURE3_PAGED);
  f.label = "paged K/V";
  f.cannot_take = "no paged K/V";
  f.keys = {"pages", "page_order", "spare_pages", "table_tail", "shared_pages"};
  f.python_keywords = {"k_pages", "v_pages", "block_table", "page_size"};
  f.present = [](const attn_case& c) { return c.form.paged(); };
  f.clear = [](attn_case& c) {
    input_form& x = c.form;
    x.page_size = 0, x.page_order = page_order_kind::shuffled, x.spare_pages = 0, x.table_tail = table_tail_kind::stale;
    x.shared_pages = 0;
  };
  f.write = [](const attn_case& c, std::string& s) {
    const input_form& x = c.form;
    if (!x.paged()) return;
    s += ",pages=" + str(x.page_size);
    if (x.page_order != page_order_kind::shuffled) s += ",page_order=" + std::string(name(x.page_order));
    if (x.spare_pages) s += ",spare_pages=" + str(x.spare_pages);
    if (x.table_tail != table_tail_kind::stale) s += ",table_tail=" + std::string(name(x.table_tail));
    if (x.shared_pages) s += ",shared_pages=" + str(x.shared_pages);
  };
  f.read = [](std::string_view key, std::string_view val, bool flag, attn_case& c, const case_limits&) {
    need_value(key, flag);
    if (key == "page_order") {
      c.form.page_order = parse_enum("page_order", val, parse_page_order_kind, "shuffled, in_order, reversed");
    } else if (key == "table_tail") {
      c.form.table_tail = parse_enum("table_tail", val, parse_table_tail_kind, "stale, invalid");
    } else {
      const auto v = detail::parse_int<std::int64_t>(key, val);
      (key == "pages" ? c.form.page_size : key == "spare_pages" ? c.form.spare_pages : c.form.shared_pages) = v;
      if (key == "pages" && v < 1) fail("pages", quoted(val) + " must be >= 1 (leave the field out for dense K and V)");
    }
  };
  return f;
}

contract_feature ragged() {
  contract_feature f = entry("ragged", feature_kind::input_form, 3, ATTNCHECK_FEATURE3_RAGGED);
  f.label = "ragged batches";
  f.cannot_take = "no ragged batches";
  f.keys = {"ragged", "qlen"};
  f.python_keywords = {"cu_seqlens_q", "cu_seqlens_k"};
  f.present = [](const attn_case& c) { return c.form.ragged; };
  f.clear = [](attn_case& c) { c.form.ragged = false, c.form.q_len.clear(); };
  f.write = [](const attn_case& c, std::string& s) {
    if (c.form.ragged) s += ",ragged";
    if (!c.form.q_len.empty()) s += ",qlen=" + detail::list_text(c.form.q_len);
  };
  f.read = [](std::string_view key, std::string_view val, bool flag, attn_case& c, const case_limits& limits) {
    if (key == "ragged") {
      need_flag(key, flag);
      c.form.ragged = true;
    } else {
      need_value(key, flag);
      c.form.q_len = detail::parse_list("qlen", val, "[q0,q1,...]", limits);
    }
  };
  return f;
}

// fp8 storage of Q, K and V with descales (docs/spec.md "fp8 storage"), each input by the table fp8_inputs.
contract_feature fp8() {
  contract_feature f = entry("fp8", feature_kind::storage, 4, ATTNCHECK_FEATURE4_FP8);
  f.label = "fp8 inputs with descales";
  f.cannot_take = "no fp8 inputs";
  f.keys = {"qtype", "ktype", "vtype", "qdescale", "kdescale", "vdescale", "descales"};
  f.python_keywords = {"q_descale", "k_descale", "v_descale"};
  f.present = [](const attn_case& c) { return c.quant.any(); };
  f.clear = [](attn_case& c) { c.quant = quantization{}; };
  f.write = [](const attn_case& c, std::string& s) {
    const quantization& x = c.quant;
    if (!x.any()) return;
    for (const fp8_input& t : fp8_inputs)
      if (x.*t.type) s += "," + std::string(t.type_key) + "=" + std::string(name(*(x.*t.type)));
    for (const fp8_input& t : fp8_inputs)
      if (x.*t.scale != descale_granularity::none) s += "," + std::string(t.scale_key) + "=" + std::string(name(x.*t.scale));
    if (x.descales != descale_kind::natural) s += ",descales=" + std::string(name(x.descales));
  };
  f.read = [](std::string_view key, std::string_view val, bool flag, attn_case& c, const case_limits&) {
    need_value(key, flag);
    if (key == "descales") {
      c.quant.descales = parse_enum("descales", val, parse_descale_kind, "natural, unit, wide, spread, edges");
      return;
    }
    for (const fp8_input& t : fp8_inputs) {
      if (key == t.type_key) {
        const dtype d = parse_enum(t.type_key, val, parse_dtype, "e4m3, e5m2");
        if (!is_fp8(d))
          fail(t.type_key, quoted(val) + " is not an fp8 type (e4m3, e5m2): leave the field out for the case's type");
        c.quant.*t.type = d;
      } else if (key == t.scale_key) {
        const descale_granularity g = parse_enum(t.scale_key, val, parse_descale_granularity, "tensor, head");
        if (g == descale_granularity::none) fail(t.scale_key, "none is no descale: leave the field out");
        c.quant.*t.scale = g;
      }
    }
  };
  // Types, granularities and descales; fp8 with a form, the cache or the backward is not built.
  f.check = [](const attn_case& c, bool tensors_required, const case_limits&) {
    const quantization& x = c.quant;
    if (static_cast<int>(x.descales) > static_cast<int>(descale_kind::edges)) fail("descales", "is not a known descale recipe");
    for (const fp8_input& t : fp8_inputs) {
      const auto type = x.*t.type;
      if (type && !is_fp8(*type)) fail(t.type_key, "is " + std::string(name(*type)) + ", not an fp8 type (e4m3, e5m2)");
      const descale_granularity g = x.*t.scale;
      if (static_cast<int>(g) > static_cast<int>(descale_granularity::head)) fail(t.scale_key, "is not none, tensor or head");
      if (g != descale_granularity::none && !type)
        fail(t.scale_key, "is given for a tensor not in fp8: set " + std::string(t.type_key) + " too");
      const std::vector<float>& d = x.*t.descale;
      const std::int64_t want = descale_count(c, g, t.query);
      if (d.empty() && (!tensors_required || want == 0)) continue;
      if (static_cast<std::int64_t>(d.size()) != want)
        fail(t.descale_key, "has " + std::to_string(d.size()) + " values, " + std::string(t.scale_key) + "=" +
                                std::string(name(g)) + " needs " + str(want));
      for (std::size_t i = 0; i < d.size(); ++i)
        if (!(std::isfinite(d[i]) && d[i] > 0))
          fail(std::string(t.descale_key) + "[" + std::to_string(i) + "]",
               "is " + std::to_string(d[i]) + ": a descale is finite and positive");
    }
    if (!x.any()) {
      if (x.descales != descale_kind::natural) fail("descales", "is given without an fp8 input (qtype, ktype or vtype)");
      return;
    }
    if (!c.form.dense())
      fail("fp8", "fp8 inputs through the paged or ragged form are not built yet (docs/spec.md \"fp8 storage\")");
    if (c.grad) fail("grad", "the backward of fp8 inputs is not built yet (docs/spec.md \"fp8 storage\")");
  };
  return f;
}

contract_feature backward(std::string name, std::uint32_t bit, std::string label, bool python_declarable) {
  contract_feature f = entry(std::move(name), feature_kind::backward, 3, bit);
  f.label = std::move(label);
  f.python_declarable = python_declarable;
  return f;
}

// Declared, not judged: no law hands out d(bias) yet.
contract_feature bias_grad() {
  contract_feature f = backward("bias_grad", ATTNCHECK_FEATURE3_BIAS_GRAD, "bias gradient", false);
  f.judged = false;
  return f;
}

std::vector<contract_feature>& table() {
  static std::vector<contract_feature> t = {
      causal(),
      padding(),
      mask(),
      output("lse", ATTNCHECK_FEATURE_LSE, "LSE", true),
      output("threads", ATTNCHECK_FEATURE_THREADS, "threads", true),
      // Declared in Python by its own key, `cache` (docs/python.md).
      output("cache", ATTNCHECK_FEATURE_CACHE, "cache", false),
      window(),
      chunk(),
      softcap(),
      sinks(),
      alibi(),
      bias(),
      paged(),
      ragged(),
      fp8(),
      // Declared in Python by its own key, `backward`; the bias gradient not at all.
      backward("backward", ATTNCHECK_FEATURE3_BACKWARD, "backward", false),
      bias_grad(),
      backward("backward_variants", ATTNCHECK_FEATURE3_BACKWARD_VARIANTS, "backward under the variants", true),
  };
  return t;
}

}  // namespace

std::span<const contract_feature> contract_features() { return table(); }

const contract_feature* find_feature(std::string_view name) {
  for (const contract_feature& f : contract_features())
    if (f.name == name) return &f;
  return nullptr;
}

const contract_feature* find_feature(int abi_word, std::uint32_t bit) {
  for (const contract_feature& f : contract_features())
    if (f.abi_word == abi_word && f.bit == bit) return &f;
  return nullptr;
}

const contract_feature* feature_of_key(std::string_view key) {
  for (const contract_feature& f : contract_features())
    for (const std::string& k : f.keys)
      if (k == key) return &f;
  return nullptr;
}

std::uint32_t variant_bits(const attn_case& c) {
  std::uint32_t bits = 0;
  for (const contract_feature& f : contract_features())
    if (f.kind == feature_kind::variant && f.present && f.present(c)) bits |= f.bit;
  return bits;
}

void register_contract_feature(contract_feature f) { table().push_back(std::move(f)); }

}  // namespace attncheck
