#include "fuzz_support.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <vector>

#include "attncheck/case_file.hpp"
#include "attncheck/check.hpp"
#include "attncheck/oracle.hpp"

namespace attncheck::fuzz {

const subject& fuzz_subject() {
  static const std::shared_ptr<subject> s = [] {
    const char* env = std::getenv("ATTNCHECK_FUZZ_SUBJECT");
    const std::string spec = env && *env ? env : "builtin:q_tile=2,k_tile=3,split_keys=6";
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
    case 7: return f32 ? 0x7f800000u : f16 ? 0x7c00u : 0x7f80u;  // +inf
    case 8: return f32 ? 0xff800000u : f16 ? 0xfc00u : 0xff80u;  // -inf
    case 9: return f32 ? 0x7fc00000u : f16 ? 0x7e00u : 0x7fc0u;  // quiet NaN
    case 10: return f32 ? 0xffc0beefu : f16 ? 0xfe5au : 0xffd3u; // negative NaN with a payload
    case 11: return f32 ? 0x7f800001u : f16 ? 0x7c01u : 0x7f81u; // signalling NaN
    case 12: return encode(t, 88.75);   // exp overflows f32 just above 88.72
    case 13: return encode(t, -103.5);  // exp underflows to a subnormal, then to 0
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
  if (s.has(ATTNCHECK_FEATURE_PADDING) && in.ConsumeBool())
    for (std::int64_t b = 0; b < c.b; ++b) c.key_len.push_back(in.ConsumeIntegralInRange<std::int64_t>(0, c.lk));
  if (s.has(ATTNCHECK_FEATURE_MASK) && in.ConsumeBool()) {
    const std::array<std::int64_t, 4> full{c.b, c.hq, c.lq, c.lk};
    for (int i = 0; i < 4; ++i) c.mask_shape[static_cast<std::size_t>(i)] = in.ConsumeBool() ? full[static_cast<std::size_t>(i)] : 1;
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
  c.layout = static_cast<layout_kind>(in.ConsumeIntegralInRange<int>(0, 2));
  c.values = static_cast<value_kind>(in.ConsumeIntegralInRange<int>(0, 7));
  c.poison = static_cast<poison_kind>(in.ConsumeIntegralInRange<int>(0, 2));
  c.seed = in.ConsumeIntegral<std::uint64_t>();
  return c;
}

void decode_values(FuzzedDataProvider& in, const shape_caps& caps, attn_case& c) {
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
  for (int p = 0; p < caps.value_patches && in.remaining_bytes() >= 2; ++p) {
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

// Minimizing a crash keeps it the same finding: with ATTNCHECK_FUZZ_EXPECT_LAW
// (and ATTNCHECK_FUZZ_EXPECT_WHY, a substring of the message) set, other
// failures count as passes, so libFuzzer cannot drift to another bug.
bool expected_finding(const std::string& law, const law_outcome& o) {
  const char* want_law = std::getenv("ATTNCHECK_FUZZ_EXPECT_LAW");
  const char* want_why = std::getenv("ATTNCHECK_FUZZ_EXPECT_WHY");
  if (want_law && *want_law && law != want_law) return false;
  if (want_why && *want_why && o.message.find(want_why) == std::string::npos) return false;
  return true;
}

}  // namespace

void expect_pass(const std::string& law, const subject& s, const attn_case& c, const law_outcome& o) {
  if (o.v != verdict::fail || !expected_finding(law, o)) {
    static const bool verbose = std::getenv("ATTNCHECK_FUZZ_VERBOSE") != nullptr;
    if (verbose)
      std::cerr << (o.v == verdict::pass ? "pass " : "skip ") << law << " " << to_line(c) << " max obs/bound " << o.max_ratio
                << (o.v == verdict::skip ? " (" + o.message + ")" : "") << "\n";
    return;
  }
  std::cerr << "FAIL " << law << " (fuzz)\n"
            << "  subject:  " << s.name() << " (" << s.spec() << ")\n"
            << "  case:     " << to_line(c) << "\n"
            << "  why:      " << o.message.substr(0, 2000) << "\n";
  if (!o.worst.where.empty()) std::cerr << "  worst:    " << o.worst.describe() << "\n";
  if (const char* path = std::getenv("ATTNCHECK_FUZZ_WRITE_CASE"); path && *path) {
    try {
      write_case_file(path, case_record{c, law, s.name(), "fuzz: " + o.message.substr(0, 2000)});
      std::cerr << "  saved:    " << path << "\n"
                << "  replay:   build/attncheck repro " << path << " --subject " << s.spec() << "\n";
    } catch (const std::exception& e) {
      std::cerr << "  not saved: " << e.what() << "\n";
    }
  }
  std::cerr << std::flush;
  std::abort();  // libFuzzer saves the input as a crash
}

std::size_t structural_mutate(std::uint8_t* data, std::size_t size, std::size_t max_size, unsigned seed) {
  static const bool on = [] {
    const char* e = std::getenv("ATTNCHECK_FUZZ_STRUCTURAL");
    return !(e && std::string(e) == "0");
  }();
  std::uint32_t r = seed * 2654435761u + 0x9e3779b9u;
  auto next = [&r] { return r = r * 1664525u + 1013904223u, r >> 8; };
  if (!on || size == 0 || next() % 2 == 0) return LLVMFuzzerMutate(data, size, max_size);
  // The header's fields: the law pick, dtype, Lk, Lq, D, Dv, B, Hkv, G, then flags.
  constexpr std::size_t header_bytes = 16;
  const std::size_t k = next() % std::min(size, header_bytes);
  std::uint8_t& b = data[size - 1 - k];
  switch (next() % 3) {
    case 0: ++b; break;   // a length, head count or dim one larger
    case 1: --b; break;   // one smaller
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
