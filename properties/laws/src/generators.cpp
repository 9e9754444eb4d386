#include "attncheck/generators.hpp"

#include "attncheck/features.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <iterator>
#include <string>
#include <utility>

namespace attncheck {

namespace {
rc::Gen<attn_case> any_case_without_fp8(const subject& s, const gen_options& opt);
}  // namespace

rc::Gen<attn_case> any_case(const subject& s, const gen_options& opt) {
  const std::vector<dtype> fp8_types = fp8_types_of(s);
  if (!opt.fp8 || fp8_types.empty()) return any_case_without_fp8(s, opt);  // the stream without fp8, unchanged
  // The fp8 choices after the header's and the variants'.
  return rc::gen::map(rc::gen::pair(any_case_without_fp8(s, opt), any_fp8_choice()),
                      [fp8_types](std::pair<attn_case, fp8_choice> cf) {
                        apply_fp8(cf.first, cf.second, fp8_types);
                        return std::move(cf.first);
                      });
}

namespace {
rc::Gen<attn_case> any_case_without_fp8(const subject& s, const gen_options& opt) {
  // The case space (case_space.hpp): the raw choices drawn by rapidcheck,
  // mapped to a case by the same case_of() the fuzz harnesses use.
  const case_context ctx = context_of(s, opt.allow_masks, opt.allow_poison);
  // The cap: max_work while the law's budget lasts, small_work after; a
  // failing case's shrinks keep the cap it was drawn with.
  const auto cap_now = [opt](std::int64_t cap) {
    if (opt.budget) {
      work_budget& b = *opt.budget;
      if (b.frozen)
        cap = b.cap_when_frozen;
      else if (b.spent >= b.limit)
        cap = std::min(cap, opt.small_work);
      b.cap_when_frozen = cap;
    }
    return cap;
  };
  if (!opt.variants || ctx.variants == 0)  // the contract 1.0 stream, unchanged
    return rc::gen::map(any_raw_choice(),
                        [ctx, opt, cap_now](const raw_choice& r) { return case_of(r, ctx, cap_now(opt.max_work)); });
  // The variant choices after the header's: a case with a variant is capped
  // for the MPFR oracle that judges it.
  return rc::gen::map(rc::gen::pair(any_raw_choice(), any_variant_choice()),
                      [ctx, opt, cap_now](const std::pair<raw_choice, variant_choice>& rv) {
                        attn_case probe;
                        apply_variants(probe, rv.second, ctx.variants, ctx.hints);
                        const std::int64_t most =
                            probe.variants.any() ? std::min(opt.max_work, run_default::variant_max_work) : opt.max_work;
                        attn_case c = case_of(rv.first, ctx, cap_now(most), probe.variants.has_alibi());
                        apply_variants(c, rv.second, ctx.variants, ctx.hints, ctx.limits);
                        return c;
                      });
}
}  // namespace

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
  count("decode Lk>=4095", c.lq == 1 && c.lk >= 4095);
  count("G>=8", c.group() >= 8);
  count("MQA", c.hkv == 1 && c.hq > 1);
  count("MHA", c.hkv == c.hq);
  count("B>=2", c.b >= 2);
  count("f32", c.type == dtype::f32);
  count("f16", c.type == dtype::f16);
  count("bf16", c.type == dtype::bf16);
  // fp8 storage (docs/spec.md "fp8 storage"): each type, granularity and descale recipe.
  if (c.quant.any()) {
    const quantization& z = c.quant;
    count("fp8", true);
    for (dtype t : {dtype::e4m3, dtype::e5m2}) count("fp8 " + std::string(name(t)), z.holds(t));
    count("fp8 Q", z.q_type.has_value());
    count("fp8 K/V only", !z.q_type);
    for (descale_granularity g : {descale_granularity::none, descale_granularity::tensor, descale_granularity::head}) {
      bool any = false;
      for (const fp8_input& x : fp8_inputs) any = any || (z.*x.type && z.*x.scale == g);  // an input in fp8 only
      count("descale " + std::string(name(g)), any);
    }
    count("descales " + std::string(name(z.descales)), true);
    for (const fp8_input& x : fp8_inputs) count(std::string("descale ") + x.name, z.*x.scale != descale_granularity::none);
  }
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
  // Contract 1.1 variants (docs/distribution.md): each, and each pair.
  std::vector<std::pair<const std::string*, bool>> on;
  for (const contract_feature& f : contract_features())
    if (f.kind == feature_kind::variant) on.emplace_back(&f.name, f.present(c));
  for (std::size_t a = 0; a < on.size(); ++a) {
    count("variant " + *on[a].first, on[a].second);
    for (std::size_t b = a + 1; b < on.size(); ++b)
      count("variants " + *on[a].first + "+" + *on[b].first, on[a].second && on[b].second);
  }
  add_form(c, s);
}

void case_stats::add_form(const attn_case& c, const subject& s) {
  const input_form& f = c.form;
  if (f.dense()) return;
  const auto count = [this](const std::string& k, bool yes) {
    if (yes) ++counts[k];
  };
  bool empty = false, one = false, long_one = false, no_query = false, no_key_with_queries = false;
  for (std::int64_t b = 0; b < c.b; ++b) {
    const std::int64_t n = c.valid_keys(b), q = c.queries(b);
    empty = empty || n == 0 || q == 0;
    one = one || n == 1 || (f.ragged && q == 1);
    long_one = long_one || n >= 16;
    no_query = no_query || q == 0;
    no_key_with_queries = no_key_with_queries || (n == 0 && q > 0);
  }
  for (const char* form : {"paged", "ragged"}) {
    if (std::string(form) == "paged" ? !f.paged() : !f.ragged) continue;
    count(std::string(form) + " B>=16", c.b >= 16);
    count(std::string(form) + " zero, one and long", empty && one && long_one);
  }
  if (f.paged()) {
    count("paged", true);
    const std::int64_t p = f.page_size;
    count("pages 1 or 3", p == 1 || p == 3);
    count("pages 16 or 17", p == 16 || p == 17);
    count("pages 64 or 128", p == 64 || p == 128);
    count("pages 256 or 512", p == 256 || p == 512);
    bool hinted = false;
    for (std::int64_t h : hint_lengths(s)) hinted = hinted || (p >= h - 1 && p <= h + 1);
    count("pages at a size hint", hinted);
    // Sequence ends at page boundaries (P >= 3 tells the three apart), and
    // table rows with unspecified entries (past ceil(n[b] / P)).
    bool on = false, before = false, after = false, tail = false;
    const std::int64_t max_pages = (c.lk + p - 1) / p + f.spare_pages;
    std::int64_t reach_shared = 0;
    for (std::int64_t b = 0; b < c.b; ++b) {
      const std::int64_t n = c.valid_keys(b);
      on = on || (p >= 3 && n > 0 && n % p == 0);
      before = before || (p >= 3 && n % p == p - 1);
      after = after || (p >= 3 && n > p && n % p == 1);
      tail = tail || (n + p - 1) / p < max_pages;
      reach_shared += f.shared_pages > 0 && n > 0 ? 1 : 0;
    }
    count("n = kP", on);
    count("n = kP - 1", before);
    count("n = kP + 1", after);
    count("stale table tail", tail && f.table_tail == table_tail_kind::stale);
    count("invalid table tail", tail && f.table_tail == table_tail_kind::invalid);
    count("spare pages", f.spare_pages > 0);
    count("shared pages", reach_shared >= 2);
    count("paged n = 0", empty && !f.ragged);
    std::int64_t longest = 0;
    for (std::int64_t b = 0; b < c.b; ++b) longest = std::max(longest, c.valid_keys(b));
    count("paged decode n>=4095", c.lq == 1 && longest >= 4095);
    count("paged over 2^16 pages", (longest + p - 1) / p > 65536);
  }
  if (f.ragged) {
    count("ragged", true);
    count("ragged zero queries", no_query);
    count("ragged zero keys", no_key_with_queries);
  }
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
      {"decode Lk>=4095", "decode with Lk >= 4095 (long-context decodes: 2^12..2^17 +-1)", 0.001, false},
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
  // The variants, each and each pair: half the cases draw variants, and
  // those draw each independently at its share (contract_feature::share:
  // window 4/5, chunk 1/4, softcap 7/8, sinks 5/6, ALiBi 3/4, bias 3/4);
  // floors at half the expected share.
  static const std::vector<share_floor> all = [] {
    std::vector<share_floor> f = v;
    std::vector<std::pair<std::string, double>> expected;
    for (const contract_feature& x : contract_features())
      if (x.kind == feature_kind::variant) expected.emplace_back(x.name, x.share);
    static std::deque<std::string> text;  // keys and descriptions live as long as the table (a deque never moves them)
    const auto add = [&](const std::string& key, const std::string& what, double share) {
      text.push_back(key);
      const char* k = text.back().c_str();
      text.push_back(what);
      f.push_back({k, text.back().c_str(), share / 2, false, true});
    };
    constexpr double drawn = 0.5;  // variant_choice::any
    for (std::size_t a = 0; a < expected.size(); ++a)
      add("variant " + expected[a].first, expected[a].first, drawn * expected[a].second);
    for (std::size_t a = 0; a < expected.size(); ++a)
      for (std::size_t b = a + 1; b < expected.size(); ++b)
        add("variants " + expected[a].first + "+" + expected[b].first, expected[a].first + " with " + expected[b].first,
            drawn * expected[a].second * expected[b].second);
    return f;
  }();
  return all;
}

const std::vector<form_floor>& form_floors() {
  // Floors near half the shares measured on the naive subject's gate
  // (docs/distribution.md "Input forms"), over the paged cases or the ragged
  // cases of the laws that draw the forms.
  static const std::vector<form_floor> v = {
      {"pages 1 or 3", "page size 1 or 3", 0.05, "paged"},
      {"pages 16 or 17", "page size 16 or 17", 0.04, "paged"},
      {"pages 64 or 128", "page size 64 or 128", 0.04, "paged"},
      {"pages 256 or 512", "page size 256 or 512", 0.04, "paged"},
      {"pages at a size hint", "page size at a size hint +-1 (the subject's, or 64)", 0.05, "paged"},
      {"n = kP", "a sequence ends exactly on a page boundary (P >= 3)", 0.05, "paged"},
      {"n = kP - 1", "a sequence ends one key before a page boundary (P >= 3)", 0.05, "paged"},
      {"n = kP + 1", "a sequence ends one key after a page boundary (P >= 3)", 0.03, "paged"},
      {"stale table tail", "table rows longer than needed, tails naming other sequences' and spare pages", 0.15, "paged"},
      {"invalid table tail", "table rows longer than needed, tails of -1 and out-of-range entries", 0.10, "paged"},
      {"spare pages", "an arena larger than needed (spare pages)", 0.20, "paged"},
      {"shared pages", "a prefix's pages shared by two sequences or more", 0.10, "paged"},
      {"paged n = 0", "an empty sequence (n = 0: its whole table row unspecified)", 0.05, "paged"},
      {"paged decode n>=4095", "a long-context decode (n at 2^12..2^17 +-1, thousands of pages)", 0.01, "paged"},
      {"paged over 2^16 pages", "a sequence of more than 65,536 pages (physical page numbers past 16 bits)", 0.002, "paged"},
      {"paged B>=16", "16 to 64 sequences", 0.05, "paged"},
      {"paged zero, one and long", "one batch mixing an empty sequence, one of a single key, one of 16 keys or more", 0.03,
       "paged"},
      {"ragged zero queries", "a sequence with no query", 0.25, "ragged"},
      {"ragged zero keys", "a sequence with no key and some queries", 0.10, "ragged"},
      {"ragged B>=16", "16 to 64 sequences", 0.05, "ragged"},
      {"ragged zero, one and long", "one batch mixing an empty sequence, one of a single key or query, one of 16 keys or more",
       0.03, "ragged"},
      // fp8 inputs (docs/distribution.md "fp8 inputs"), over the fp8 cases: each input draws its
      // type (case's, first or last fp8 type) and granularity (none, tensor, head) a third of the time,
      // the recipe a fifth; floors near half the expected shares (the descale laws' cases always carry
      // descales: none 26.8%, tensor 29.8% on naive at 400 cases). A type row shows only for a subject taking it.
      {"fp8 e4m3", "an e4m3 input", 0.30, "fp8"},
      {"fp8 e5m2", "an e5m2 input", 0.30, "fp8"},
      {"fp8 Q", "Q in fp8", 0.30, "fp8"},
      {"fp8 K/V only", "K or V in fp8, Q in the case's type (the fp8 KV cache)", 0.15, "fp8"},
      {"descale none", "an fp8 input without a descale", 0.12, "fp8"},
      {"descale tensor", "a per-tensor descale", 0.15, "fp8"},
      {"descale head", "per-head descales", 0.20, "fp8"},
      {"descales natural", "natural descales (absmax / the format's largest)", 0.10, "fp8"},
      {"descales unit", "unit descales (values as the format holds them)", 0.10, "fp8"},
      {"descales wide", "descales times 2^-20 .. 2^20", 0.10, "fp8"},
      {"descales spread", "descales times 2^-12, 1 or 2^12 per head", 0.10, "fp8"},
      {"descales edges", "values at the format's edges (largest, smallest normal, subnormals)", 0.10, "fp8"},
  };
  return v;
}

}  // namespace attncheck
