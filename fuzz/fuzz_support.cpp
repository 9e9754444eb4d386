#include "fuzz_support.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <numeric>
#include <string_view>
#include <vector>

#include "attncheck/bundled_subjects.hpp"
#include "attncheck/case_file.hpp"
#include "attncheck/environment.hpp"
#include "attncheck/check.hpp"
#include "attncheck/failure_report.hpp"
#include "attncheck/oracle.hpp"

namespace attncheck::fuzz {

namespace {

[[noreturn]] void bad_setting(const std::string& what) {
  std::fprintf(stderr, "ATTNCHECK_FUZZ: %s (docs/fuzz.md lists the keys)\n", what.c_str());
  std::exit(2);
}

bool flag_value(std::string_view key, std::string_view v) {
  if (v == "1") return true;
  if (v == "0") return false;
  bad_setting(std::string(key) + "=" + std::string(v) + ": expected 0 or 1");
}

settings parse_settings() {
  // The variables these settings replace: one set by habit would otherwise do nothing.
  for (const char* retired : {"ATTNCHECK_FUZZ_WRITE_CASE", "ATTNCHECK_FUZZ_VERBOSE", "ATTNCHECK_FUZZ_EXPECT_LAW",
                              "ATTNCHECK_FUZZ_EXPECT_WHY", "ATTNCHECK_FUZZ_STRUCTURAL"})
    if (!environment(retired).empty())
      bad_setting(std::string(retired) + " is retired: set ATTNCHECK_FUZZ=key=value,... instead");
  settings r;
  std::vector<std::pair<std::string, std::string>> fields;
  try {
    fields = parse_key_values(environment("ATTNCHECK_FUZZ"), "ATTNCHECK_FUZZ");
  } catch (const input_error& e) {
    bad_setting(std::string(e.what()).substr(e.field().size() + 2));
  }
  for (const auto& [key, value] : fields) {
    if (key == "expect_law")
      r.expect_law = value;
    else if (key == "expect_why")
      r.expect_why = value;
    else if (key == "write_case")
      r.write_case = value;
    else if (key == "verbose")
      r.verbose = flag_value(key, value);
    else if (key == "structural")
      r.structural = flag_value(key, value);
    else
      bad_setting("unknown key '" + key + "' (expect_law, expect_why, write_case, verbose, structural)");
  }
  return r;
}

}  // namespace

const settings& config() {
  static const settings s = parse_settings();
  return s;
}

const subject& fuzz_subject() {
  static const std::shared_ptr<subject> s = [] {
    const std::string& env = environment("ATTNCHECK_FUZZ_SUBJECT");
    const std::string spec = !env.empty() ? env : builtin_tiny;
    try {
      return subject::load(spec);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ATTNCHECK_FUZZ_SUBJECT: %s\n", e.what());
      std::exit(2);
    }
  }();
  return *s;
}

namespace {

/// Values that hide bugs, as bit patterns of type t: exact dyadics (sums and
/// products exact, so bitwise laws and the bound are sharp), then the type's
/// edges: +-0, extremes, the smallest normal and subnormal, +-inf, NaNs
/// (quiet, with a payload, signalling), and logits near exp's f32 overflow.
std::uint32_t interesting_bits(dtype t, std::uint8_t pick) {
  constexpr int dyadic = 17;  // k/4 for k in [-8, 8]
  if (pick % 32 < dyadic) return encode(t, (static_cast<int>(pick % 32) - 8) / 4.0);
  const bool f32 = t == dtype::f32, f16 = t == dtype::f16;
  const double min_normal = f16 ? 0x1p-14 : 0x1p-126;
  switch (pick % 32 - dyadic) {
    case 0: return encode(t, -0.0);
    case 1: return encode(t, largest_finite(t));
    case 2: return encode(t, -largest_finite(t));
    case 3: return encode(t, min_normal);
    case 4: return encode(t, -min_normal);
    case 5: return encode(t, smallest_subnormal(t));
    case 6: return encode(t, -smallest_subnormal(t));
    case 7: return f32 ? 0x7f800000u : f16 ? 0x7c00u : 0x7f80u;   // +inf
    case 8: return f32 ? 0xff800000u : f16 ? 0xfc00u : 0xff80u;   // -inf
    case 9: return f32 ? 0x7fc00000u : f16 ? 0x7e00u : 0x7fc0u;   // quiet NaN
    case 10: return f32 ? 0xffc0beefu : f16 ? 0xfe5au : 0xffd3u;  // negative NaN with a payload
    case 11: return f32 ? 0x7f800001u : f16 ? 0x7c01u : 0x7f81u;  // signalling NaN
    case 12: return encode(t, 88.75);                             // exp overflows f32 just above 88.72
    case 13: return encode(t, -103.5);                            // exp underflows to a subnormal, then to 0
    default: return encode(t, 1e4 * ((pick & 1) ? -1 : 1));
  }
}

/// A finite value with a random mantissa and a modest exponent: products of a
/// few stay far from overflow, so the bound stays finite and sharp.
std::uint32_t modest_bits(dtype t, FuzzedDataProvider& in) {
  const auto mant = in.ConsumeIntegral<std::uint32_t>();
  const int e = in.ConsumeIntegralInRange<int>(-12, 12);
  const double m = 1.0 + static_cast<double>(mant & 0x7fffffu) * 0x1p-23;
  return encode(t, std::ldexp((mant >> 31) ? -m : m, e));
}

std::uint32_t raw_bits(dtype t, FuzzedDataProvider& in) {
  const auto r = in.ConsumeIntegral<std::uint32_t>();
  return t == dtype::f32 ? r : (r & 0xffffu);
}

void set_element(tensor& t, std::int64_t linear, std::uint32_t bits) {
  const auto& s = t.shape;
  const std::int64_t x = linear % s[3], g = linear / s[3] % s[2], j = linear / (s[3] * s[2]) % s[1],
                     b = linear / (s[3] * s[2] * s[1]);
  t.set_bits(b, j, g, x, bits);
}

// Padding, boolean mask (when allowed) and scale of a header, in the byte
// order both input formats share.
void decode_masks_and_scale(attn_case& c, FuzzedDataProvider& in, const subject& s, bool allow_mask) {
  if (s.has(ATTNCHECK_FEATURE_PADDING) && in.ConsumeBool())
    for (std::int64_t b = 0; b < c.b; ++b) c.key_len.push_back(in.ConsumeIntegralInRange<std::int64_t>(0, c.lk));
  if (allow_mask && s.has(ATTNCHECK_FEATURE_MASK) && in.ConsumeBool()) {
    const std::array<std::int64_t, 4> full{c.b, c.hq, c.lq, c.lk};
    for (int i = 0; i < 4; ++i)
      c.mask_shape[static_cast<std::size_t>(i)] = in.ConsumeBool() ? full[static_cast<std::size_t>(i)] : 1;
  }
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0: break;  // default 1/sqrt(D)
    case 1: c.scale = std::ldexp(in.ConsumeBool() ? -1.0f : 1.0f, in.ConsumeIntegralInRange<int>(-6, 6)); break;
    case 2: c.scale = in.ConsumeFloatingPointInRange<float>(-16.0f, 16.0f); break;
    default: {
      constexpr float edge[] = {0.0f, -0.0f, 1e-30f, 1e3f};  // all scores 0; tiny; huge logits
      c.scale = in.PickValueInArray(edge);
    }
  }
}

}  // namespace

attn_case decode_header(FuzzedDataProvider& in, const shape_caps& caps, const subject& s) {
  attn_case c;
  std::vector<dtype> types;
  for (dtype t : {dtype::f32, dtype::f16, dtype::bf16})
    if (s.desc().dtypes & (1u << static_cast<unsigned>(t))) types.push_back(t);
  c.type = types.empty() ? dtype::f32 : types[in.ConsumeIntegralInRange<std::size_t>(0, types.size() - 1)];
  c.lk = in.ConsumeIntegralInRange<std::int64_t>(1, caps.k_len);
  c.lq = in.ConsumeIntegralInRange<std::int64_t>(1, caps.q_len);
  c.d = in.ConsumeIntegralInRange<std::int64_t>(1, caps.head_dim);
  c.dv = in.ConsumeIntegralInRange<std::int64_t>(1, caps.head_dim);
  // The batch and head counts share what the work cap leaves (at least one each).
  const std::int64_t rows = std::max<std::int64_t>(1, caps.work / (c.lq * c.lk * (c.d + c.dv + 8)));
  c.b = in.ConsumeIntegralInRange<std::int64_t>(1, std::clamp<std::int64_t>(rows, 1, caps.batch));
  c.hkv = in.ConsumeIntegralInRange<std::int64_t>(1, std::clamp<std::int64_t>(rows / c.b, 1, caps.kv_heads));
  c.hq = c.hkv * in.ConsumeIntegralInRange<std::int64_t>(1, std::clamp<std::int64_t>(rows / (c.b * c.hkv), 1, caps.group));

  c.causal = s.has(ATTNCHECK_FEATURE_CAUSAL) && in.ConsumeBool();
  decode_masks_and_scale(c, in, s, true);
  c.layout = static_cast<layout_kind>(in.ConsumeIntegralInRange<int>(0, 2));
  c.values = static_cast<value_kind>(in.ConsumeIntegralInRange<int>(0, 7));
  c.poison = static_cast<poison_kind>(in.ConsumeIntegralInRange<int>(0, 2));
  c.seed = in.ConsumeIntegral<std::uint64_t>();
  return c;
}

namespace {

/// A length in [1, hi]: half the time small (1..17, the tiny tiles' edges
/// and one 8-wide vector + 1), a quarter a power of two from 16 to 8192 or a
/// neighbour (production tiles and split sizes), a quarter anywhere. A value
/// over hi wraps around (modulo), so the work cap spreads lengths instead of
/// piling them at the cap.
std::int64_t decode_length(FuzzedDataProvider& in, std::int64_t hi) {
  hi = std::max<std::int64_t>(1, hi);
  const auto sel = in.ConsumeIntegral<std::uint8_t>();
  std::int64_t v = 0;
  if (sel < 128)
    v = 1 + sel % 17;
  else if (sel < 192)
    v = (std::int64_t{16} << (sel % 10)) + in.ConsumeIntegralInRange<int>(-1, 1);
  else
    v = 1 + static_cast<std::int64_t>(in.ConsumeIntegral<std::uint16_t>());
  return v <= hi ? v : 1 + (v - 1) % hi;
}

std::int64_t isqrt(std::int64_t n) {
  auto r = static_cast<std::int64_t>(std::sqrt(static_cast<double>(n)));
  while (r * r > n) --r;
  while ((r + 1) * (r + 1) <= n) ++r;
  return r;
}

/// splitmix64: the page shuffle's numbers, from a seed taken from the bytes.
std::uint64_t mix(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

std::int64_t row_cost(const attn_case& c) { return c.lk * (c.d + c.dv + 8) + 64 * c.dv; }

bool is_v2(const std::uint8_t* data, std::size_t size) {
  return size >= sizeof v2_magic && std::memcmp(data, v2_magic, sizeof v2_magic) == 0;
}

const char* name(input_mode m) {
  switch (m) {
    case input_mode::one_shot: return "one-shot";
    case input_mode::decode: return "decode";
    case input_mode::cache: return "cache";
  }
  return "?";
}

header_v2 decode_header_v2(FuzzedDataProvider& in, const reach_caps& caps, const subject& s, bool lq_is_lk) {
  header_v2 h;
  attn_case& c = h.c;
  input_mode& mode = h.mode;
  mode = static_cast<input_mode>(in.ConsumeIntegralInRange<int>(0, caps.cache ? 2 : 1));
  if (mode == input_mode::cache && !s.has(ATTNCHECK_FEATURE_CACHE)) mode = input_mode::one_shot;
  if (lq_is_lk && mode == input_mode::decode) mode = input_mode::one_shot;
  std::vector<dtype> types;
  for (dtype t : {dtype::f32, dtype::f16, dtype::bf16})
    if (s.desc().dtypes & (1u << static_cast<unsigned>(t))) types.push_back(t);
  c.type = types.empty() ? dtype::f32 : types[in.ConsumeIntegralInRange<std::size_t>(0, types.size() - 1)];
  // This input's share of the cap: most inputs stay small, so the fuzzer
  // keeps its pace; a few may use all of it (docs/fuzz.md, "Input formats").
  const auto budget = in.ConsumeIntegral<std::uint8_t>();
  const std::int64_t work = h.work = budget < 224 ? caps.work / 100 : budget < 252 ? caps.work / 10 : caps.work;
  c.d = in.PickValueInArray(head_sizes);
  c.dv = in.PickValueInArray(head_sizes);
  const std::int64_t w = c.d + c.dv + 8;  // per query-key pair: D + Dv multiply-adds, exp counted as 8
  const std::int64_t pairs = std::max<std::int64_t>(1, work / w);
  switch (mode) {
    case input_mode::decode:
      c.lk = decode_length(in, std::min(caps.decode_k_len, pairs));
      c.lq = 1;
      break;
    case input_mode::cache:  // Lq = Lk below; the work counts the plan's query rows, at least one
      c.lk = decode_length(in, std::min(caps.k_len, pairs));
      c.lq = 1;
      break;
    case input_mode::one_shot:
      if (lq_is_lk) {
        c.lk = c.lq = decode_length(in, std::min(caps.k_len, isqrt(pairs)));
      } else {
        c.lk = decode_length(in, std::min(caps.k_len, pairs));
        c.lq = decode_length(in, std::min(caps.q_len, work / row_cost(c)));
      }
      break;
  }
  // The batch and heads share what the work cap leaves (at least one each).
  // A cache case holds one Q row per position: B*Hq*Lk*Lk stays within the
  // pairs validate() allows (its one-shot form runs through the cache law).
  std::int64_t rows = std::max<std::int64_t>(1, work / (c.lq * row_cost(c)));
  if (mode == input_mode::cache) rows = std::min(rows, std::max<std::int64_t>(1, case_limits{}.max_pairs / (c.lk * c.lk)));
  c.b = in.ConsumeIntegralInRange<std::int64_t>(1, std::clamp<std::int64_t>(rows, 1, caps.batch));
  const std::int64_t g = in.ConsumeIntegralInRange<std::int64_t>(1, std::clamp<std::int64_t>(rows / c.b, 1, caps.group));
  c.hkv = in.ConsumeIntegralInRange<std::int64_t>(1, std::clamp<std::int64_t>(rows / (c.b * g), 1, caps.q_heads / g));
  c.hq = c.hkv * g;
  if (mode == input_mode::cache) c.lq = c.lk;  // one Q row per position of the sequence

  // The cache entry point is causal and takes no boolean mask (docs/spec.md "KV cache").
  c.causal = mode == input_mode::cache || (s.has(ATTNCHECK_FEATURE_CAUSAL) && in.ConsumeBool());
  decode_masks_and_scale(c, in, s, mode != input_mode::cache);
  c.layout = static_cast<layout_kind>(in.ConsumeIntegralInRange<int>(0, 2));
  c.values = static_cast<value_kind>(in.ConsumeIntegralInRange<int>(0, static_cast<int>(value_kind::max_v)));
  // No poison for a cache case: its only unused slots are keys past a
  // sequence's end, which never reach the cache, and finding the unused
  // slots of a Q with one row per position costs B*Hq*Lk*Lk.
  if (mode != input_mode::cache) c.poison = static_cast<poison_kind>(in.ConsumeIntegralInRange<int>(0, 2));
  c.seed = in.ConsumeIntegral<std::uint64_t>();
  return h;
}

cache_plan decode_cache_plan(FuzzedDataProvider& in, const attn_case& c, std::int64_t max_rows) {
  cache_plan plan;
  constexpr std::int64_t page_sizes[] = {1, 2, 3, 4, 5, 7, 8, 16, 17, 32, 64, 128, 256};
  plan.page_size = in.PickValueInArray(page_sizes);
  const std::int64_t pages = (c.lk + plan.page_size - 1) / plan.page_size * c.b;
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0: break;  // the subject's own order
    case 1:
      plan.page_order.resize(static_cast<std::size_t>(pages));
      std::iota(plan.page_order.rbegin(), plan.page_order.rend(), 0);
      break;
    default: {
      plan.page_order.resize(static_cast<std::size_t>(pages));
      std::iota(plan.page_order.begin(), plan.page_order.end(), 0);
      std::uint64_t state = in.ConsumeIntegral<std::uint64_t>();
      for (std::size_t i = plan.page_order.size(); i > 1; --i) std::swap(plan.page_order[i - 1], plan.page_order[mix(state) % i]);
    }
  }
  std::vector<std::int64_t> left(static_cast<std::size_t>(c.b));
  for (std::int64_t b = 0; b < c.b; ++b) left[static_cast<std::size_t>(b)] = c.valid_keys(b);
  const auto longest = [&] { return *std::max_element(left.begin(), left.end()); };
  std::int64_t rows_left = std::max<std::int64_t>(1, max_rows);
  constexpr std::size_t max_steps = 64;
  // One row stays for the last step, which appends whatever is left.
  while (rows_left > 1 && plan.steps.size() + 1 < max_steps && longest() > 0 && in.remaining_bytes() > 0) {
    const std::int64_t most = longest();
    std::int64_t chunk = most;
    if (plan.steps.empty()) {
      chunk = in.ConsumeIntegralInRange<std::int64_t>(1, most);  // the prefill: any length
    } else {
      switch (in.ConsumeIntegralInRange<int>(0, 3)) {
        case 0: chunk = 1; break;                                                                            // one token (decode)
        case 1: chunk = in.ConsumeIntegralInRange<std::int64_t>(1, std::min<std::int64_t>(4, most)); break;  // a few
        case 2: chunk = in.ConsumeIntegralInRange<std::int64_t>(1, most); break;                             // any size
        default: break;                                                                                      // all that is left
      }
    }
    cache_step step;
    const bool uneven = c.b > 1 && in.ConsumeBool();  // each sequence advances by its own count
    for (auto& n : left) {
      const std::int64_t take = std::min(n, uneven ? in.ConsumeIntegralInRange<std::int64_t>(0, chunk) : chunk);
      step.append.push_back(take);
      n -= take;
    }
    // Queries: usually one per new token; else 1..chunk+2 (the newest tokens,
    // older ones again, rows before the sequence's start).
    const auto q = in.ConsumeIntegral<std::uint8_t>();
    const std::int64_t most_rows = rows_left - 1;
    step.lq = (q & 1) ? std::min(chunk, most_rows) : 1 + (q >> 1) % std::min(chunk + 2, most_rows);
    rows_left -= step.lq;
    plan.steps.push_back(std::move(step));
  }
  if (longest() > 0 || plan.steps.empty()) {
    cache_step last;
    last.append = left;  // the rest of every sequence (all zero when every sequence is empty)
    last.lq = std::clamp<std::int64_t>(longest(), 1, rows_left);
    plan.steps.push_back(std::move(last));
  }
  return plan;
}

std::int64_t plan_rows(const cache_plan& plan) {
  std::int64_t rows = 0;
  for (const auto& st : plan.steps) rows += st.lq;
  return rows;
}

attn_case cache_run_as_case(const attn_case& c, const cache_plan& plan) {
  attn_case o = c;
  const std::int64_t rows = plan_rows(plan);
  o.lq = rows;
  o.causal = false;  // the mask below says what each row sees
  o.mask_shape = {c.b, 1, rows, c.lk};
  o.mask.assign(static_cast<std::size_t>(c.b * rows * c.lk), 0);
  o.q = make_tensor(c.type, {c.b, rows, c.hq, c.d}, c.layout);
  std::vector<std::int64_t> filled(static_cast<std::size_t>(c.b), 0);
  std::int64_t row0 = 0;
  for (const auto& step : plan.steps) {
    for (std::int64_t b = 0; b < c.b; ++b) filled[static_cast<std::size_t>(b)] += step.append[static_cast<std::size_t>(b)];
    for (std::int64_t b = 0; b < c.b; ++b)
      for (std::int64_t i = 0; i < step.lq; ++i) {
        // As subject::attend_cached: row i of the step is the query at this
        // position, Q row pos - n[b] + Lq of the case; before the sequence it sees nothing.
        const std::int64_t pos = filled[static_cast<std::size_t>(b)] - step.lq + i, r = row0 + i;
        if (pos < 0) continue;
        const std::int64_t from = pos - c.valid_keys(b) + c.lq;
        for (std::int64_t h = 0; h < c.hq; ++h)
          for (std::int64_t x = 0; x < c.d; ++x) o.q.set_bits(b, r, h, x, c.q.bits_at(b, from, h, x));
        std::fill_n(o.mask.begin() + (b * rows + r) * c.lk, pos + 1, std::uint8_t{1});
      }
    row0 += step.lq;
  }
  return o;
}

std::string describe(const cache_plan& plan) {
  std::string s = "page size " + std::to_string(plan.page_size) + ", pages " +
                  (plan.page_order.empty() ? std::string("in the subject's order")
                   : plan.page_order.size() > 1 && plan.page_order[0] > plan.page_order[1] &&
                           std::is_sorted(plan.page_order.rbegin(), plan.page_order.rend())
                       ? std::string("reversed")
                       : std::string("shuffled")) +
                  ", steps (append per sequence / query rows):";
  for (const auto& st : plan.steps) {
    s += " [";
    for (std::size_t b = 0; b < st.append.size(); ++b) s += (b ? "," : "") + std::to_string(st.append[b]);
    s += "]/" + std::to_string(st.lq);
  }
  return s;
}

void decode_values(FuzzedDataProvider& in, int value_patches, attn_case& c) {
  materialize(c);
  if (c.has_mask() && in.ConsumeBool())  // mask bits from the bytes, 8 per byte
    for (std::size_t i = 0; i < c.mask.size(); i += 8) {
      const auto byte = in.ConsumeIntegral<std::uint8_t>();
      for (std::size_t k = 0; k < 8 && i + k < c.mask.size(); ++k) c.mask[i + k] = (byte >> k) & 1;
    }
  tensor* const ts[] = {&c.q, &c.k, &c.v};
  // Dense runs: whole tensors from the table of interesting values, one byte each.
  const auto dense = in.ConsumeIntegral<std::uint8_t>();
  for (int i = 0; i < 3; ++i) {
    if (!(dense & (1u << i))) continue;
    for (std::int64_t e = 0; e < ts[i]->elements() && in.remaining_bytes() > 0; ++e)
      set_element(*ts[i], e, interesting_bits(c.type, in.ConsumeIntegral<std::uint8_t>()));
  }
  // Patches: single elements with interesting, modest or raw bit patterns.
  for (int p = 0; p < value_patches && in.remaining_bytes() >= 2; ++p) {
    tensor& t = *ts[in.ConsumeIntegralInRange<int>(0, 2)];
    const std::int64_t e = in.ConsumeIntegralInRange<std::int64_t>(0, t.elements() - 1);
    std::uint32_t bits = 0;
    switch (in.ConsumeIntegralInRange<int>(0, 3)) {
      case 0:
      case 1: bits = interesting_bits(c.type, in.ConsumeIntegral<std::uint8_t>()); break;
      case 2: bits = modest_bits(c.type, in); break;
      default: bits = raw_bits(c.type, in);
    }
    set_element(t, e, bits);
  }
}

namespace {

// Minimizing a crash keeps it the same finding: with expect_law (and
// expect_why, a substring of the message) set, other failures count as
// passes, so libFuzzer cannot drift to another bug.
bool expected_finding(const std::string& law, const law_outcome& o) {
  const settings& cfg = config();
  if (!cfg.expect_law.empty() && law != cfg.expect_law) return false;
  if (!cfg.expect_why.empty() && o.message.find(cfg.expect_why) == std::string::npos) return false;
  return true;
}

}  // namespace

void expect_pass(const std::string& law, const subject& s, const attn_case& c, const law_outcome& o, const std::string& context) {
  const settings& cfg = config();
  if (o.v != verdict::fail || !expected_finding(law, o)) {
    if (cfg.verbose)
      std::cerr << (o.v == verdict::pass   ? "pass "
                    : o.v == verdict::fail ? "fail (not the expected finding) "
                                           : "skip ")
                << law << " " << to_line(c) << " max obs/bound " << o.max_ratio << ", " << o.compared << " judged"
                << (o.vacuous.empty() ? "" : " (vacuous: " + o.vacuous + ")")
                << (o.v == verdict::skip ? " (" + o.message + ")" : "") << (context.empty() ? "" : "; " + context) << "\n";
    return;
  }
  failure_report f;
  f.kind = o.kind;
  f.law = law;
  f.tag = "(fuzz)";
  f.subject_name = s.name(), f.subject_spec = s.spec();
  f.case_line = to_line(c);
  f.run = context;
  f.message = o.message.substr(0, 2000);
  if (!o.worst.where.empty()) f.worst = o.worst.describe();
  if (!cfg.write_case.empty()) {
    try {
      const std::string note = "fuzz: " + (context.empty() ? "" : context + ": ") + o.message.substr(0, 2000);
      write_case_file(cfg.write_case, case_record{c, law, s.name(), note});
      f.saved_file = cfg.write_case;
      // The attncheck of this build (the fuzz build's, or the ordinary one's), from the running harness.
      f.replay = replay_command(cfg.write_case, s.spec());
    } catch (const std::exception& e) {
      f.not_saved = e.what();
    }
  }
  std::cerr << print_failure(f) << std::flush;
  std::abort();  // libFuzzer saves the input as a crash
}

std::size_t structural_mutate(std::uint8_t* data, std::size_t size, std::size_t max_size, unsigned seed) {
  std::uint32_t r = seed * 2654435761u + 0x9e3779b9u;
  auto next = [&r] { return r = r * 1664525u + 1013904223u, r >> 8; };
  // Both formats read the header from the end: v1's 16 bytes (the law pick,
  // dtype, Lk, Lq, D, Dv, B, Hkv, G, then flags); v2's mode, dtype, D, Dv,
  // Lk and Lq (1-3 bytes each), B, G, Hkv, flags, then the cache plan.
  const bool v2 = is_v2(data, size);
  const std::size_t body = v2 ? size - sizeof v2_magic : size;
  if (!config().structural || body == 0 || next() % 2 == 0) return LLVMFuzzerMutate(data, size, max_size);
  const std::size_t header_bytes = v2 ? 24 : 16;
  const std::size_t k = next() % std::min(body, header_bytes);
  std::uint8_t& b = data[size - 1 - k];
  switch (next() % 3) {
    case 0: ++b; break;      // a length, head count or dim one larger
    case 1: --b; break;      // one smaller
    default: b ^= 1; break;  // a flag flipped
  }
  return size;
}

bool bound_is_finite_everywhere(const subject& s, const attn_case& c) {
  const oracle_result r = reference(c, oracle_options_for(s, c, oracle_precision::binary64));
  for (std::size_t k = 0; k < r.o.size(); ++k)
    if (!std::isnan(r.o[k]) && !std::isfinite(r.o_bound[k])) return false;
  for (std::size_t k = 0; k < r.lse.size(); ++k)
    if (!std::isnan(r.lse[k]) && !std::isinf(r.lse[k]) && !std::isfinite(r.lse_bound[k])) return false;
  return true;
}

}  // namespace attncheck::fuzz
