// The one-line form ATTN(b=..,...): printed on every failure, parsed back as a filter.
#include <array>
#include <charconv>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "attncheck/case.hpp"

namespace attncheck {

namespace {

[[noreturn]] void fail(std::string field, const std::string& what) { throw input_error(std::move(field), what); }

std::string quoted(std::string_view s) {
  // Long garbage stays readable in a one-line error.
  constexpr std::size_t shown = 40;
  return "'" + std::string(s.substr(0, shown)) + (s.size() > shown ? "...'" : "'");
}

template <class Int>
Int parse_int(std::string_view key, std::string_view text) {
  Int v{};
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ec == std::errc::result_out_of_range) fail(std::string(key), quoted(text) + " is out of range");
  if (ec != std::errc{} || ptr != end || text.empty()) fail(std::string(key), quoted(text) + " is not an integer");
  return v;
}

float parse_float(std::string_view key, std::string_view text) {
  float v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ec == std::errc::result_out_of_range) fail(std::string(key), quoted(text) + " is out of f32 range");
  if (ec != std::errc{} || ptr != end || text.empty()) fail(std::string(key), quoted(text) + " is not a number");
  return v;
}

std::string float_text(float f) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, f);  // shortest round-trip form
  return std::string(buf, r.ptr);
}

// Splits on sep, keeping empty parts (so ",," and trailing separators are caught).
std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == sep) {
      parts.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  return parts;
}

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

// BxHxIxJ, as mask= and bias= print their broadcast shapes.
std::string dims_text(const std::array<std::int64_t, 4>& d) {
  return std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" + std::to_string(d[2]) + "x" + std::to_string(d[3]);
}

// Parses BxHxIxJ, each size >= 1.
std::array<std::int64_t, 4> parse_dims(const char* key, std::string_view val) {
  const auto dims = split(val, 'x');
  if (dims.size() != 4) fail(key, "expected BxHxIxJ (four sizes), got " + quoted(val));
  std::array<std::int64_t, 4> out{};
  for (int a = 0; a < 4; ++a) {
    out[a] = parse_int<std::int64_t>(key, dims[a]);
    if (out[a] < 1) fail(key, "dim " + std::to_string(a) + " is " + std::to_string(out[a]) + ", must be >= 1");
  }
  return out;
}

bool is_space(char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v'; }

}  // namespace

std::string to_line(const attn_case& c) {
  std::string s = "ATTN(b=" + std::to_string(c.b) + ",hq=" + std::to_string(c.hq) + ",hkv=" + std::to_string(c.hkv) +
                  ",lq=" + std::to_string(c.lq) + ",lk=" + std::to_string(c.lk) + ",d=" + std::to_string(c.d) +
                  ",dv=" + std::to_string(c.dv);
  if (c.scale) s += ",scale=" + float_text(*c.scale);
  if (c.causal) s += ",causal";
  if (c.has_padding()) {
    s += ",kpad=[";
    for (std::size_t i = 0; i < c.key_len.size(); ++i) s += (i ? "," : "") + std::to_string(c.key_len[i]);
    s += "]";
  }
  if (c.has_mask()) s += ",mask=" + dims_text(c.mask_shape);
  const score_variants& w = c.variants;
  if (w.has_window()) s += ",window=[" + std::to_string(w.window_left) + "," + std::to_string(w.window_right) + "]";
  if (w.has_chunk()) s += ",chunk=" + std::to_string(w.chunk);
  if (w.has_softcap()) s += ",softcap=" + float_text(w.softcap);
  if (w.has_sinks()) s += ",sinks=" + std::string(name(w.sinks));
  if (w.has_alibi()) s += ",alibi=" + std::string(name(w.alibi));
  if (w.has_bias()) {
    s += ",bias=" + dims_text(w.bias_shape);
    if (w.bias_type != dtype::f32) s += ",bias_type=" + std::string(name(w.bias_type));
    if (w.bias_values != bias_kind::normal) s += ",bias_values=" + std::string(name(w.bias_values));
  }
  const input_form& f = c.form;
  if (f.paged()) {
    s += ",pages=" + std::to_string(f.page_size);
    if (f.page_order != page_order_kind::shuffled) s += ",page_order=" + std::string(name(f.page_order));
    if (f.spare_pages) s += ",spare_pages=" + std::to_string(f.spare_pages);
    if (f.table_tail != table_tail_kind::stale) s += ",table_tail=" + std::string(name(f.table_tail));
    if (f.shared_pages) s += ",shared_pages=" + std::to_string(f.shared_pages);
  }
  if (f.ragged) s += ",ragged";
  if (!f.q_len.empty()) {
    s += ",qlen=[";
    for (std::size_t i = 0; i < f.q_len.size(); ++i) s += (i ? "," : "") + std::to_string(f.q_len[i]);
    s += "]";
  }
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
    } else if (key == "causal") {
      if (!flag) fail("causal", "is a flag, write just 'causal'");
      c.causal = true;
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
    } else if (key == "kpad") {
      need_value();
      if (val.size() < 2 || val.front() != '[' || val.back() != ']') fail("kpad", "expected [n0,n1,...], got " + quoted(val));
      for (std::string_view n : split(val.substr(1, val.size() - 2), ',')) {
        if (static_cast<std::int64_t>(c.key_len.size()) >= limits.max_dim)
          fail("kpad", "has more than max_dim=" + std::to_string(limits.max_dim) + " entries");
        c.key_len.push_back(parse_int<std::int64_t>("kpad", n));
      }
    } else if (key == "mask") {
      need_value();
      c.mask_shape = parse_dims("mask", val);
    } else if (key == "window") {
      need_value();
      const auto ends = val.size() >= 2 && val.front() == '[' && val.back() == ']' ? split(val.substr(1, val.size() - 2), ',')
                                                                                   : std::vector<std::string_view>{};
      if (ends.size() != 2) fail("window", "expected [left,right] (-1: unbounded), got " + quoted(val));
      c.variants.window_left = parse_int<std::int64_t>("window", ends[0]);
      c.variants.window_right = parse_int<std::int64_t>("window", ends[1]);
      if (!c.variants.has_window()) fail("window", "[-1,-1] is no window: leave the field out");
    } else if (key == "chunk") {
      need_value();
      c.variants.chunk = parse_int<std::int64_t>(key, val);
      if (c.variants.chunk < 1) fail("chunk", quoted(val) + " must be >= 1 (leave the field out for no chunking)");
    } else if (key == "softcap") {
      need_value();
      c.variants.softcap = parse_float(key, val);
      if (!(c.variants.softcap > 0)) fail("softcap", quoted(val) + " must be > 0 (leave the field out for no cap)");
    } else if (key == "sinks") {
      need_value();
      const auto v = parse_sink_kind(val);
      if (!v || *v == sink_kind::none) fail("sinks", quoted(val) + " is not one of normal, high, low, neginf, mixed");
      c.variants.sinks = *v;
    } else if (key == "alibi") {
      need_value();
      const auto v = parse_alibi_kind(val);
      if (!v || *v == alibi_kind::none) fail("alibi", quoted(val) + " is not one of standard, random, zero");
      c.variants.alibi = *v;
    } else if (key == "bias") {
      need_value();
      c.variants.bias_shape = parse_dims("bias", val);
    } else if (key == "bias_type") {
      need_value();
      const auto t = parse_dtype(val);
      if (!t) fail("bias_type", quoted(val) + " is not one of f32, f16, bf16");
      c.variants.bias_type = *t;
    } else if (key == "bias_values") {
      need_value();
      const auto v = parse_bias_kind(val);
      if (!v) fail("bias_values", quoted(val) + " is not one of normal, masking, huge");
      c.variants.bias_values = *v;
    } else if (key == "pages" || key == "spare_pages" || key == "shared_pages") {
      need_value();
      const auto v = parse_int<std::int64_t>(key, val);
      (key == "pages" ? c.form.page_size : key == "spare_pages" ? c.form.spare_pages : c.form.shared_pages) = v;
      if (key == "pages" && v < 1) fail("pages", quoted(val) + " must be >= 1 (leave the field out for dense K and V)");
    } else if (key == "page_order") {
      need_value();
      const auto v = parse_page_order_kind(val);
      if (!v) fail("page_order", quoted(val) + " is not one of shuffled, in_order, reversed");
      c.form.page_order = *v;
    } else if (key == "table_tail") {
      need_value();
      const auto v = parse_table_tail_kind(val);
      if (!v) fail("table_tail", quoted(val) + " is not one of stale, invalid");
      c.form.table_tail = *v;
    } else if (key == "ragged") {
      if (!flag) fail("ragged", "is a flag, write just 'ragged'");
      c.form.ragged = true;
    } else if (key == "qlen") {
      need_value();
      if (val.size() < 2 || val.front() != '[' || val.back() != ']') fail("qlen", "expected [q0,q1,...], got " + quoted(val));
      for (std::string_view n : split(val.substr(1, val.size() - 2), ',')) {
        if (static_cast<std::int64_t>(c.form.q_len.size()) >= limits.max_dim)
          fail("qlen", "has more than max_dim=" + std::to_string(limits.max_dim) + " entries");
        c.form.q_len.push_back(parse_int<std::int64_t>("qlen", n));
      }
    } else if (key == "values") {
      need_value();
      const auto v = parse_value_kind(val);
      if (!v)
        fail(
            "values",
            quoted(val) +
                " is not one of dyadic, normal, uniform, large_logits, dominant, equal_keys, huge_v, tiny_v, far_below, far_above, underflow_gaps, masked_lead, max_v");
      c.values = *v;
    } else if (key == "layout") {
      need_value();
      const auto v = parse_layout_kind(val);
      if (!v) fail("layout", quoted(val) + " is not one of bshd, bhsd, padded");
      c.layout = *v;
    } else if (key == "poison") {
      need_value();
      const auto v = parse_poison_kind(val);
      if (!v) fail("poison", quoted(val) + " is not one of none, nan, big");
      c.poison = *v;
    } else if (key == "grad") {
      need_value();
      const auto v = parse_grad_kind(val);
      if (!v) fail("grad", quoted(val) + " is not one of dyadic, normal, adversarial");
      c.grad = *v;
    } else if (key == "seed") {
      need_value();
      c.seed = parse_int<std::uint64_t>(key, val);
    } else {
      fail(std::string(key.substr(0, 40)),
           "unknown field (known: b, hq, hkv, lq, lk, d, dv, scale, causal, kpad, mask, window, chunk, softcap, sinks, "
           "alibi, bias, bias_type, bias_values, pages, page_order, spare_pages, table_tail, shared_pages, ragged, qlen, "
           "f32/f16/bf16, values, layout, poison, grad, seed)");
    }
  }
  for (const char* k : {"b", "hq", "hkv", "lq", "lk", "d", "dv"})
    if (!seen.count(k)) fail(k, "missing (shape fields are required)");
  for (const char* k : {"bias_type", "bias_values"})
    if (seen.count(k) && !seen.count("bias")) fail(k, "given without bias=BxHxIxJ");
  validate(c, false, limits);
  return c;
}

}  // namespace attncheck
