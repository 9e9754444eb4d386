// One case space, two backends (attncheck/case_space.hpp): the choices the
// rapidcheck backend draws, written as bytes and read back by the byte
// backend the fuzz harnesses use, give the same case as the gate's generator
// any_case(), for every shape regime, and the same plan through the cache.
// A backend that reads one choice differently is caught (the last tests).
#include <gtest/gtest.h>

#include <rapidcheck.h>

#include <map>
#include <string>
#include <utility>

#include "attncheck/case_space.hpp"
#include "attncheck/generators.hpp"
#include "attncheck/subject_host.hpp"

namespace attncheck {
namespace {

const char* regime_name(int regime) {
  // The shares of docs/distribution.md: small 40, hint 20, decode 15, prefill 15, wide 10.
  return regime < 40 ? "small" : regime < 60 ? "hint" : regime < 75 ? "decode" : regime < 90 ? "prefill" : "wide";
}

/// Empty when the two cases have the same header; else what differs.
std::string header_difference(const attn_case& a, const attn_case& b) {
  if (to_line(a) != to_line(b)) return to_line(a) + " vs " + to_line(b);
  if (a.key_len != b.key_len) return "key lengths differ in " + to_line(a);
  if (a.mask_shape != b.mask_shape) return "mask shapes differ in " + to_line(a);
  return {};
}

/// Empty when the plans are the same; else both.
std::string plan_difference(const cache_plan& a, const cache_plan& b) {
  const auto show = [](const cache_plan& p) {
    std::string s = "page " + std::to_string(p.page_size) + " order";
    for (auto k : p.page_order) s += " " + std::to_string(k);
    for (const auto& st : p.steps) {
      s += " [";
      for (auto n : st.append) s += std::to_string(n) + ",";
      s += "]/" + std::to_string(st.lq);
    }
    return s;
  };
  return show(a) == show(b) ? std::string() : show(a) + " vs " + show(b);
}

// Values bytes in front of the header, as a fuzz input has them: the byte
// backend must leave them alone.
const std::vector<std::uint8_t> prefix = {0xde, 0xad, 0xbe, 0xef, 0x01};

/// The case of raw choices through the byte backend: encode, then read back.
attn_case through_bytes(const std::vector<choice_record>& record, const case_context& ctx, std::int64_t cap,
                        std::size_t* left = nullptr) {
  std::vector<std::uint8_t> bytes = prefix;
  const std::vector<std::uint8_t> header = encode_choices(record);
  bytes.insert(bytes.end(), header.begin(), header.end());
  byte_choices in(bytes.data(), bytes.size());
  const attn_case c = case_of(read_choices(in), ctx, cap);
  if (left) *left = in.remaining();
  return c;
}

struct draw {
  raw_choice raw;
  attn_case generated;  // any_case's case from the same random stream
};

/// rapidcheck draws at every size: the raw choices ignore it (full size).
std::vector<draw> draws(const subject& s, const gen_options& opt, int n) {
  const auto raw = any_raw_choice();
  const auto gen = any_case(s, opt);
  std::vector<draw> v;
  for (int k = 0; k < n; ++k) {
    const rc::Random r(0x5eed0000u + static_cast<std::uint64_t>(k));
    v.push_back({raw(r, k % (rc::kNominalSize + 1)).value(), gen(r, k % (rc::kNominalSize + 1)).value()});
  }
  return v;
}

void expect_same_case_from_both_backends(const std::string& spec, const gen_options& opt) {
  const auto s = subject::load(spec);
  const case_context ctx = context_of(*s, opt.allow_masks, opt.allow_poison);
  std::map<std::string, int> seen;
  for (const draw& d : draws(*s, opt, 1500)) {
    ++seen[regime_name(d.raw.regime)];
    std::size_t left = 0;
    const attn_case from_bytes = through_bytes(header_record(d.raw), ctx, opt.max_work, &left);
    EXPECT_EQ(header_difference(d.generated, from_bytes), "") << spec << ", regime " << regime_name(d.raw.regime);
    EXPECT_EQ(left, prefix.size()) << "the byte backend read past the header";
  }
  for (const char* r : {"small", "hint", "decode", "prefill", "wide"})
    EXPECT_GE(seen[r], 100) << spec << ": too few draws of regime " << r << " to compare";
}

TEST(case_space, both_backends_give_the_gate_case_in_every_regime) {
  expect_same_case_from_both_backends("builtin", gen_options{});
  expect_same_case_from_both_backends("builtin:tiles=tiny", gen_options{});  // other hints: the hint regime differs
  gen_options small;
  small.max_work = 20'000;  // fit_work cuts most shapes down
  small.allow_poison = false;
  expect_same_case_from_both_backends("naive", small);
}

TEST(case_space, byte_backend_reads_what_the_encoder_wrote) {
  // Every range width the header uses, and the edges of each range.
  for (const choice_spec& c : header_choices)
    for (const std::int64_t v : {std::int64_t{0}, std::int64_t{c.n / 2}, std::int64_t{c.n - 1}}) {
      const std::vector<std::uint8_t> bytes = encode_choices({{0, c.n - 1, v}, {-3, 70000, 69999}});
      byte_choices in(bytes.data(), bytes.size());
      EXPECT_EQ(in.in_range(0, c.n - 1), v) << c.name;
      EXPECT_EQ(in.in_range(-3, 70000), 69999) << c.name;
      EXPECT_TRUE(in.exhausted()) << c.name;
    }
  // Out of bytes: every choice is its lowest value, as FuzzedDataProvider gives.
  byte_choices none(nullptr, 0);
  const raw_choice r = read_choices(none);
  raw_choice zero;
  zero.pad.assign(pad_count, 0);
  EXPECT_EQ(r, zero);
}

TEST(case_space, both_backends_give_the_same_cache_plan) {
  const auto s = subject::load("builtin");
  const case_context ctx = context_of(*s, true, false);
  int plans = 0, multi_step = 0, shuffled = 0;
  gen_options opt;
  opt.max_work = 200'000;
  for (const draw& d : draws(*s, opt, 300)) {
    attn_case c = case_of(d.raw, ctx, 200'000);
    c.causal = true;  // as fuzz_differential makes a cache case
    c.mask_shape = {};
    c.lq = c.lk;
    const std::int64_t rows = 1 + static_cast<std::int64_t>(d.raw.seed % 300);
    // The rapidcheck backend, recording each choice it makes.
    const auto recorded = rc::gen::exec([&] {
      rc_choices rc;
      recording_choices rec(rc);
      cache_plan p = plan_of(rec, c, rows);
      return std::make_pair(p, rec.log());
    });
    const auto [plan, log] = recorded(rc::Random(d.raw.seed), rc::kNominalSize).value();
    const std::vector<std::uint8_t> bytes = encode_choices(log);
    byte_choices in(bytes.data(), bytes.size());
    const cache_plan from_bytes = plan_of(in, c, rows);
    EXPECT_EQ(plan_difference(plan, from_bytes), "") << to_line(c) << ", " << rows << " rows";
    EXPECT_TRUE(in.exhausted());
    ++plans;
    multi_step += plan.steps.size() > 2;
    shuffled += plan.page_order.size() > 1;
  }
  // The comparison saw plans of every kind.
  EXPECT_EQ(plans, 300);
  EXPECT_GE(multi_step, 30);
  EXPECT_GE(shuffled, 30);
}

// A byte backend that reads choices differently: every choice whose range
// has n values comes back one higher (modulo n).
class skewed_choices final : public choices {
 public:
  skewed_choices(choices& inner, std::int64_t n) : inner_(inner), n_(n) {}
  std::int64_t in_range(std::int64_t lo, std::int64_t hi) override {
    const std::int64_t v = inner_.in_range(lo, hi);
    return hi - lo + 1 == n_ ? lo + (v - lo + 1) % n_ : v;
  }
  bool exhausted() const override { return inner_.exhausted(); }

 private:
  choices& inner_;
  std::int64_t n_;
};

TEST(case_space, a_backend_that_maps_one_choice_differently_is_caught) {
  // The comparison above can fail: a byte backend whose D and Dv choices
  // (the ranges of size 23 * 16) are off by one gives another case in every
  // regime, and one whose regime choice is off by one in some regime.
  const auto s = subject::load("builtin");
  const case_context ctx = context_of(*s, true, true);
  for (const std::int64_t n : {std::int64_t{n_head_dims * 16}, std::int64_t{100}}) {
    std::map<std::string, int> caught;
    for (const draw& d : draws(*s, gen_options{}, 600)) {
      const std::vector<std::uint8_t> bytes = encode_choices(header_record(d.raw));
      byte_choices in(bytes.data(), bytes.size());
      skewed_choices skewed(in, n);
      const attn_case c = case_of(read_choices(skewed), ctx, gen_options{}.max_work);
      caught[regime_name(d.raw.regime)] += !header_difference(d.generated, c).empty();
    }
    if (n == 100) {
      EXPECT_GE(caught["small"] + caught["hint"] + caught["decode"] + caught["prefill"] + caught["wide"], 30);
      continue;
    }
    for (const char* r : {"small", "hint", "decode", "prefill", "wide"})
      EXPECT_GE(caught[r], 10) << "a skewed head-size choice went unnoticed in regime " << r;
  }
}

}  // namespace
}  // namespace attncheck
