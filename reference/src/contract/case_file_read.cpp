// Reading case files: strict, one clear line per problem, never a crash.
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <new>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "attncheck/case_file.hpp"

namespace attncheck {

namespace {

using json = nlohmann::json;

[[noreturn]] void fail(std::string field, const std::string& what) { throw input_error(std::move(field), what); }

// Our format nests three deep (file, tensor, shape). Refusing deeper text up
// front keeps a hostile file from building a deep tree.
constexpr int max_nesting = 8;

void check_nesting(std::string_view text) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (in_string) {
      if (ch == '\\')
        ++i;
      else if (ch == '"')
        in_string = false;
    } else if (ch == '"') {
      in_string = true;
    } else if (ch == '{' || ch == '[') {
      if (++depth > max_nesting)
        fail("json", "nesting deeper than " + std::to_string(max_nesting) + " levels at byte " + std::to_string(i));
    } else if (ch == '}' || ch == ']') {
      --depth;
    }
  }
}

std::string strip_nlohmann_tag(const std::string& what) {
  // "[json.exception.parse_error.101] parse error at line 1, column 5: ..." -> "parse error at ..."
  const auto close = what.find("] ");
  std::string s = what.rfind("[json.exception.", 0) == 0 && close != std::string::npos ? what.substr(close + 2) : what;
  // The message quotes the offending bytes; keep the line printable ASCII.
  for (char& ch : s)
    if (static_cast<unsigned char>(ch) < 0x20 || static_cast<unsigned char>(ch) >= 0x7f) ch = '?';
  return s;
}

json parse_json(std::string_view text, const case_limits& limits) {
  check_nesting(text);
  // A JSON value costs the DOM ~16 bytes or more against 2 bytes of text, so
  // a file of tiny values could cost 10x max_bytes. A case file holds a few
  // dozen values plus key_len (at most max_dim entries): refuse more early.
  const std::int64_t max_values = limits.max_dim + 4096;
  std::int64_t values = 0;
  // nlohmann keeps the last of duplicate keys silently; a file that says
  // "version" twice is ambiguous, so track keys per open object.
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  auto callback = [&](int, json::parse_event_t event, json& parsed) {
    if (++values > max_values)
      fail("json", "more than " + std::to_string(max_values) +
                       " values: not a case file (max_dim=" + std::to_string(limits.max_dim) + ")");
    if (event == json::parse_event_t::object_start) {
      open_objects.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (event == json::parse_event_t::key && !open_objects.empty()) {
      const auto& k = parsed.get_ref<const std::string&>();
      if (!open_objects.back().insert(k).second && duplicate.empty()) duplicate = k;
    }
    return true;
  };
  json j;
  try {
    j = json::parse(text.begin(), text.end(), callback);
  } catch (const json::parse_error& e) {
    fail("json", "invalid JSON: " + strip_nlohmann_tag(e.what()));
  } catch (const json::exception& e) {  // e.g. a number too large for a double
    fail("json", "invalid JSON: " + strip_nlohmann_tag(e.what()));
  }
  if (!duplicate.empty()) fail(duplicate, "given twice");
  return j;
}

std::string type_name(const json& v) { return v.type_name(); }

const json* find(const json& obj, const char* key) {
  const auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

const json& require(const json& obj, const char* key, const std::string& field) {
  const json* v = find(obj, key);
  if (!v) fail(field, "missing");
  return *v;
}

std::int64_t as_int(const json& v, const std::string& field) {
  if (!v.is_number_integer()) fail(field, "must be an integer, got " + type_name(v));
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    fail(field, "=" + v.dump() + " is out of range");
  return v.get<std::int64_t>();
}

std::string as_string(const json& v, const std::string& field) {
  if (!v.is_string()) fail(field, "must be a string, got " + type_name(v));
  return v.get<std::string>();
}

bool as_bool(const json& v, const std::string& field) {
  if (!v.is_boolean()) fail(field, "must be true or false, got " + type_name(v));
  return v.get<bool>();
}

// Per-sequence lengths (key_len, qlen): a non-empty array of integers, at most max_dim of them.
std::vector<std::int64_t> as_lengths(const json& v, const std::string& field, const case_limits& limits) {
  if (!v.is_array() || v.empty()) fail(field, "must be a non-empty array of integers");
  if (static_cast<std::int64_t>(v.size()) > limits.max_dim)
    fail(field, "has " + std::to_string(v.size()) + " entries, over max_dim=" + std::to_string(limits.max_dim));
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < v.size(); ++i) out.push_back(as_int(v[i], field + "[" + std::to_string(i) + "]"));
  return out;
}

dims4 as_dims4(const json& v, const std::string& field) {
  if (!v.is_array() || v.size() != 4) fail(field, "must be an array of 4 integers");
  dims4 d{};
  for (std::size_t a = 0; a < 4; ++a) d[a] = as_int(v[a], field + "[" + std::to_string(a) + "]");
  return d;
}

const std::set<std::string>& top_level_fields() {
  static const std::set<std::string> known = {"format",
                                              "version",
                                              "line",
                                              "law",
                                              "subject",
                                              "note",
                                              "b",
                                              "hq",
                                              "hkv",
                                              "lq",
                                              "lk",
                                              "d",
                                              "dv",
                                              "scale",
                                              "causal",
                                              "key_len",
                                              "mask_shape",
                                              "mask",
                                              "dtype",
                                              "values",
                                              "layout",
                                              "poison",
                                              "seed",
                                              "q",
                                              "k",
                                              "v",
                                              "window",
                                              "chunk",
                                              "softcap",
                                              "sinks",
                                              "sink_logits",
                                              "alibi",
                                              "alibi_max_bias",
                                              "alibi_slopes",
                                              "bias_shape",
                                              "bias_type",
                                              "bias_values",
                                              "bias",
                                              "grad",
                                              "pages",
                                              "page_order",
                                              "spare_pages",
                                              "table_tail",
                                              "shared_pages",
                                              "ragged",
                                              "qlen",
                                              "qtype",
                                              "ktype",
                                              "vtype",
                                              "qdescale",
                                              "kdescale",
                                              "vdescale",
                                              "descales",
                                              "q_descale",
                                              "k_descale",
                                              "v_descale"};
  return known;
}

void check_envelope(const json& j) {
  if (!j.is_object()) fail("json", "top level must be an object, got " + type_name(j));
  const json* format = find(j, "format");
  if (!format) fail("format", "missing (expected \"attncheck-case\")");
  if (!format->is_string() || format->get_ref<const std::string&>() != "attncheck-case")
    fail("format", "expected \"attncheck-case\", got " + format->dump());
  const std::string supported = "(this build reads version " + std::to_string(case_file_version) + ")";
  const json* version = find(j, "version");
  if (!version) fail("version", "missing " + supported);
  if (!version->is_number_integer()) fail("version", version->dump() + " is not an integer " + supported);
  if (version->is_number_unsigned() ? version->get<std::uint64_t>() != case_file_version
                                    : version->get<std::int64_t>() != case_file_version)
    fail("version", version->dump() + " is not supported " + supported);
  for (const auto& item : j.items())
    if (!top_level_fields().count(item.key())) fail(item.key(), "unknown field");
}

template <class Parse>
auto as_enum(const json& j, const char* key, Parse parse, const char* choices) {
  const std::string s = as_string(require(j, key, key), key);
  const auto v = parse(s);
  if (!v) fail(key, "\"" + s + "\" is not one of " + choices);
  return *v;
}

// The recipes and scalars of the contract 1.1 variants; their values come with the tensors.
void read_variant_header(const json& j, attn_case& c) {
  score_variants& w = c.variants;
  if (const json* v = find(j, "window")) {
    if (!v->is_array() || v->size() != 2) fail("window", "must be [left, right] (-1: unbounded)");
    w.window_left = as_int((*v)[0], "window[0]");
    w.window_right = as_int((*v)[1], "window[1]");
  }
  if (const json* v = find(j, "chunk")) w.chunk = as_int(*v, "chunk");
  if (const json* v = find(j, "softcap")) {
    if (!v->is_number()) fail("softcap", "must be a number, got " + type_name(*v));
    const double x = v->get<double>();
    if (!std::isfinite(x) || std::fabs(x) > largest_finite(dtype::f32)) fail("softcap", v->dump() + " is out of f32 range");
    w.softcap = static_cast<float>(x);
  }
  if (find(j, "sinks")) w.sinks = as_enum(j, "sinks", parse_sink_kind, "none, normal, high, low, neginf, mixed");
  if (find(j, "alibi")) w.alibi = as_enum(j, "alibi", parse_alibi_kind, "none, standard, random, zero");
  if (find(j, "sink_logits") && !w.has_sinks()) fail("sink_logits", "given without sinks");
  if (find(j, "alibi_slopes") && !w.has_alibi()) fail("alibi_slopes", "given without alibi");
  if (const json* v = find(j, "alibi_max_bias")) {  // validate() checks its range and recipe
    if (!w.has_alibi()) fail("alibi_max_bias", "given without alibi");
    if (!v->is_number()) fail("alibi_max_bias", "must be a number, got " + type_name(*v));
    const double x = v->get<double>();
    if (!(x > 0 && x <= 64)) fail("alibi_max_bias", v->dump() + " is outside (0, 64]");
    w.alibi_max_bias = static_cast<float>(x);
  }
  const json* shape = find(j, "bias_shape");
  for (const char* k : {"bias_type", "bias_values", "bias"})
    if (find(j, k) && !shape) fail(k, "given without bias_shape");
  if (shape) {
    w.bias_shape = as_dims4(*shape, "bias_shape");
    for (int a = 0; a < 4; ++a)
      if (w.bias_shape[a] < 1)
        fail("bias_shape", "dim " + std::to_string(a) + " is " + std::to_string(w.bias_shape[a]) + ", must be >= 1");
    w.bias_type = as_enum(j, "bias_type", parse_dtype, "f32, f16, bf16");
    if (find(j, "bias_values")) w.bias_values = as_enum(j, "bias_values", parse_bias_kind, "normal, masking, huge");
  }
}

// Contract 1.2 input forms (docs/spec.md "Paged KV", "Ragged batches"); validate() checks the ranges.
void read_form(const json& j, attn_case& c, const case_limits& limits) {
  input_form& f = c.form;
  if (const json* v = find(j, "pages")) f.page_size = as_int(*v, "pages");
  if (find(j, "page_order")) f.page_order = as_enum(j, "page_order", parse_page_order_kind, "shuffled, in_order, reversed");
  if (const json* v = find(j, "spare_pages")) f.spare_pages = as_int(*v, "spare_pages");
  if (find(j, "table_tail")) f.table_tail = as_enum(j, "table_tail", parse_table_tail_kind, "stale, invalid");
  if (const json* v = find(j, "shared_pages")) f.shared_pages = as_int(*v, "shared_pages");
  if (const json* v = find(j, "ragged")) f.ragged = as_bool(*v, "ragged");
  if (const json* v = find(j, "qlen")) f.q_len = as_lengths(*v, "qlen", limits);
}

void read_header(const json& j, attn_case& c, const case_limits& limits) {
  c.b = as_int(require(j, "b", "b"), "b");
  c.hq = as_int(require(j, "hq", "hq"), "hq");
  c.hkv = as_int(require(j, "hkv", "hkv"), "hkv");
  c.lq = as_int(require(j, "lq", "lq"), "lq");
  c.lk = as_int(require(j, "lk", "lk"), "lk");
  c.d = as_int(require(j, "d", "d"), "d");
  c.dv = as_int(require(j, "dv", "dv"), "dv");
  if (const json* s = find(j, "scale")) {
    if (!s->is_number()) fail("scale", "must be a number, got " + type_name(*s));
    const double x = s->get<double>();
    if (!std::isfinite(x) || std::fabs(x) > largest_finite(dtype::f32)) fail("scale", s->dump() + " is out of f32 range");
    c.scale = static_cast<float>(x);  // nearest f32; files we write hold exact f32 values
  }
  if (const json* v = find(j, "causal")) c.causal = as_bool(*v, "causal");
  if (const json* v = find(j, "key_len")) c.key_len = as_lengths(*v, "key_len", limits);
  const json* mask_shape = find(j, "mask_shape");
  const json* mask = find(j, "mask");
  if (mask && !mask_shape) fail("mask", "given without mask_shape");
  if (mask_shape) {
    c.mask_shape = as_dims4(*mask_shape, "mask_shape");
    for (int a = 0; a < 4; ++a)
      if (c.mask_shape[a] < 1)
        fail("mask_shape", "dim " + std::to_string(a) + " is " + std::to_string(c.mask_shape[a]) + ", must be >= 1");
    if (!mask) fail("mask", "missing (mask_shape is given)");
  }
  c.type = as_enum(j, "dtype", parse_dtype, "f32, f16, bf16");
  if (find(j, "values"))
    c.values = as_enum(
        j, "values", parse_value_kind,
        "dyadic, normal, uniform, large_logits, dominant, equal_keys, huge_v, tiny_v, far_below, far_above, underflow_gaps, masked_lead, max_v");
  if (find(j, "layout")) c.layout = as_enum(j, "layout", parse_layout_kind, "bshd, bhsd, padded");
  if (find(j, "poison")) c.poison = as_enum(j, "poison", parse_poison_kind, "none, nan, big");
  if (find(j, "grad")) c.grad = as_enum(j, "grad", parse_grad_kind, "dyadic, normal, adversarial");
  if (const json* s = find(j, "seed")) {
    if (!s->is_number_integer() || (!s->is_number_unsigned() && s->get<std::int64_t>() < 0))
      fail("seed", "must be an integer in [0, 2^64), got " + s->dump());
    c.seed = s->get<std::uint64_t>();
  }
  read_variant_header(j, c);
  read_form(j, c, limits);
  // Sizes and limits first, so nothing below allocates for a hostile header.
  validate(c, false, limits);
  if (mask) {
    const std::string bits = as_string(*mask, "mask");
    const auto need = static_cast<std::size_t>(c.mask_shape[0] * c.mask_shape[1] * c.mask_shape[2] * c.mask_shape[3]);
    if (bits.size() != need)
      fail("mask", "has " + std::to_string(bits.size()) + " entries, mask_shape needs " + std::to_string(need));
    c.mask.resize(need);
    for (std::size_t i = 0; i < need; ++i) {
      if (bits[i] != '0' && bits[i] != '1')
        fail("mask", "character " + std::to_string(i) + " is '" + std::string(1, bits[i]) + "', expected 0 or 1");
      c.mask[i] = bits[i] == '1';
    }
  }
}

int hex_digit(char ch) {
  if (ch >= '0' && ch <= '9') return ch - '0';
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
  return -1;
}

tensor read_tensor(const json& j, const char* key, dtype type, const case_limits& limits) {
  const std::string field = key;
  const json& t = require(j, key, field);
  if (!t.is_object()) fail(field, "must be an object with shape, stride, offset, bits");
  for (const auto& item : t.items())
    if (item.key() != "shape" && item.key() != "stride" && item.key() != "offset" && item.key() != "bits")
      fail(field + "." + item.key(), "unknown field");
  tensor x;
  x.type = type;
  x.shape = as_dims4(require(t, "shape", field + ".shape"), field + ".shape");
  x.stride = as_dims4(require(t, "stride", field + ".stride"), field + ".stride");
  x.offset = as_int(require(t, "offset", field + ".offset"), field + ".offset");
  const json& bits = require(t, "bits", field + ".bits");
  if (!bits.is_string()) fail(field + ".bits", "must be a hex string, got " + type_name(bits));
  const std::string& hex = bits.get_ref<const std::string&>();
  const std::size_t width = 2 * size_of(type);
  if (hex.size() % width != 0)
    fail(field + ".bits", "length " + std::to_string(hex.size()) + " is not a multiple of " + std::to_string(width) + " (" +
                              std::string(name(type)) + ": " + std::to_string(width) + " hex digits per element)");
  const std::size_t count = hex.size() / width;
  if (static_cast<std::int64_t>(count) > limits.max_elements)
    fail(field + ".bits",
         "holds " + std::to_string(count) + " elements, over max_elements=" + std::to_string(limits.max_elements));
  x.bits.resize(count);
  for (std::size_t e = 0; e < count; ++e) {
    std::uint32_t v = 0;
    for (std::size_t d = 0; d < width; ++d) {
      const char ch = hex[e * width + d];
      const int h = hex_digit(ch);
      if (h < 0) fail(field + ".bits", "character " + std::to_string(e * width + d) + " is not a hex digit");
      v = v << 4 | static_cast<std::uint32_t>(h);
    }
    x.bits[e] = v;
  }
  return x;
}

// A per-head f32 vector written as hex bits (case_file_write.cpp, f32_hex).
std::vector<float> read_f32_vector(const json& j, const char* key, std::int64_t want, const case_limits& limits,
                                   const std::string& need = "") {
  json wrapped = json::object();
  wrapped[key] = {{"shape", {1, 1, 1, want}}, {"stride", {want, want, want, 1}}, {"offset", 0}, {"bits", require(j, key, key)}};
  const tensor t = read_tensor(wrapped, key, dtype::f32, limits);
  if (static_cast<std::int64_t>(t.bits.size()) != want)
    fail(key, "has " + std::to_string(t.bits.size()) + " values, " +
                  (need.empty() ? "hq=" + std::to_string(want) + " needs one per query head" : need));
  std::vector<float> out(t.bits.size());
  for (std::size_t h = 0; h < out.size(); ++h) out[h] = static_cast<float>(decode(dtype::f32, t.bits[h]));
  return out;
}

// fp8 storage (docs/spec.md "fp8 storage"): the types and granularities with
// the header, the descales (hex f32 bits) with the values.
void read_quant_header(const json& j, attn_case& c) {
  quantization& z = c.quant;
  for (const fp8_input& x : fp8_inputs) {
    if (find(j, x.type_key)) z.*x.type = as_enum(j, x.type_key, parse_dtype, "e4m3, e5m2");
    if (find(j, x.scale_key)) z.*x.scale = as_enum(j, x.scale_key, parse_descale_granularity, "none, tensor, head");
  }
  if (find(j, "descales")) z.descales = as_enum(j, "descales", parse_descale_kind, "natural, unit, wide, spread, edges");
}

void read_quant_values(const json& j, attn_case& c, const case_limits& limits) {
  for (const fp8_input& x : fp8_inputs) {
    const descale_granularity g = c.quant.*x.scale;
    if (g == descale_granularity::none) {
      if (find(j, x.descale_key)) fail(x.descale_key, "given without its granularity (qdescale, kdescale, vdescale)");
      continue;
    }
    const std::int64_t want = descale_count(c, g, x.query);
    c.quant.*x.descale = read_f32_vector(j, x.descale_key, want, limits, std::string(name(g)) + " needs " + std::to_string(want));
  }
}

void read_variant_values(const json& j, attn_case& c, const case_limits& limits) {
  score_variants& w = c.variants;
  if (w.has_sinks()) w.sink_logits = read_f32_vector(j, "sink_logits", c.hq, limits);
  if (w.has_alibi()) w.alibi_slopes = read_f32_vector(j, "alibi_slopes", c.hq, limits);
  if (w.has_bias()) w.bias = read_tensor(j, "bias", w.bias_type, limits);
}

case_record parse_checked(std::string_view text, const case_limits& limits) {
  if (static_cast<std::int64_t>(text.size()) > limits.max_bytes)
    fail("file", "is " + std::to_string(text.size()) + " bytes, over max_bytes=" + std::to_string(limits.max_bytes));
  const json j = parse_json(text, limits);
  check_envelope(j);
  case_record r;
  for (auto [key, dst] : {std::pair{"law", &r.law}, std::pair{"subject", &r.subject}, std::pair{"note", &r.note}})
    if (const json* v = find(j, key)) *dst = as_string(*v, key);
  const json* line = find(j, "line");
  if (line) as_string(*line, "line");
  read_header(j, r.c, limits);
  read_quant_header(j, r.c);
  // The header fields rule; a "line" that says otherwise (edited by hand, or
  // pasted from another case) is refused rather than silently ignored.
  if (line) {
    const std::string& given = line->get_ref<const std::string&>();
    attn_case said;
    try {
      said = parse_line(given, limits);
    } catch (const input_error& e) {
      fail("line", std::string("is not a one-line form (") + e.what() + ")");
    }
    if (to_line(said) != to_line(r.c))
      fail("line", "says " + given + " but the fields say " + to_line(r.c) + ": fix the fields, or delete \"line\"");
  }
  r.c.q = read_tensor(j, "q", r.c.q_type(), limits);
  r.c.k = read_tensor(j, "k", r.c.k_type(), limits);
  r.c.v = read_tensor(j, "v", r.c.v_type(), limits);
  read_variant_values(j, r.c, limits);
  read_quant_values(j, r.c, limits);
  validate(r.c, true, limits);
  return r;
}

}  // namespace

case_record parse_case_file(std::string_view text, const case_limits& limits) {
  // Only input_error leaves the reader: anything else from a hostile file
  // (allocation failure, a library exception we did not foresee) is mapped.
  try {
    return parse_checked(text, limits);
  } catch (const input_error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw input_error("file", "out of memory while reading the case");
  } catch (const json::exception& e) {
    throw input_error("json", strip_nlohmann_tag(e.what()));
  } catch (const std::exception& e) {
    throw input_error("file", e.what());
  }
}

case_record read_case_file(const std::string& path, const case_limits& limits) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw input_error(path, "is a directory, not a case file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw input_error(path, std::string("cannot open: ") + std::strerror(errno));
  // Read in chunks with the cap checked as we go: the size of a pipe or a
  // growing file is not known up front.
  std::string text;
  char chunk[1 << 16];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    text.append(chunk, static_cast<std::size_t>(in.gcount()));
    if (static_cast<std::int64_t>(text.size()) > limits.max_bytes)
      throw input_error(path, "larger than max_bytes=" + std::to_string(limits.max_bytes));
  }
  if (in.bad()) throw input_error(path, "read failed (a directory?)");
  try {
    return parse_case_file(text, limits);
  } catch (const input_error& e) {
    throw input_error(e.field(), std::string(e.what()).substr(e.field().size() + 2) + " (in " + path + ")");
  }
}

}  // namespace attncheck
