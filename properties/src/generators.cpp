#include "attncheck/generators.hpp"

#include <algorithm>

namespace attncheck {

namespace {

// Raw choices: small integers that shrink toward 0, mapped onto a valid header.
struct raw_choice {
  int b = 0, hkv = 0, group = 0, lq = 0, lk = 0, d = 0, dv = 0;
  int type = 0, causal = 0, padding = 0, mask = 0, values = 0, layout = 0, poison = 0;
  std::vector<int> pad;  // per batch element, fraction of lk in 1/8ths (shrinks to 0 = full)
  int mask_dims = 0;
  std::uint64_t seed = 0;
};

// Lengths: mostly small (tile-sized bugs show at 2..9 with test tiles), some
// around common production tiles, and 70 for accumulation-precision bugs.
// Picks `wide` with probability w_wide / total, else `small`. Unlike
// gen::weightedOneOf (whose choice never shrinks: rapidcheck's weighted
// choice is unshrinkable), a failure found in `wide` can shrink into `small`,
// so counterexamples reach the small shapes the laws are written for.
rc::Gen<int> small_or_wide(rc::Gen<int> small, rc::Gen<int> wide, int w_wide, int total) {
  return rc::gen::apply([](int pick, int s, int w) { return pick ? w : s; },
                        rc::gen::map(rc::gen::inRange(0, total), [w_wide, total](int x) { return x >= total - w_wide ? 1 : 0; }),
                        std::move(small), std::move(wide));
}

rc::Gen<int> any_length() {
  // 8 in 10 small, 2 in 10 from the list.
  return small_or_wide(rc::gen::inRange(0, 12), rc::gen::element(14, 15, 16, 17, 31, 32, 33, 63, 64, 65, 69, 70), 2, 10);
}

rc::Gen<int> any_head_dim() {
  // index into head_dims below; 0 -> 1. 6 in 7 small, 1 in 7 wide.
  return small_or_wide(rc::gen::inRange(0, 6), rc::gen::inRange(6, 11), 1, 7);
}

rc::Gen<int> any_batch_index() {
  // B - 1: 0 with probability 1/4, else 1 or 2; shrinks toward B = 1.
  return rc::gen::map(rc::gen::inRange(0, 8), [](int x) { return x < 2 ? 0 : x < 5 ? 1 : 2; });
}
constexpr std::int64_t head_dims[] = {1, 2, 3, 4, 5, 8, 9, 16, 17, 63, 64};

}  // namespace

rc::Gen<attn_case> any_case(const subject& s, const gen_options& opt) {
  std::vector<dtype> types;
  for (dtype t : {dtype::f32, dtype::f16, dtype::bf16})
    if (s.desc().dtypes & (1u << static_cast<unsigned>(t))) types.push_back(t);
  const bool can_causal = opt.allow_masks && s.has(ATTNCHECK_FEATURE_CAUSAL);
  const bool can_pad = opt.allow_masks && s.has(ATTNCHECK_FEATURE_PADDING);
  const bool can_mask = opt.allow_masks && s.has(ATTNCHECK_FEATURE_MASK);

  auto raw = rc::gen::build<raw_choice>(
      rc::gen::set(&raw_choice::b, any_batch_index()),
      rc::gen::set(&raw_choice::hkv, rc::gen::inRange(0, 3)),       // Hkv in 1..3
      rc::gen::set(&raw_choice::group, rc::gen::inRange(0, 4)),     // G in 1..4
      rc::gen::set(&raw_choice::lq, any_length()), rc::gen::set(&raw_choice::lk, any_length()),
      rc::gen::set(&raw_choice::d, any_head_dim()), rc::gen::set(&raw_choice::dv, any_head_dim()),
      rc::gen::set(&raw_choice::type, rc::gen::inRange(0, static_cast<int>(types.size()))),
      rc::gen::set(&raw_choice::causal, rc::gen::inRange(0, 2)), rc::gen::set(&raw_choice::padding, rc::gen::inRange(0, 2)),
      rc::gen::set(&raw_choice::mask, rc::gen::inRange(0, 3)),
      rc::gen::set(&raw_choice::values, rc::gen::inRange(0, 8)), rc::gen::set(&raw_choice::layout, rc::gen::inRange(0, 3)),
      rc::gen::set(&raw_choice::poison, rc::gen::inRange(0, 3)),
      rc::gen::set(&raw_choice::pad, rc::gen::container<std::vector<int>>(3, rc::gen::inRange(0, 9))),
      rc::gen::set(&raw_choice::mask_dims, rc::gen::inRange(0, 16)),
      rc::gen::set(&raw_choice::seed, rc::gen::inRange<std::uint64_t>(0, 1u << 30)));

  return rc::gen::map(raw, [types, can_causal, can_pad, can_mask, opt](const raw_choice& r) {
    attn_case c;
    c.b = 1 + r.b;
    c.hkv = 1 + r.hkv;
    c.hq = c.hkv * (1 + r.group);
    c.lq = 1 + r.lq;
    c.lk = 1 + r.lk;
    c.d = head_dims[r.d];
    c.dv = head_dims[r.dv];
    // Cut the shape down until the oracle's work fits, longest length first.
    auto work = [&] { return c.b * c.hq * c.lq * c.lk * (c.d + c.dv); };
    while (work() > opt.max_work) {
      if (c.lq >= c.lk && c.lq > 1) c.lq = (c.lq + 1) / 2;
      else if (c.lk > 1) c.lk = (c.lk + 1) / 2;
      else if (c.d + c.dv > 2) { c.d = std::max<std::int64_t>(1, c.d / 2); c.dv = std::max<std::int64_t>(1, c.dv / 2); }
      else if (c.b > 1) c.b -= 1;
      else break;
    }
    c.type = types.empty() ? dtype::f32 : types[static_cast<std::size_t>(r.type) % types.size()];
    c.causal = can_causal && r.causal == 1;
    if (can_pad && r.padding == 1) {
      for (std::int64_t bi = 0; bi < c.b; ++bi) {
        const int eighths = r.pad[static_cast<std::size_t>(bi) % r.pad.size()];
        c.key_len.push_back(c.lk - (c.lk * eighths) / 8);  // 0 -> full, 8 -> empty cache
      }
    }
    if (can_mask && r.mask > 0) {
      // Broadcast pattern from four bits: each dim full or 1.
      c.mask_shape = {(r.mask_dims & 1) ? c.b : 1, (r.mask_dims & 2) ? c.hq : 1, (r.mask_dims & 4) ? c.lq : 1,
                      (r.mask_dims & 8) || r.mask == 2 ? c.lk : 1};
    }
    c.values = static_cast<value_kind>(r.values);
    c.layout = static_cast<layout_kind>(r.layout);
    c.poison = opt.allow_poison ? static_cast<poison_kind>(r.poison) : poison_kind::none;
    c.seed = r.seed;
    return c;
  });
}

}  // namespace attncheck
