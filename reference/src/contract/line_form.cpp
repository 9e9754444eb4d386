// The one-line form ATTN(b=..,...): printed on every failure, parsed back as a filter.
#include <array>
#include <charconv>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "attncheck/case.hpp"
#include "attncheck/features.hpp"
#include "line_parse.hpp"

namespace attncheck {

namespace {

using detail::fail;
using detail::float_text;
using detail::parse_enum;
using detail::parse_float;
using detail::parse_int;
using detail::quoted;

// Splits the body on commas outside [ ].
std::vector<std::string_view> split_fields(std::string_view body) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  bool in_list = false;
  for (std::size_t i = 0; i <= body.size(); ++i) {
    const char ch = i < body.size() ? body[i] : ',';
    if (ch == '[') {
      if (in_list) fail("ATTN", "nested '[' at position " + std::to_string(i));
      in_list = true;
    } else if (ch == ']') {
      if (!in_list) fail("ATTN", "unmatched ']' at position " + std::to_string(i));
      in_list = false;
    } else if (ch == ',' && !in_list) {
      parts.push_back(body.substr(start, i - start));
      start = i + 1;
    }
  }
  if (in_list) fail("ATTN", "unclosed '['");
  return parts;
}

// The known fields, for the error on an unknown one: the shape, the scale,
// every feature's fields (attncheck/features.hpp), the dtype and the recipe.
std::string known_fields() {
  std::string s = "b, hq, hkv, lq, lk, d, dv, scale";
  for (const contract_feature& f : contract_features())
    for (const std::string& k : f.keys) s += ", " + k;
  return s + ", f32/f16/bf16, values, layout, poison, grad, seed";
}

bool is_space(char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v'; }

}  // namespace

std::string to_line(const attn_case& c) {
  std::string s = "ATTN(b=" + std::to_string(c.b) + ",hq=" + std::to_string(c.hq) + ",hkv=" + std::to_string(c.hkv) +
                  ",lq=" + std::to_string(c.lq) + ",lk=" + std::to_string(c.lk) + ",d=" + std::to_string(c.d) +
                  ",dv=" + std::to_string(c.dv);
  if (c.scale) s += ",scale=" + float_text(*c.scale);
  for (const contract_feature& f : contract_features())
    if (f.write) f.write(c, s);
  s += ",";
  s += name(c.type);
  if (c.values != value_kind::normal) s += ",values=" + std::string(name(c.values));
  if (c.layout != layout_kind::bshd) s += ",layout=" + std::string(name(c.layout));
  if (c.poison != poison_kind::none) s += ",poison=" + std::string(name(c.poison));
  if (c.grad) s += ",grad=" + std::string(name(*c.grad));
  if (c.seed != 0) s += ",seed=" + std::to_string(c.seed);
  return s + ")";
}

attn_case parse_line(std::string_view line, const case_limits& limits) {
  while (!line.empty() && is_space(line.front())) line.remove_prefix(1);
  while (!line.empty() && is_space(line.back())) line.remove_suffix(1);
  constexpr std::string_view head = "ATTN(";
  if (line.substr(0, head.size()) != head || line.empty() || line.back() != ')')
    fail("ATTN", "expected ATTN(b=..,hq=..,...), got " + quoted(line));
  const std::string_view body = line.substr(head.size(), line.size() - head.size() - 1);

  attn_case c;
  std::set<std::string, std::less<>> seen;
  for (std::string_view field : split_fields(body)) {
    if (field.empty()) fail("ATTN", "empty field in " + quoted(line));
    const auto eq = field.find('=');
    const std::string_view key = field.substr(0, eq);
    const std::string_view val = eq == std::string_view::npos ? std::string_view{} : field.substr(eq + 1);
    const bool flag = eq == std::string_view::npos;
    const auto type = flag ? parse_dtype(field) : std::nullopt;
    const std::string id = type ? "dtype" : std::string(key);
    if (!seen.insert(id).second) fail(id, "given twice");

    auto need_value = [&] {
      if (flag) fail(id, "needs a value (" + id + "=...)");
    };
    if (type) {
      c.type = *type;
    } else if (key == "b" || key == "hq" || key == "hkv" || key == "lq" || key == "lk" || key == "d" || key == "dv") {
      need_value();
      const auto v = parse_int<std::int64_t>(key, val);
      std::int64_t* dst = key == "b"     ? &c.b
                          : key == "hq"  ? &c.hq
                          : key == "hkv" ? &c.hkv
                          : key == "lq"  ? &c.lq
                          : key == "lk"  ? &c.lk
                          : key == "d"   ? &c.d
                                         : &c.dv;
      *dst = v;
    } else if (key == "scale") {
      need_value();
      c.scale = parse_float(key, val);
    } else if (const contract_feature* f = feature_of_key(key); f && f->read) {
      f->read(key, val, flag, c, limits);
    } else if (key == "values") {
      need_value();
      c.values = parse_enum(
          "values", val, parse_value_kind,
          "dyadic, normal, uniform, large_logits, dominant, equal_keys, huge_v, tiny_v, far_below, far_above, underflow_gaps, masked_lead, max_v");
    } else if (key == "layout") {
      need_value();
      c.layout = parse_enum("layout", val, parse_layout_kind, "bshd, bhsd, padded");
    } else if (key == "poison") {
      need_value();
      c.poison = parse_enum("poison", val, parse_poison_kind, "none, nan, big");
    } else if (key == "grad") {
      need_value();
      c.grad = parse_enum("grad", val, parse_grad_kind, "dyadic, normal, adversarial");
    } else if (key == "seed") {
      need_value();
      c.seed = parse_int<std::uint64_t>(key, val);
    } else {
      fail(std::string(key.substr(0, 40)), "unknown field (known: " + known_fields() + ")");
    }
  }
  for (const char* k : {"b", "hq", "hkv", "lq", "lk", "d", "dv"})
    if (!seen.count(k)) fail(k, "missing (shape fields are required)");
  for (const contract_feature& f : contract_features())
    for (std::size_t k = 1; !f.keys_need_first.empty() && k < f.keys.size(); ++k)
      if (seen.count(f.keys[k]) && !seen.count(f.keys[0])) fail(f.keys[k], "given without " + f.keys_need_first);
  validate(c, false, limits);
  return c;
}

}  // namespace attncheck
