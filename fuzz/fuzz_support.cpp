#include "fuzz_support.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>
#include <string_view>
#include <vector>

#include "attncheck/bundled_subjects.hpp"
#include "attncheck/case_file.hpp"
#include "attncheck/environment.hpp"
#include "attncheck/check.hpp"
#include "attncheck/failure_report.hpp"
#include "attncheck/oracle.hpp"
#include "attncheck/run_config.hpp"

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
  const double min_normal = smallest_subnormal(t) / unit_roundoff(t) / 2;
  const double inf = std::numeric_limits<double>::infinity();
  if (is_fp8(t)) {  // no payloads to speak of: E4M3FN has one NaN per sign and no infinity (it encodes as the NaN)
    switch (pick % 32 - dyadic) {
      case 7: return encode(t, inf);
      case 8: return encode(t, -inf);
      case 9: return encode(t, std::nan(""));
      case 10: return encode(t, -std::nan(""));
      case 11: return t == dtype::e5m2 ? 0x7du : 0x7fu;  // e5m2's NaN with payload 01
      default: break;
    }
  }
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
  const double x = std::ldexp((mant >> 31) ? -m : m, e);
  return encode(t, std::clamp(x, -largest_finite(t), largest_finite(t)));  // e4m3's largest is 448: stay finite
}

std::uint32_t raw_bits(dtype t, FuzzedDataProvider& in) {
  const auto r = in.ConsumeIntegral<std::uint32_t>();
  return t == dtype::f32 ? r : is_fp8(t) ? (r & 0xffu) : (r & 0xffffu);
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

bool is_v3(const std::uint8_t* data, std::size_t size) {
  return size >= sizeof v3_magic && std::memcmp(data, v3_magic, sizeof v3_magic) == 0;
}

bool is_v4(const std::uint8_t* data, std::size_t size) {
  return size >= sizeof v4_magic && std::memcmp(data, v4_magic, sizeof v4_magic) == 0;
}

int case_space_version(const std::uint8_t* data, std::size_t size) { return is_v3(data, size) ? 3 : is_v4(data, size) ? 4 : 0; }

const char* name(input_mode m) {
  switch (m) {
    case input_mode::one_shot: return "one-shot";
    case input_mode::cache: return "cache";
  }
  return "?";
}

// As the gate's any_case(): the fp8 choices after the header's (and the
// variants'), only for a one-shot case of a law that draws fp8 and a subject
// that declares it, so every other input keeps its decoding.
void read_fp8(byte_choices& in, case_v3& h, const subject& s, bool fp8) {
  const std::vector<dtype> types = fp8_types_of(s);
  if (!fp8 || types.empty() || h.mode != input_mode::one_shot) return;
  apply_fp8(h.c, read_fp8_choices(in), types);
}

case_v3 decode_case(byte_choices& in, const reach_caps& caps, const subject& s, bool variants, bool fp8) {
  case_v3 h;
  h.mode = static_cast<input_mode>(in.in_range(0, caps.cache ? 1 : 0));
  if (h.mode == input_mode::cache && !s.has(ATTNCHECK_FEATURE_CACHE)) h.mode = input_mode::one_shot;
  // This input's share of the cap: most inputs stay small, so the fuzzer
  // keeps its pace; a few may use all of it (docs/fuzz.md, "Input formats").
  const std::int64_t budget = in.in_range(0, 255);
  h.work = budget < 224 ? caps.work / 100 : budget < 252 ? caps.work / 10 : caps.work;
  const case_context ctx = context_of(s, true, true);  // every mask, poison and value kind
  const raw_choice r = read_choices(in);
  if (variants && ctx.variants != 0 && h.mode == input_mode::one_shot) {
    // As the gate's any_case(): the variant choices after the header's; a
    // case with a variant is capped for the MPFR oracle that judges it.
    const variant_choice v = read_variant_choices(in);
    attn_case probe;
    apply_variants(probe, v, ctx.variants, ctx.hints);
    if (probe.variants.any()) h.work = std::min(h.work, run_default::variant_max_work);
    h.c = case_of(r, ctx, h.work, probe.variants.has_alibi());
    apply_variants(h.c, v, ctx.variants, ctx.hints, ctx.limits);
    read_fp8(in, h, s, fp8);
    return h;
  }
  h.c = case_of(r, ctx, h.work);
  read_fp8(in, h, s, fp8);
  attn_case& c = h.c;
  if (h.mode == input_mode::cache && c.b * c.hq * c.lk * c.lk > case_limits{}.max_pairs) h.mode = input_mode::one_shot;
  if (h.mode != input_mode::cache) return h;
  // The cache entry point is causal and takes no boolean mask (docs/spec.md
  // "KV cache"). No poison: a cache case's only unused slots are keys past a
  // sequence's end, which never reach the cache, and finding the unused
  // slots of a Q with one row per position costs B*Hq*Lk*Lk.
  c.causal = true;
  c.mask_shape = {};
  c.poison = poison_kind::none;
  // The oracle computes the plan's query rows: budget / case_work(Lq = 1) of them.
  c.lq = 1;
  const std::int64_t rows = std::max<std::int64_t>(1, h.work / case_work(c));
  c.lq = c.lk;  // one Q row per position of the sequence
  h.plan = plan_of(in, c, rows);
  return h;
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
      set_element(*ts[i], e, interesting_bits(ts[i]->type, in.ConsumeIntegral<std::uint8_t>()));
  }
  // Patches: single elements with interesting, modest or raw bit patterns.
  for (int p = 0; p < value_patches && in.remaining_bytes() >= 2; ++p) {
    tensor& t = *ts[in.ConsumeIntegralInRange<int>(0, 2)];
    const std::int64_t e = in.ConsumeIntegralInRange<std::int64_t>(0, t.elements() - 1);
    std::uint32_t bits = 0;
    switch (in.ConsumeIntegralInRange<int>(0, 3)) {
      case 0:
      case 1: bits = interesting_bits(t.type, in.ConsumeIntegral<std::uint8_t>()); break;
      case 2: bits = modest_bits(t.type, in); break;
      default: bits = raw_bits(t.type, in);
    }
    set_element(t, e, bits);
  }
  // A shared prefix (docs/spec.md "Paged KV") must stay shared: the patches
  // above write one sequence's slot, and the paged form keeps one copy of each
  // shared slot (written from a sequence that sees it), so every sequence that
  // sees shared key j of head g gets the first such sequence's bits (the
  // dense form's answer must be the paged one's).
  const std::int64_t shared = std::min(c.lk, c.form.shared_pages * c.form.page_size);
  if (c.b < 2 || shared == 0) return;
  const slot_usage usage = used_slots(c);
  for (std::int64_t j = 0; j < shared; ++j)
    for (std::int64_t g = 0; g < c.hkv; ++g) {
      std::int64_t first = -1;
      for (std::int64_t b = 0; b < c.b; ++b) {
        if (!usage.key(c, b, j, g)) continue;
        if (first < 0) {
          first = b;
          continue;
        }
        for (std::int64_t x = 0; x < c.d; ++x) c.k.set_bits(b, j, g, x, c.k.bits_at(first, j, g, x));
        for (std::int64_t x = 0; x < c.dv; ++x) c.v.set_bits(b, j, g, x, c.v.bits_at(first, j, g, x));
      }
    }
}

namespace {

// A spec that loads from any folder: a plugin path made absolute (as the
// gate writes its case files); a registered kind (builtin, naive) as it is.
std::string replayable_spec(const std::string& spec) {
  const std::string where = spec.substr(0, spec.find(':'));
  std::error_code ec;
  if (!std::filesystem::is_regular_file(where, ec)) return spec;
  const auto path = std::filesystem::absolute(where, ec);
  return ec ? spec : path.lexically_normal().string() + spec.substr(where.size());
}

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

std::optional<law_outcome> check_unless_declined(const law& l, const subject& s, const attn_case& c) {
  try {
    return l.check(s, c);
  } catch (const case_declined&) {
    return std::nullopt;
  }
}

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
      // The subject's spec (a plugin's path made absolute), not its display
      // name: `attncheck repro FILE` then replays it without --subject.
      write_case_file(cfg.write_case, case_record{c, law, replayable_spec(s.spec()), note});
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
  // dtype, Lk, Lq, D, Dv, B, Hkv, G, then flags); v3's law pick and mode,
  // budget, then the case space's choices (header_choices, 1-2 bytes each,
  // 8 pad cuts, 4 seed bytes): 40 bytes, then the cache plan; v4's 12 more,
  // one per variant choice (a one-shot input of a law that takes variants).
  const int version = case_space_version(data, size);
  const std::size_t body = version ? size - sizeof v3_magic : size;
  if (!config().structural || body == 0 || next() % 2 == 0) return LLVMFuzzerMutate(data, size, max_size);
  const std::size_t header_bytes = version == 4 ? 52 : version == 3 ? 40 : 16;
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
