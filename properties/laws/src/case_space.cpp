#include "attncheck/case_space.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace attncheck {

namespace {

// rapidcheck scales gen::inRange with the test size (0 at the first case, 100
// at the last), so drawn at the default size 97% of cases would have D <= 5.
// Every raw choice is drawn at full size instead; shrinking works on the
// drawn integers as usual, toward 0, which every mapping below sends to the
// smallest choice.
constexpr int full_size = rc::kNominalSize;

// Head sizes of prefill fast paths: multiples of 8.
constexpr std::int64_t vector_dims[] = {8, 16, 32, 64, 80, 96, 128, 192, 256};
// Group sizes and KV head counts beyond the small ones: G up to 16, Hq up to 64.
constexpr std::int64_t groups[] = {1, 2, 3, 4, 8, 16};
constexpr std::int64_t kv_heads[] = {1, 2, 3, 4, 8};

// Shares of the regimes, out of 100 (docs/distribution.md).
constexpr int small_share = 40, hint_share = 20, decode_share = 15, prefill_share = 15;  // wide heads: the rest (10)

// Explicit scales: index 0 (most cases) keeps the default 1/sqrt(D).
float explicit_scale(int pick, std::int64_t d) {
  const float def = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  switch (pick) {
    case 1: return -def;    // negative: the maximum becomes the minimum
    case 2: return 0.0f;    // zero: uniform weights
    case 3: return 1e-30f;  // tiny: scores near f32's underflow
    case 4: return 3.0f;    // non-power-of-two, > 1
    case 5: return 0.3f;    // non-power-of-two, < 1
    case 6: return 1e4f;    // huge: near one-hot weights
    case 7: return -0.7f;
    case 8: return 1e20f;  // very huge: scores far beyond exp's range
    default: return def;
  }
}

std::vector<std::int64_t> hint_dims(const subject& s) {
  std::vector<std::int64_t> v;
  for (int i = 0; i < ATTNCHECK_SIZE_HINT_SLOTS && s.hints().head_dims[i]; ++i) v.push_back(s.hints().head_dims[i]);
  return v;
}

// A length at a hint: h - 1, h, h + 1, 2h + 1, 2h - 1, or a multiple k h (k = 2..4), shrinking toward h - 1.
std::int64_t at_hint(std::int64_t h, int mode, int jitter) {
  switch (mode % 6) {
    case 0: return std::max<std::int64_t>(1, h - 1);
    case 1: return h;
    case 2: return h + 1;
    case 3: return 2 * h + 1;
    case 4: return std::max<std::int64_t>(1, 2 * h - 1);
    default: return h * (2 + jitter % 3);
  }
}

// 1 .. 8192, about log-uniform: 2^e plus a jitter below 2^e.
std::int64_t log_length(int pick, int jitter) {
  const int e = pick % 14;
  const std::int64_t base = std::int64_t{1} << e;
  return base + (jitter % 4 == 0 ? 0 : jitter % base);
}

attn_case shape_of(const raw_choice& r, const std::vector<std::int64_t>& hints, const std::vector<std::int64_t>& dims_hinted) {
  attn_case c;
  const std::int64_t hint = hints[static_cast<std::size_t>(r.hint) % hints.size()];
  const auto any_dim = [&](int pick) -> std::int64_t {
    // One pick in eight lands on a hinted head size (+-1), the rest on the list.
    if (!dims_hinted.empty() && pick % 8 == 7) {
      const std::int64_t h = dims_hinted[static_cast<std::size_t>(pick / 8) % dims_hinted.size()];
      return std::max<std::int64_t>(1, h + (pick / 16) % 3 - 1);
    }
    return head_dims[pick % n_head_dims];
  };
  if (r.regime < small_share) {
    // Small shapes: most laws' bugs show here, and every failure shrinks here.
    c.b = 1 + r.b % 3;
    c.hkv = 1 + r.hkv % 3;
    c.hq = c.hkv * (1 + r.group % 4);
    c.lq = 1 + r.lq % 12;
    c.lk = 1 + r.lk % 12;
    c.d = head_dims[r.d % n_small_dims];
    c.dv = head_dims[r.dv % n_small_dims];
  } else if (r.regime < small_share + hint_share) {
    // Around the subject's tiles, splits and thresholds.
    c.b = 1 + r.b % 4;
    c.hkv = kv_heads[r.hkv % 4];
    c.hq = c.hkv * groups[r.group % 5];
    c.lk = at_hint(hint, r.hint_mode, r.jitter);
    switch (r.lq_mode % 4) {
      case 0: c.lq = 1 + r.lq % 8; break;
      case 1: c.lq = 1; break;
      case 2: c.lq = c.lk; break;
      default: c.lq = at_hint(hints[static_cast<std::size_t>(r.hint + 1) % hints.size()], r.hint_mode / 6, r.jitter); break;
    }
    c.d = any_dim(r.d);
    c.dv = any_dim(r.dv);
  } else if (r.regime < small_share + hint_share + decode_share) {
    // Decode: one query against a cache of 1..8192 keys, many heads.
    c.b = 1 + r.b % 8;
    c.hkv = kv_heads[r.hkv % 5];
    c.hq = c.hkv * groups[r.group % 6];
    c.lq = 1;
    c.lk = r.lq_mode % 2 ? at_hint(hint, r.hint_mode, r.jitter) : log_length(r.lk, r.jitter);
    c.d = r.d % 2 ? vector_dims[(r.d / 2) % std::size(vector_dims)] : any_dim(r.d / 2);
    c.dv = r.dv % 3 ? c.d : any_dim(r.dv);
  } else if (r.regime < small_share + hint_share + decode_share + prefill_share) {
    // Prefill: Lq >= 64 and Dv % 8 == 0, where tiled fast paths switch on.
    constexpr std::int64_t lqs[] = {64, 65, 96, 127, 128, 129, 192, 256};
    c.b = 1 + r.b % 2;
    c.hkv = kv_heads[r.hkv % 3];
    c.hq = c.hkv * groups[r.group % 4];
    c.lq = r.lq_mode % 3 == 2 ? std::max<std::int64_t>(64, at_hint(hint, r.hint_mode, r.jitter)) : lqs[r.lq % std::size(lqs)];
    c.lk = r.lq_mode % 2 ? c.lq : c.lq + (r.lk % 3 == 0 ? at_hint(hint, r.hint_mode / 6, r.jitter) : r.lk % 70);
    c.d = vector_dims[r.d % std::size(vector_dims)];
    c.dv = r.dv % 3 ? c.d : vector_dims[r.dv % std::size(vector_dims)];
  } else {
    // Wide heads: D and Dv of production models, unequal often.
    c.b = 1 + r.b % 2;
    c.hkv = 1 + r.hkv % 2;
    c.hq = c.hkv * (1 + r.group % 4);
    c.lq = 1 + r.lq % 20;
    c.lk = 1 + r.lk % 70;
    c.d = head_dims[n_small_dims + r.d % (n_head_dims - n_small_dims)];
    c.dv = head_dims[n_small_dims + r.dv % (n_head_dims - n_small_dims)];
  }
  if (c.hq > 64) c.hq = c.hkv * std::max<std::int64_t>(1, 64 / c.hkv);  // Hq <= 64
  return c;
}

// Cuts the shape down until its work fits the cap: batch and heads first,
// then head sizes, lengths last (the lengths are what reach the code paths).
void fit_work(attn_case& c, std::int64_t cap) {
  while (case_work(c) > cap) {
    if (c.b > 1)
      c.b = (c.b + 1) / 2;
    else if (c.hq > c.hkv && c.hq / c.hkv > 1 && c.hkv > 1) {
      c.hq /= c.hkv;
      c.hkv = 1;
    } else if (c.hkv > 1) {
      c.hq /= c.hkv;
      c.hkv = 1;
    } else if (c.hq > 1)
      c.hq = (c.hq + 1) / 2;
    else if (c.d + c.dv > 32) {
      c.d = std::max<std::int64_t>(1, c.d / 2);
      c.dv = std::max<std::int64_t>(1, c.dv / 2);
    } else if (c.lq >= c.lk && c.lq > 1)
      c.lq = (c.lq + 1) / 2;
    else if (c.lk > 1)
      c.lk = (c.lk + 1) / 2;
    else if (c.d + c.dv > 2) {
      c.d = std::max<std::int64_t>(1, c.d / 2);
      c.dv = std::max<std::int64_t>(1, c.dv / 2);
    } else
      break;
  }
}

/// splitmix64: the page shuffle's numbers, from a seed taken from the choices.
std::uint64_t mix(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

template <std::size_t... I>
rc::Gen<raw_choice> build_raw(std::index_sequence<I...>) {
  using rc::gen::inRange;
  using rc::gen::set;
  return rc::gen::resize(
      full_size,
      rc::gen::build<raw_choice>(set(header_choices[I].field, inRange(0, header_choices[I].n))...,
                                 set(&raw_choice::pad, rc::gen::container<std::vector<int>>(pad_count, inRange(0, pad_kinds))),
                                 set(&raw_choice::seed, inRange<std::uint64_t>(0, seed_range))));
}

}  // namespace

std::int64_t case_work(const attn_case& c) { return c.b * c.hq * c.lq * c.lk * (c.d + c.dv); }

std::vector<std::int64_t> hint_lengths(const subject& s) {
  const auto& h = s.hints();
  std::vector<std::int64_t> v;
  for (std::int64_t x : {h.k_tile, h.split_keys, h.q_tile})
    if (x > 0) v.push_back(x);
  for (int i = 0; i < ATTNCHECK_SIZE_HINT_SLOTS && h.lengths[i]; ++i) v.push_back(h.lengths[i]);
  if (v.empty()) v.push_back(64);
  return v;
}

rc::Gen<raw_choice> any_raw_choice() { return build_raw(std::make_index_sequence<std::size(header_choices)>{}); }

namespace {
template <std::size_t... I>
rc::Gen<variant_choice> build_variant(std::index_sequence<I...>) {
  using rc::gen::inRange;
  using rc::gen::set;
  return rc::gen::resize(full_size,
                         rc::gen::build<variant_choice>(set(variant_choices[I].field, inRange(0, variant_choices[I].n))...));
}

// A length of a window or chunk from its raw choice: 0..3 first (what
// shrinking goes to), then each hint below Lk -1, +0, +1 (tile and split
// edges), then fractions of Lk and Lk's own neighbourhood, so that most
// windows and chunks hide keys of the case (a hint past Lk hides nothing).
std::int64_t variant_length(int raw, const std::vector<std::int64_t>& hints, std::int64_t lk) {
  std::vector<std::int64_t> v = {0, 1, 2, 3};
  for (std::int64_t h : hints)
    if (h - 1 < lk)
      for (std::int64_t d : {-1, 0, 1}) v.push_back(std::max<std::int64_t>(0, h + d));
  for (std::int64_t x : {lk / 8, lk / 4, lk / 3, lk / 2, 2 * lk / 3, 3 * lk / 4, lk - 2, lk - 1, lk, lk + 1})
    v.push_back(std::max<std::int64_t>(0, x));
  return v[static_cast<std::size_t>(raw) % v.size()];
}
}  // namespace

rc::Gen<variant_choice> any_variant_choice() { return build_variant(std::make_index_sequence<std::size(variant_choices)>{}); }

variant_choice read_variant_choices(choices& in) {
  variant_choice v;
  for (const variant_choice_spec& c : variant_choices) v.*c.field = static_cast<int>(in.in_range(0, c.n - 1));
  return v;
}

void apply_variants(attn_case& c, const variant_choice& v, std::uint32_t features, const std::vector<std::int64_t>& hints,
                    const static_limits& limits) {
  if (v.any == 0) return;
  score_variants& w = c.variants;
  if ((features & ATTNCHECK_FEATURE3_WINDOW) && v.window > 0) {
    const std::int64_t left = variant_length(v.window_left, hints, c.lk), right = variant_length(v.window_right, hints, c.lk);
    w.window_left = v.window == 2 ? -1 : left;
    w.window_right = v.window == 1 ? -1 : v.window == 4 ? 0 : right;
  }
  if ((features & ATTNCHECK_FEATURE3_CHUNK) && v.chunk == 3)
    w.chunk = std::max<std::int64_t>(1, variant_length(v.chunk_size, hints, c.lk));
  // Caps from below typical scores (|s| ~ 1 for unit values) to far above them.
  constexpr float caps[] = {0, 0.5f, 1, 2, 5, 10, 30, 50};
  if (features & ATTNCHECK_FEATURE3_SOFTCAP) w.softcap = caps[v.softcap];
  if (features & ATTNCHECK_FEATURE3_SINKS) w.sinks = static_cast<sink_kind>(v.sinks);
  if (features & ATTNCHECK_FEATURE3_ALIBI) w.alibi = static_cast<alibi_kind>(v.alibi);
  if ((features & ATTNCHECK_FEATURE3_BIAS) && v.bias > 0) {
    w.bias_shape = {(v.bias_dims & 1) ? c.b : 1, (v.bias_dims & 2) ? c.hq : 1, (v.bias_dims & 4) ? c.lq : 1,
                    (v.bias_dims & 8) ? c.lk : 1};
    w.bias_type = static_cast<dtype>(v.bias_type);
    w.bias_values = static_cast<bias_kind>(v.bias - 1);
  }
  limits.fit_variants(c);
}

namespace {
template <std::size_t... I>
rc::Gen<fp8_choice> build_fp8(std::index_sequence<I...>) {
  using rc::gen::inRange;
  using rc::gen::set;
  return rc::gen::resize(full_size, rc::gen::build<fp8_choice>(set(fp8_choices[I].field, inRange(0, fp8_choices[I].n))...));
}
}  // namespace

rc::Gen<fp8_choice> any_fp8_choice() { return build_fp8(std::make_index_sequence<std::size(fp8_choices)>{}); }

fp8_choice read_fp8_choices(choices& in) {
  fp8_choice f;
  for (const fp8_choice_spec& c : fp8_choices) f.*c.field = static_cast<int>(in.in_range(0, c.n - 1));
  return f;
}

std::vector<dtype> fp8_types_of(const subject& s) {
  std::vector<dtype> v;
  if (!s.has_v4(ATTNCHECK_FEATURE4_FP8)) return v;
  for (dtype t : {dtype::e4m3, dtype::e5m2})
    if (s.desc().dtypes & (1u << static_cast<unsigned>(t))) v.push_back(t);
  return v;
}

void apply_fp8(attn_case& c, const fp8_choice& f, const std::vector<dtype>& fp8_types) {
  if (f.any == 0 || fp8_types.empty() || !c.form.dense() || c.grad) return;
  const auto type_of = [&](int k) -> std::optional<dtype> {
    if (k == 0) return std::nullopt;
    return k == 1 ? fp8_types.front() : fp8_types.back();
  };
  quantization& z = c.quant;
  z.q_type = type_of(f.q), z.k_type = type_of(f.k), z.v_type = type_of(f.v);
  if (!z.any()) z.k_type = z.v_type = fp8_types.front();  // the fp8 KV cache, Q in the case's type
  const auto scale_of = [](const std::optional<dtype>& t, int k) {
    return t ? static_cast<descale_granularity>(k) : descale_granularity::none;
  };
  z.q_scale = scale_of(z.q_type, f.q_scale), z.k_scale = scale_of(z.k_type, f.k_scale), z.v_scale = scale_of(z.v_type, f.v_scale);
  z.descales = static_cast<descale_kind>(f.descales);
}

raw_choice read_choices(choices& in) {
  raw_choice r;
  for (const choice_spec& c : header_choices) r.*c.field = static_cast<int>(in.in_range(0, c.n - 1));
  for (int k = 0; k < pad_count; ++k) r.pad.push_back(static_cast<int>(in.in_range(0, pad_kinds - 1)));
  r.seed = static_cast<std::uint64_t>(in.in_range(0, static_cast<std::int64_t>(seed_range) - 1));
  return r;
}

std::vector<choice_record> header_record(const raw_choice& r) {
  std::vector<choice_record> v;
  for (const choice_spec& c : header_choices) v.push_back({0, c.n - 1, r.*c.field});
  for (int p : r.pad) v.push_back({0, pad_kinds - 1, p});
  v.push_back({0, static_cast<std::int64_t>(seed_range) - 1, static_cast<std::int64_t>(r.seed)});
  return v;
}

case_context context_of(const subject& s, bool allow_masks, bool allow_poison) {
  case_context ctx;
  for (dtype t : {dtype::f32, dtype::f16, dtype::bf16})
    if (s.desc().dtypes & (1u << static_cast<unsigned>(t))) ctx.types.push_back(t);
  ctx.can_causal = allow_masks && s.has(ATTNCHECK_FEATURE_CAUSAL);
  ctx.can_pad = allow_masks && s.has(ATTNCHECK_FEATURE_PADDING);
  ctx.can_mask = allow_masks && s.has(ATTNCHECK_FEATURE_MASK);
  ctx.allow_poison = allow_poison;
  ctx.hints = hint_lengths(s);
  ctx.hinted_dims = hint_dims(s);
  ctx.variants = s.features_v3() & score_variant_bits;
  ctx.limits = s.limits();
  return ctx;
}

attn_case case_of(const raw_choice& r, const case_context& ctx, std::int64_t cap, bool alibi) {
  attn_case c = shape_of(r, ctx.hints, ctx.hinted_dims);
  ctx.limits.fit_shape(c, alibi);
  fit_work(c, cap);
  ctx.limits.fit_shape(c, alibi);  // after fit_work's halving: a limit may cost the cap a little
  c.type = ctx.types.empty() ? dtype::f32 : ctx.types[static_cast<std::size_t>(r.type) % ctx.types.size()];
  c.values = value_order[r.values];
  c.causal = ctx.can_causal && r.causal == 1;
  ctx.limits.fit_causal(c);
  if (ctx.can_pad && r.padding == 1) {
    // Uneven lengths per batch element: full, one short, half, one key, none, or a random cut.
    for (std::int64_t bi = 0; bi < c.b; ++bi) {
      const int p = r.pad[static_cast<std::size_t>(bi) % r.pad.size()];
      std::int64_t n = c.lk;
      switch (p) {
        case 0: break;
        case 1: n = c.lk - 1; break;
        case 2: n = c.lk / 2; break;
        case 3: n = 1; break;
        case 4: n = 0; break;  // an empty cache
        default: n = c.lk - (c.lk * (p - 4)) / 8; break;
      }
      c.key_len.push_back(std::clamp<std::int64_t>(n, 0, c.lk));
    }
  }
  if (ctx.can_mask && (r.mask > 0 || c.values == value_kind::masked_lead)) {
    // Broadcast pattern from four bits: each dim full or 1; the key dim
    // full when the mask must vary along keys.
    const bool keys = (r.mask_dims & 8) || r.mask == 2 || c.values == value_kind::masked_lead;
    c.mask_shape = {(r.mask_dims & 1) ? c.b : 1, (r.mask_dims & 2) ? c.hq : 1, (r.mask_dims & 4) ? c.lq : 1, keys ? c.lk : 1};
  }
  c.layout = static_cast<layout_kind>(r.layout);
  c.poison = ctx.allow_poison ? static_cast<poison_kind>(r.poison) : poison_kind::none;
  // One case in four has an explicit scale.
  if (r.scale >= 27) c.scale = explicit_scale(r.scale - 27, c.d);
  ctx.limits.fit_scale(c);
  c.seed = r.seed;
  return c;
}

cache_plan plan_of(choices& in, const attn_case& c, std::int64_t max_rows) {
  cache_plan plan;
  constexpr std::int64_t page_sizes[] = {1, 2, 3, 4, 5, 7, 8, 16, 17, 32, 64, 128, 256};
  plan.page_size = page_sizes[in.in_range(0, std::size(page_sizes) - 1)];
  const std::int64_t pages = (c.lk + plan.page_size - 1) / plan.page_size * c.b;
  switch (in.in_range(0, 3)) {
    case 0: break;  // the subject's own order
    case 1:
      plan.page_order.resize(static_cast<std::size_t>(pages));
      std::iota(plan.page_order.rbegin(), plan.page_order.rend(), 0);
      break;
    default: {
      plan.page_order.resize(static_cast<std::size_t>(pages));
      std::iota(plan.page_order.begin(), plan.page_order.end(), 0);
      std::uint64_t state = static_cast<std::uint64_t>(in.in_range(0, 0xffffffffll));
      for (std::size_t i = plan.page_order.size(); i > 1; --i) std::swap(plan.page_order[i - 1], plan.page_order[mix(state) % i]);
    }
  }
  std::vector<std::int64_t> left(static_cast<std::size_t>(c.b));
  for (std::int64_t b = 0; b < c.b; ++b) left[static_cast<std::size_t>(b)] = c.valid_keys(b);
  const auto longest = [&] { return *std::max_element(left.begin(), left.end()); };
  std::int64_t rows_left = std::max<std::int64_t>(1, max_rows);
  constexpr std::size_t max_steps = 64;
  // One row stays for the last step, which appends whatever is left.
  while (rows_left > 1 && plan.steps.size() + 1 < max_steps && longest() > 0 && !in.exhausted()) {
    const std::int64_t most = longest();
    std::int64_t chunk = most;
    if (plan.steps.empty()) {
      chunk = in.in_range(1, most);  // the prefill: any length
    } else {
      switch (in.in_range(0, 3)) {
        case 0: chunk = 1; break;                                                // one token (decode)
        case 1: chunk = in.in_range(1, std::min<std::int64_t>(4, most)); break;  // a few
        case 2: chunk = in.in_range(1, most); break;                             // any size
        default: break;                                                          // all that is left
      }
    }
    cache_step step;
    const bool uneven = c.b > 1 && in.in_range(0, 1) == 1;  // each sequence advances by its own count
    for (auto& n : left) {
      const std::int64_t take = std::min(n, uneven ? in.in_range(0, chunk) : chunk);
      step.append.push_back(take);
      n -= take;
    }
    // Queries: usually one per new token; else 1..chunk+2 (the newest tokens,
    // older ones again, rows before the sequence's start).
    const auto q = in.in_range(0, 255);
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

std::int64_t rc_choices::in_range(std::int64_t lo, std::int64_t hi) {
  return *rc::gen::resize(full_size, rc::gen::inRange<std::int64_t>(lo, hi + 1));
}

rc::Gen<cache_plan> any_cache_plan(const attn_case& c, std::int64_t max_rows) {
  return rc::gen::exec([c, max_rows] {
    rc_choices in;
    return plan_of(in, c, max_rows);
  });
}

std::int64_t byte_choices::in_range(std::int64_t lo, std::int64_t hi) {
  // FuzzedDataProvider::ConsumeIntegralInRange, step for step.
  const std::uint64_t range = static_cast<std::uint64_t>(hi) - static_cast<std::uint64_t>(lo);
  std::uint64_t result = 0;
  for (std::size_t offset = 0; offset < 64 && (range >> offset) > 0 && left_ != 0; offset += 8)
    result = (result << 8) | data_[--left_];
  if (range != std::numeric_limits<std::uint64_t>::max()) result %= range + 1;
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(lo) + result);
}

std::int64_t recording_choices::in_range(std::int64_t lo, std::int64_t hi) {
  const std::int64_t v = inner_.in_range(lo, hi);
  log_.push_back({lo, hi, v});
  return v;
}

std::vector<std::uint8_t> encode_choices(const std::vector<choice_record>& log) {
  std::vector<std::uint8_t> bytes;
  for (auto it = log.rbegin(); it != log.rend(); ++it) {
    const std::uint64_t range = static_cast<std::uint64_t>(it->hi) - static_cast<std::uint64_t>(it->lo);
    const std::uint64_t x = static_cast<std::uint64_t>(it->value) - static_cast<std::uint64_t>(it->lo);
    int n = 0;
    for (std::size_t offset = 0; offset < 64 && (range >> offset) > 0; offset += 8) ++n;
    // Read most significant byte first from the end: in memory, least significant first.
    for (int k = 0; k < n; ++k) bytes.push_back(static_cast<std::uint8_t>(x >> (8 * k)));
  }
  return bytes;
}

}  // namespace attncheck
