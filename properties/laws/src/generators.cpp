#include "attncheck/generators.hpp"

#include <algorithm>
#include <cmath>

namespace attncheck {

namespace {

// rapidcheck scales gen::inRange with the test size (0 at the first case, 100
// at the last), so drawn at the default size 97% of cases would have D <= 5.
// Every raw choice is drawn at full size instead; shrinking works on the
// drawn integers as usual, toward 0, which every mapping below sends to the
// smallest choice.
constexpr int full_size = rc::kNominalSize;

// Raw choices: integers in [0, n) that shrink toward 0.
struct raw_choice {
  int regime = 0;  // 0..99: which shape regime (0 = small)
  int b = 0, hkv = 0, group = 0, lq = 0, lk = 0, d = 0, dv = 0, lq_mode = 0, hint = 0, hint_mode = 0, jitter = 0;
  int type = 0, causal = 0, padding = 0, mask = 0, mask_dims = 0, values = 0, layout = 0, poison = 0, scale = 0;
  std::vector<int> pad;  // per batch element: 0 = full, else a cut
  std::uint64_t seed = 0;
};

// Head sizes: the small ones first (shrinking goes there), then the sizes of
// production models and their neighbours.
constexpr std::int64_t head_dims[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 31, 32, 33, 63, 64, 65, 80, 96, 127, 128, 129, 192, 256};
constexpr int n_small_dims = 10;  // 1..9, 16
constexpr int n_head_dims = static_cast<int>(std::size(head_dims));
// Head sizes of prefill fast paths: multiples of 8.
constexpr std::int64_t vector_dims[] = {8, 16, 32, 64, 80, 96, 128, 192, 256};
// Group sizes and KV head counts beyond the small ones: G up to 16, Hq up to 64.
constexpr std::int64_t groups[] = {1, 2, 3, 4, 8, 16};
constexpr std::int64_t kv_heads[] = {1, 2, 3, 4, 8};

// Shares of the regimes, out of 100 (docs/distribution.md).
constexpr int small_share = 40, hint_share = 20, decode_share = 15, prefill_share = 15;  // wide heads: the rest (10)

// Value kinds: the benign ones first. Adversarial kinds take about half the cases.
constexpr value_kind value_order[] = {
    value_kind::dyadic,         value_kind::normal,       value_kind::uniform,   value_kind::normal,
    value_kind::dyadic,         value_kind::large_logits, value_kind::dominant,  value_kind::equal_keys,
    value_kind::huge_v,         value_kind::tiny_v,       value_kind::far_below, value_kind::far_above,
    value_kind::underflow_gaps, value_kind::masked_lead,  value_kind::max_v,     value_kind::far_below};
constexpr int n_values = static_cast<int>(std::size(value_order));

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

std::vector<std::int64_t> hint_lengths(const subject& s) {
  const auto& h = s.hints();
  std::vector<std::int64_t> v;
  for (std::int64_t x : {h.k_tile, h.split_keys, h.q_tile})
    if (x > 0) v.push_back(x);
  for (int i = 0; i < ATTNCHECK_SIZE_HINT_SLOTS && h.lengths[i]; ++i) v.push_back(h.lengths[i]);
  if (v.empty()) v.push_back(64);
  return v;
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

}  // namespace

std::int64_t case_work(const attn_case& c) { return c.b * c.hq * c.lq * c.lk * (c.d + c.dv); }

rc::Gen<attn_case> any_case(const subject& s, const gen_options& opt) {
  std::vector<dtype> types;
  for (dtype t : {dtype::f32, dtype::f16, dtype::bf16})
    if (s.desc().dtypes & (1u << static_cast<unsigned>(t))) types.push_back(t);
  const bool can_causal = opt.allow_masks && s.has(ATTNCHECK_FEATURE_CAUSAL);
  const bool can_pad = opt.allow_masks && s.has(ATTNCHECK_FEATURE_PADDING);
  const bool can_mask = opt.allow_masks && s.has(ATTNCHECK_FEATURE_MASK);
  const std::vector<std::int64_t> hints = hint_lengths(s);
  const std::vector<std::int64_t> dims_hinted = hint_dims(s);

  using rc::gen::inRange;
  using rc::gen::set;
  auto raw = rc::gen::resize(
      full_size,
      rc::gen::build<raw_choice>(
          set(&raw_choice::regime, inRange(0, 100)), set(&raw_choice::b, inRange(0, 64)), set(&raw_choice::hkv, inRange(0, 60)),
          set(&raw_choice::group, inRange(0, 60)), set(&raw_choice::lq, inRange(0, 840)), set(&raw_choice::lk, inRange(0, 840)),
          set(&raw_choice::d, inRange(0, 23 * 16)), set(&raw_choice::dv, inRange(0, 23 * 16)),
          set(&raw_choice::lq_mode, inRange(0, 12)), set(&raw_choice::hint, inRange(0, 64)),
          set(&raw_choice::hint_mode, inRange(0, 36)), set(&raw_choice::jitter, inRange(0, 1 << 13)),
          set(&raw_choice::type, inRange(0, 3)), set(&raw_choice::causal, inRange(0, 2)),
          set(&raw_choice::padding, inRange(0, 2)), set(&raw_choice::mask, inRange(0, 3)),
          set(&raw_choice::mask_dims, inRange(0, 16)), set(&raw_choice::values, inRange(0, n_values)),
          set(&raw_choice::layout, inRange(0, 3)), set(&raw_choice::poison, inRange(0, 3)),
          set(&raw_choice::scale, inRange(0, 36)), set(&raw_choice::pad, rc::gen::container<std::vector<int>>(8, inRange(0, 12))),
          set(&raw_choice::seed, inRange<std::uint64_t>(0, 1u << 30))));

  return rc::gen::map(raw, [=](const raw_choice& r) {
    attn_case c = shape_of(r, hints, dims_hinted);
    // The cap: max_work while the law's budget lasts, small_work after; a
    // failing case's shrinks keep the cap it was drawn with.
    std::int64_t cap = opt.max_work;
    if (opt.budget) {
      work_budget& b = *opt.budget;
      if (b.frozen)
        cap = b.cap_when_frozen;
      else if (b.spent >= b.limit)
        cap = std::min(cap, opt.small_work);
      b.cap_when_frozen = cap;
    }
    fit_work(c, cap);
    c.type = types.empty() ? dtype::f32 : types[static_cast<std::size_t>(r.type) % types.size()];
    c.values = value_order[r.values];
    c.causal = can_causal && r.causal == 1;
    if (can_pad && r.padding == 1) {
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
    if (can_mask && (r.mask > 0 || c.values == value_kind::masked_lead)) {
      // Broadcast pattern from four bits: each dim full or 1; the key dim
      // full when the mask must vary along keys.
      const bool keys = (r.mask_dims & 8) || r.mask == 2 || c.values == value_kind::masked_lead;
      c.mask_shape = {(r.mask_dims & 1) ? c.b : 1, (r.mask_dims & 2) ? c.hq : 1, (r.mask_dims & 4) ? c.lq : 1, keys ? c.lk : 1};
    }
    c.layout = static_cast<layout_kind>(r.layout);
    c.poison = opt.allow_poison ? static_cast<poison_kind>(r.poison) : poison_kind::none;
    // One case in four has an explicit scale.
    if (r.scale >= 27) c.scale = explicit_scale(r.scale - 27, c.d);
    c.seed = r.seed;
    return c;
  });
}

std::vector<std::int64_t> any_chunking(std::int64_t n, std::uint64_t seed) {
  // A splitmix stream: chunk sizes anywhere from 1 to the rest, single tokens often.
  std::uint64_t st = seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
  const auto next = [&st] {
    std::uint64_t z = (st += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  std::vector<std::int64_t> v;
  std::int64_t left = n;
  while (left > 0) {
    const std::uint64_t kind = next() % 4;
    std::int64_t c = kind == 0 ? 1 : kind == 1 ? left : 1 + static_cast<std::int64_t>(next() % static_cast<std::uint64_t>(left));
    v.push_back(std::min(c, left));
    left -= v.back();
  }
  return v;
}

void case_stats::add(const attn_case& c, const subject& s) {
  ++n;
  const auto count = [this](const std::string& k, bool yes) {
    if (yes) ++counts[k];
  };
  count("D>=64", c.d >= 64);
  count("Dv!=D", c.dv != c.d);
  count("Lk>=128", c.lk >= 128);
  count("Lk>=1024", c.lk >= 1024);
  count("Lq>=64", c.lq >= 64);
  count("prefill", c.lq >= 64 && c.dv % 8 == 0);
  count("decode", c.lq == 1);
  count("decode Lk>=512", c.lq == 1 && c.lk >= 512);
  count("G>=8", c.group() >= 8);
  count("MQA", c.hkv == 1 && c.hq > 1);
  count("MHA", c.hkv == c.hq);
  count("B>=2", c.b >= 2);
  count("f32", c.type == dtype::f32);
  count("f16", c.type == dtype::f16);
  count("bf16", c.type == dtype::bf16);
  count("causal", c.causal);
  count("padding", c.has_padding());
  count("mask", c.has_mask());
  count("no mask", !c.causal && !c.has_padding() && !c.has_mask());
  count("explicit scale", c.scale.has_value());
  count("adversarial values",
        c.values != value_kind::normal && c.values != value_kind::dyadic && c.values != value_kind::uniform);
  // Lengths at a size hint +-1 (the subject's, or the common production sizes).
  bool near = false;
  for (std::int64_t h : hint_lengths(s))
    for (std::int64_t l : {c.lk, c.lq}) near = near || (l >= h - 1 && l <= h + 1) || l == 2 * h + 1;
  count("at a size hint", near);
}

void case_stats::merge(const case_stats& o) {
  n += o.n;
  for (const auto& [k, v] : o.counts) counts[k] += v;
}

const std::vector<share_floor>& distribution_floors() {
  // Floors sit well below the shares measured on 16,000 gate cases
  // (docs/distribution.md), so a seed's noise never trips them; a change that
  // loses a regime does.
  static const std::vector<share_floor> v = {
      {"D>=64", "head size D >= 64", 0.15, false},
      {"Dv!=D", "D != Dv", 0.25, false},
      {"Lk>=128", "Lk >= 128", 0.10, false},
      {"Lk>=1024", "Lk >= 1024", 0.02, false},
      {"Lq>=64", "Lq >= 64", 0.08, false},
      {"prefill", "prefill shape: Lq >= 64 and Dv % 8 == 0", 0.06, false},
      {"decode", "decode shape: Lq = 1", 0.12, false},
      {"decode Lk>=512", "decode with Lk >= 512", 0.03, false},
      {"G>=8", "group size G >= 8", 0.04, false},
      {"MQA", "MQA: Hkv = 1 < Hq", 0.10, false},
      {"MHA", "MHA: Hkv = Hq", 0.15, false},
      {"B>=2", "batch B >= 2", 0.25, false},
      {"at a size hint", "Lq or Lk at a size hint +-1 (or 2h + 1)", 0.10, false},
      {"explicit scale", "explicit scale (negative, zero, tiny, huge, non-power-of-two)", 0.10, false},
      {"adversarial values", "adversarial values (large logits, far below/above, underflow gaps, huge/max/tiny V, ...)", 0.30,
       false},
      {"f32", "dtype f32", 0.15, true},
      {"f16", "dtype f16", 0.15, true},
      {"bf16", "dtype bf16", 0.15, true},
      {"causal", "causal mask", 0.15, true},
      {"padding", "key padding", 0.15, true},
      {"mask", "boolean mask", 0.15, true},
      {"no mask", "no mask at all", 0.05, true},
  };
  return v;
}

}  // namespace attncheck
