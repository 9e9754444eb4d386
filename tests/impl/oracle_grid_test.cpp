// The oracle grid: over a fixed grid every output element of attnimpl
// is within the bound of docs/bound.md of the multiprecision reference (NaN and inf are
// checked first). Grid: lengths around each tile size T (1, T-1, T, T+1,
// 2T+1, a prime), G in {1,2,3,4,8}, Hq up to 32, Lq != Lk, D in {1,3,8,63,
// 64,128} with Dv != D, every mask kind and combination, f32/f16/bf16,
// strided layouts, value kinds, poisoned masked slots. Every (tile, length,
// mask combination, G) is run; D, Hkv, Lq, dtype, layout and values cycle
// against them (a full product would take the oracle minutes).
#include <gtest/gtest.h>

#include <cmath>

#include "attncheck/case.hpp"
#include "attncheck/oracle.hpp"
#include "attnimpl/attention.hpp"

namespace {

attnimpl::dtype to_impl(attncheck::dtype t) {
  switch (t) {
    case attncheck::dtype::f16: return attnimpl::dtype::f16;
    case attncheck::dtype::bf16: return attnimpl::dtype::bf16;
    default: return attnimpl::dtype::f32;
  }
}

/// Storage of one attncheck tensor in its native width, viewed for attnimpl.
struct native {
  std::vector<unsigned char> bytes;
  const attncheck::tensor* t;
  explicit native(const attncheck::tensor& x) : bytes(x.packed_storage()), t(&x) {}
  unsigned char* at_offset() { return bytes.data() + t->offset * static_cast<std::int64_t>(size_of(t->type)); }
  attnimpl::tensor_in in() { return {at_offset(), to_impl(t->type), t->stride}; }
  attnimpl::tensor_out out() { return {at_offset(), to_impl(t->type), t->stride}; }
};

struct result {
  attncheck::tensor o;
  std::vector<float> lse;
};

result run_impl(const attncheck::attn_case& c, const attnimpl::config& cfg) {
  result r{attncheck::make_output(c), std::vector<float>(static_cast<std::size_t>(c.b * c.hq * c.lq))};
  native q(c.q), k(c.k), v(c.v), o(r.o);
  attnimpl::attention_args a;
  a.dims = {c.b, c.hq, c.hkv, c.lq, c.lk, c.d, c.dv};
  a.q = q.in();
  a.k = k.in();
  a.v = v.in();
  a.o = o.out();
  a.lse = {r.lse.data(), {c.hq * c.lq, c.lq, 1}};
  a.scale = c.effective_scale();
  a.causal = c.causal;
  if (c.has_padding()) a.key_len = c.key_len.data();
  if (c.has_mask()) {
    const auto& s = c.mask_shape;
    const std::int64_t sj = 1, si = s[3], sh = si * s[2], sb = sh * s[1];
    a.mask = {c.mask.data(), {s[0] == 1 ? 0 : sb, s[1] == 1 ? 0 : sh, s[2] == 1 ? 0 : si, s[3] == 1 ? 0 : sj}};
  }
  const attnimpl::status st = attnimpl::attention(a, cfg);
  EXPECT_TRUE(st.ok()) << st.message;
  r.o.unpack_storage(o.bytes.data(), o.bytes.size());
  return r;
}

/// Runs one case and checks every O and LSE element: NaN, then inf, then the bound.
void expect_within_bound(attncheck::attn_case c, const attnimpl::config& cfg) {
  attncheck::materialize(c);
  const std::string line = attncheck::to_line(c);
  const result got = run_impl(c, cfg);
  attncheck::oracle_options opt;
  opt.bound.exp_ulps = attnimpl::exp_ulps();
  opt.bound.key_blocks = std::max<std::int64_t>(1, attnimpl::key_blocks(c.lk, cfg));
  opt.out_type = c.type;
  const attncheck::oracle_result ref = attncheck::reference(c, opt);
  double worst = 0;
  for (std::int64_t b = 0; b < c.b; ++b)
    for (std::int64_t i = 0; i < c.lq; ++i)
      for (std::int64_t h = 0; h < c.hq; ++h)
        for (std::int64_t e = 0; e < c.dv; ++e) {
          const std::size_t at = ref.o_index(b, i, h, e);
          const double o = got.o.at(b, i, h, e), want = ref.o[at], bound = ref.o_bound[at];
          const auto where = [&] {
            return line + " O[" + std::to_string(b) + "," + std::to_string(i) + "," + std::to_string(h) + "," +
                   std::to_string(e) + "] expected " + std::to_string(want) + " got " + std::to_string(o) + " bound " +
                   std::to_string(bound);
          };
          ASSERT_FALSE(std::isnan(bound)) << "no bound exists (non-finite visible input): " << where();
          ASSERT_FALSE(std::isnan(o)) << where();
          if (std::isinf(bound)) continue;  // may overflow (huge_v in f16): no numeric claim, NaN already excluded
          ASSERT_FALSE(std::isinf(o)) << where();
          const double err = std::fabs(o - want);
          ASSERT_LE(err, bound) << where() << " error/bound " << err / bound;
          if (bound > 0) worst = std::max(worst, err / bound);
        }
  for (std::int64_t b = 0; b < c.b; ++b)
    for (std::int64_t h = 0; h < c.hq; ++h)
      for (std::int64_t i = 0; i < c.lq; ++i) {
        const std::size_t at = ref.lse_index(b, h, i);
        const double l = got.lse[static_cast<std::size_t>((b * c.hq + h) * c.lq + i)];
        const std::string where = line + " LSE[" + std::to_string(b) + "," + std::to_string(h) + "," + std::to_string(i) +
                                  "] expected " + std::to_string(ref.lse[at]) + " got " + std::to_string(l);
        ASSERT_FALSE(std::isnan(l)) << where;
        if (std::isinf(ref.lse[at])) {
          ASSERT_EQ(l, ref.lse[at]) << where;
          continue;
        }
        ASSERT_FALSE(std::isinf(l)) << where;
        ASSERT_LE(std::fabs(l - ref.lse[at]), ref.lse_bound[at]) << where << " bound " << ref.lse_bound[at];
      }
  ::testing::Test::RecordProperty("worst_error_over_bound", std::to_string(worst));
}

struct mask_combo {
  bool causal, padding;
  int mask;  // 0 none, 1 full (b,h,i,j), 2 (1,1,lq,lk), 3 (1,1,1,lk)
};

constexpr mask_combo combos[] = {{false, false, 0}, {true, false, 0}, {false, true, 0}, {false, false, 1},
                                 {true, true, 0},   {true, false, 2}, {false, true, 3}, {true, true, 1}};

TEST(oracle_grid, every_element_within_the_spec_bound) {
  const std::int64_t groups[] = {1, 2, 3, 4, 8};
  const std::int64_t head_dims[] = {1, 3, 8, 63, 64, 128};
  const attncheck::dtype types[] = {attncheck::dtype::f32, attncheck::dtype::f16, attncheck::dtype::bf16};
  const attncheck::layout_kind layouts[] = {attncheck::layout_kind::bshd, attncheck::layout_kind::bhsd,
                                            attncheck::layout_kind::padded};
  const attncheck::value_kind values[] = {attncheck::value_kind::normal,   attncheck::value_kind::uniform,
                                          attncheck::value_kind::dyadic,   attncheck::value_kind::large_logits,
                                          attncheck::value_kind::dominant, attncheck::value_kind::equal_keys,
                                          attncheck::value_kind::tiny_v,   attncheck::value_kind::huge_v};
  std::uint64_t n = 0;
  for (std::int64_t tile : {2, 3}) {
    const std::int64_t lengths[] = {1, std::max<std::int64_t>(1, tile - 1), tile, tile + 1, 2 * tile + 1, 11};
    for (std::size_t li = 0; li < 6; ++li)
      for (const mask_combo& mc : combos)
        for (std::int64_t g : groups) {
          ++n;
          attncheck::attn_case c;
          const std::int64_t d = head_dims[(n / 5 + li) % 6];
          // Big heads only with small D: the multiprecision oracle is O(Hq Lq Lk (D + Dv)).
          c.hkv = d >= 63 ? 1 : 1 + static_cast<std::int64_t>(n % 4);
          c.hq = g * c.hkv;
          c.b = 2;
          c.lk = lengths[li];
          c.lq = lengths[(li + 1 + n % 5) % 6];
          if (c.lq == c.lk) c.lq = c.lk + 1;
          c.d = d;
          c.dv = d == 128 ? 5 : d + 2;
          c.causal = mc.causal;
          if (mc.padding) c.key_len = {c.lk, static_cast<std::int64_t>(n % static_cast<std::uint64_t>(c.lk + 1))};
          switch (mc.mask) {
            case 1: c.mask_shape = {c.b, c.hq, c.lq, c.lk}; break;
            case 2: c.mask_shape = {1, 1, c.lq, c.lk}; break;
            case 3: c.mask_shape = {1, 1, 1, c.lk}; break;
            default: break;
          }
          c.type = types[n % 3];
          c.layout = layouts[(n / 3) % 3];
          c.values = values[(n / 2) % 8];
          c.poison = n % 2 ? attncheck::poison_kind::nan : attncheck::poison_kind::big;
          c.seed = 1000 + n;
          SCOPED_TRACE(attncheck::to_line(c) + " tile=" + std::to_string(tile));
          expect_within_bound(c, {.threads = 2, .q_tile = tile, .k_tile = tile, .split_keys = 2 * tile});
          if (HasFatalFailure()) return;
        }
  }
}

TEST(oracle_grid, hq_32_groups_of_8_and_d_128) {
  for (attncheck::dtype t : {attncheck::dtype::f32, attncheck::dtype::bf16}) {
    attncheck::attn_case c;
    c.b = 1;
    c.hq = 32;
    c.hkv = 4;
    c.lq = 2;
    c.lk = 5;
    c.d = 128;
    c.dv = 3;
    c.causal = true;
    c.type = t;
    c.layout = attncheck::layout_kind::padded;
    c.seed = 42;
    expect_within_bound(c, {.threads = 3, .q_tile = 2, .k_tile = 2, .split_keys = 2});
  }
}

}  // namespace
