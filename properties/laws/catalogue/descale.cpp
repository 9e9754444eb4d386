// The descale laws (docs/spec.md "fp8 storage"): a power of two moves
// between a stored fp8 value and its descale without changing anything, a
// per-head descale moves only its own head's rows, and a unit descale is no
// descale. Each case carries fp8 inputs with descales (prepare_fp8); the
// differential law judges the values themselves against the oracle.
#include <algorithm>
#include <cmath>

#include "attncheck/case_space.hpp"
#include "law_support.hpp"
#include "registry.hpp"

namespace attncheck::laws {

namespace {

// The inputs of c that carry a descale (of granularity `only`, or any).
std::vector<const fp8_input*> with_descale(const attn_case& c, std::optional<descale_granularity> only = std::nullopt) {
  std::vector<const fp8_input*> v;
  for (const fp8_input& x : fp8_inputs) {
    const descale_granularity g = c.quant.*x.scale;
    if (g != descale_granularity::none && (!only || g == *only)) v.push_back(&x);
  }
  return v;
}

// x * 2^a held exactly by t (finite, NaN left alone: only unused slots hold one).
bool stays_exact(dtype t, double x, int a) {
  if (x == 0 || std::isnan(x)) return true;
  const double y = std::ldexp(x, a);
  return std::fabs(y) <= largest_finite(t) && decode(t, encode(t, y)) == y;
}

}  // namespace

std::string declares_fp8(const subject& s) {
  return fp8_types_of(s).empty() ? "subject does not declare fp8 inputs (ATTNCHECK_FEATURE4_FP8 with e4m3 or e5m2)"
                                 : std::string();
}

// Every case carries fp8 inputs with a descale: the generator's fp8 choices
// where it drew them, else K and V in the subject's first fp8 type with
// per-head descales (the fp8 KV cache) and Q in fp8 in one case of three,
// from the case's seed. A case in a form fp8 is not built for stays as it is
// (the law finds no descale there and judges nothing).
void prepare_fp8(attn_case& c, const subject& s) {
  const std::vector<dtype> types = fp8_types_of(s);
  law_rng rng(c, 0xf8de5ca1eull);
  fp8_choice f;
  f.any = 1;
  f.q = rng.below(3) == 0 ? 1 + static_cast<int>(rng.below(2)) : 0;
  f.k = f.v = 1 + static_cast<int>(rng.below(2));
  f.q_scale = 1 + static_cast<int>(rng.below(2));
  f.k_scale = f.v_scale = 2;
  f.descales = static_cast<int>(rng.below(5));
  if (!c.quant.any()) apply_fp8(c, f, types);
  if (c.quant.any() && with_descale(c).empty()) {  // drawn with no descale: give the fp8 inputs per-head ones
    for (const fp8_input& x : fp8_inputs)
      if (c.quant.*x.type) c.quant.*x.scale = descale_granularity::head;
  }
}

law_outcome power_of_two_moves_between_value_and_descale(const subject& s, const attn_case& c) {
  law_outcome o;
  const std::vector<const fp8_input*> inputs = with_descale(c);
  if (inputs.empty()) return o.nothing_to_judge("no input carries a descale");
  law_rng rng(c, 0x2a2a2a2aull);
  const fp8_input& x = *inputs[static_cast<std::size_t>(rng.below(static_cast<std::int64_t>(inputs.size())))];
  const tensor& t = c.*x.values;
  // The first power of two (+-1, +-2, +-3, in an order drawn from the seed)
  // that every stored value takes exactly and every descale takes as a normal f32.
  int candidates[] = {1, -1, 2, -2, 3, -3};
  if (rng.below(2)) std::swap(candidates[0], candidates[1]);
  // Only the slots a visible pair reads must scale exactly; the others may hold anything (poison, gaps).
  const slot_usage used = used_slots(c);
  const auto exact_in_use = [&](int a) {
    for (std::int64_t b = 0; b < t.shape[0]; ++b)
      for (std::int64_t l = 0; l < t.shape[1]; ++l)
        for (std::int64_t h = 0; h < t.shape[2]; ++h) {
          if (!(x.query ? used.query_row(c, b, l, h) : used.key(c, b, l, h))) continue;
          for (std::int64_t e = 0; e < t.shape[3]; ++e)
            if (!stays_exact(t.type, t.at(b, l, h, e), a)) return false;
        }
    return true;
  };
  int chosen = 0;
  for (int a : candidates) {
    bool ok = exact_in_use(a);
    for (float d : c.quant.*x.descale) {
      const float y = std::ldexp(d, -a);
      ok = ok && std::isfinite(y) && std::fabs(y) >= 0x1p-126f;
    }
    if (ok) {
      chosen = a;
      break;
    }
  }
  if (chosen == 0) return o.nothing_to_judge(std::string(x.name) + "'s values take no power of two in [-3, 3] exactly");
  attn_case moved = c;
  // The same view, every stored value times 2^chosen (an unused slot may overflow: it is never read).
  tensor& m = moved.*x.values;
  for (std::uint32_t& bits : m.bits) {
    const double v = decode(t.type, bits);
    if (!std::isnan(v)) bits = encode(t.type, std::ldexp(v, chosen));
  }
  for (float& d : moved.quant.*x.descale) d = std::ldexp(d, -chosen);
  const std::string what =
      std::string(x.name) + " * 2^" + std::to_string(chosen) + " with its descale * 2^" + std::to_string(-chosen);
  add_runs_within_bounds(o, s, c, "as drawn", moved, what, what + " against the case as drawn");
  return o;
}

law_outcome per_head_descale_moves_only_its_head(const subject& s, const attn_case& c) {
  law_outcome o;
  const std::vector<const fp8_input*> inputs = with_descale(c, descale_granularity::head);
  if (inputs.empty()) return o.nothing_to_judge("no input carries per-head descales");
  law_rng rng(c, 0x4ead4eadull);
  const fp8_input& x = *inputs[static_cast<std::size_t>(rng.below(static_cast<std::int64_t>(inputs.size())))];
  const std::int64_t heads = x.query ? c.hq : c.hkv;
  const std::int64_t bi = rng.below(c.b), head = rng.below(heads);
  if (!x.query && c.hkv == 1 && c.b == 1)
    return o.nothing_to_judge("one KV head and one batch element: every row is the group's");
  attn_case moved = c;
  float& d = (moved.quant.*x.descale)[static_cast<std::size_t>(bi * heads + head)];
  const int k = (rng.below(2) ? 1 : -1) * (4 + static_cast<int>(rng.below(5)));  // 2^+-4 .. 2^+-8
  const float y = std::ldexp(d, k);
  if (!std::isfinite(y) || y < 0x1p-126f) return o.nothing_to_judge("the moved descale leaves f32's normal range");
  d = y;
  // Rows of other batch elements, or of heads that read another head's descale, keep their truth.
  within_bounds_options opt;
  opt.keep = [&](std::int64_t b, std::int64_t h, std::int64_t) { return b != bi || (x.query ? h : c.kv_head(h)) != head; };
  const std::string what = std::string(x.name) + "'s descale of batch " + std::to_string(bi) +
                           (x.query ? ", head " : ", KV head ") + std::to_string(head) + " * 2^" + std::to_string(k);
  add_runs_within_bounds(o, s, c, "as drawn", moved, what, "every other head's rows against the case as drawn (" + what + ")",
                         opt);
  return o;
}

law_outcome unit_descale_equals_none(const subject& s, const attn_case& c) {
  law_outcome o;
  std::vector<const fp8_input*> fp8;
  for (const fp8_input& x : fp8_inputs)
    if (c.quant.*x.type) fp8.push_back(&x);
  if (fp8.empty()) return o.nothing_to_judge("no input in fp8");
  law_rng rng(c, 0x0e0e0e0eull);
  const fp8_input& x = *fp8[static_cast<std::size_t>(rng.below(static_cast<std::int64_t>(fp8.size())))];
  attn_case none = c, unit = c;
  none.quant.*x.scale = descale_granularity::none;
  (none.quant.*x.descale).clear();
  unit.quant.*x.scale = descale_granularity::tensor;
  unit.quant.*x.descale = {1.0f};
  const std::string what = std::string(x.name) + " with no descale";
  add_runs_within_bounds(o, s, none, what, unit, std::string(x.name) + " with a descale of 1",
                         std::string(x.name) + ": a descale of 1 against none");
  return o;
}

}  // namespace attncheck::laws
