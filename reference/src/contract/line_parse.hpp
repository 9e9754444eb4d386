// The one-line form's field codecs, shared by its reader and writer
// (line_form.cpp) and the features that own fields (features.cpp).
#pragma once

#include <array>
#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "attncheck/case.hpp"

namespace attncheck::detail {

[[noreturn]] inline void fail(std::string field, const std::string& what) { throw input_error(std::move(field), what); }

inline std::string quoted(std::string_view s) {
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

// A named value (a recipe, a layout, a dtype) by its parser; choices lists the names for the error.
template <class Parse>
auto parse_enum(const char* key, std::string_view text, Parse parse, const char* choices) {
  const auto v = parse(text);
  if (!v) fail(key, quoted(text) + " is not one of " + choices);
  return *v;
}

inline float parse_float(std::string_view key, std::string_view text) {
  float v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ec == std::errc::result_out_of_range) fail(std::string(key), quoted(text) + " is out of f32 range");
  if (ec != std::errc{} || ptr != end || text.empty()) fail(std::string(key), quoted(text) + " is not a number");
  return v;
}

inline std::string float_text(float f) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, f);  // shortest round-trip form
  return std::string(buf, r.ptr);
}

// Splits on sep, keeping empty parts (so ",," and trailing separators are caught).
inline std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == sep) {
      parts.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  return parts;
}

// BxHxIxJ, as mask= and bias= print their broadcast shapes.
inline std::string dims_text(const std::array<std::int64_t, 4>& d) {
  return std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" + std::to_string(d[2]) + "x" + std::to_string(d[3]);
}

// Parses BxHxIxJ, each size >= 1.
inline std::array<std::int64_t, 4> parse_dims(const char* key, std::string_view val) {
  const auto dims = split(val, 'x');
  if (dims.size() != 4) fail(key, "expected BxHxIxJ (four sizes), got " + quoted(val));
  std::array<std::int64_t, 4> out{};
  for (int a = 0; a < 4; ++a) {
    out[a] = parse_int<std::int64_t>(key, dims[a]);
    if (out[a] < 1) fail(key, "dim " + std::to_string(a) + " is " + std::to_string(out[a]) + ", must be >= 1");
  }
  return out;
}

// A list [n0,n1,...] of integers, at most max_dim of them.
inline std::vector<std::int64_t> parse_list(const char* key, std::string_view val, const char* shape, const case_limits& limits) {
  if (val.size() < 2 || val.front() != '[' || val.back() != ']')
    fail(key, std::string("expected ") + shape + ", got " + quoted(val));
  std::vector<std::int64_t> out;
  for (std::string_view n : split(val.substr(1, val.size() - 2), ',')) {
    if (static_cast<std::int64_t>(out.size()) >= limits.max_dim)
      fail(key, "has more than max_dim=" + std::to_string(limits.max_dim) + " entries");
    out.push_back(parse_int<std::int64_t>(key, n));
  }
  return out;
}

inline std::string list_text(const std::vector<std::int64_t>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

}  // namespace attncheck::detail
