// subject.h's limits against the host's checks: each named constant is the
// edge the host enforces (accepted at the limit, refused one step beyond it,
// with an error naming the field and quoting the limit), so the header and the
// code cannot drift apart again.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "attncheck/case.hpp"
#include "attncheck/subject.h"
#include "attncheck/subject_host.hpp"
#include "test_instance.hpp"

namespace attncheck {
namespace {

std::size_t seen_err_len = 0;

attncheck_instance valid_instance() {
  attncheck_instance d = f32_test_instance(ATTNCHECK_SUBJECT_ABI_VERSION_2, "limits");
  d.attend = [](void*, const attncheck_problem* p, char*, size_t err_len) {
    seen_err_len = err_len;
    auto* o = static_cast<float*>(p->o);
    for (std::int64_t e = 0; e < p->dv; ++e) o[e * p->o_stride[3]] = 0;
    return 0;
  };
  return d;
}

// Empty when accepted; otherwise the error text.
template <class Edit>
std::string load_error(Edit edit) {
  attncheck_instance d = valid_instance();
  edit(d);
  try {
    subject::adopt(&d, "limits");
    return {};
  } catch (const input_error& e) {
    return e.what();
  }
}

void expect_refused(const std::string& err, const std::string& field, const std::string& limit) {
  ASSERT_FALSE(err.empty()) << "accepted a declaration beyond " << limit;
  EXPECT_NE(err.find(field), std::string::npos) << err;
  EXPECT_NE(err.find(limit), std::string::npos) << err;
}

TEST(abi_limits, unit_roundoff_limits_are_the_hosts) {
  const double lo = ATTNCHECK_MIN_UNIT_ROUNDOFF, hi = ATTNCHECK_MAX_UNIT_ROUNDOFF;
  EXPECT_EQ(load_error([&](attncheck_instance& d) { d.compute_unit_roundoff = lo; }), "");
  EXPECT_EQ(load_error([&](attncheck_instance& d) { d.compute_unit_roundoff = hi; }), "");
  const std::string range = "[2^" + std::to_string(std::ilogb(lo)) + ", 2^" + std::to_string(std::ilogb(hi)) + "]";
  expect_refused(load_error([&](attncheck_instance& d) { d.compute_unit_roundoff = std::nextafter(lo, 0.0); }),
                 "compute_unit_roundoff", range);
  expect_refused(load_error([&](attncheck_instance& d) { d.compute_unit_roundoff = std::nextafter(hi, 1.0); }),
                 "compute_unit_roundoff", range);
}

TEST(abi_limits, exp_ulps_limits_are_the_hosts) {
  const double hi = ATTNCHECK_MAX_EXP_ULPS;
  EXPECT_EQ(load_error([&](attncheck_instance& d) { d.exp_ulps = 0; }), "");
  EXPECT_EQ(load_error([&](attncheck_instance& d) { d.exp_ulps = hi; }), "");
  const std::string range = "[0, " + std::to_string(static_cast<long long>(hi)) + "]";
  expect_refused(load_error([&](attncheck_instance& d) { d.exp_ulps = std::nextafter(hi, 1e300); }), "exp_ulps", range);
  expect_refused(load_error([&](attncheck_instance& d) { d.exp_ulps = -0x1p-1074; }), "exp_ulps", range);
  expect_refused(load_error([&](attncheck_instance& d) { d.exp_ulps = std::numeric_limits<double>::quiet_NaN(); }), "exp_ulps",
                 range);
}

TEST(abi_limits, size_hint_limit_is_the_hosts) {
  const std::int64_t hi = ATTNCHECK_MAX_SIZE_HINT;
  EXPECT_EQ(load_error([&](attncheck_instance& d) { d.hints.k_tile = hi; }), "");
  EXPECT_EQ(load_error([&](attncheck_instance& d) { d.hints.head_dims[ATTNCHECK_SIZE_HINT_SLOTS - 1] = hi; }), "");
  const std::string range = "[0, 2^" + std::to_string(std::ilogb(static_cast<double>(hi))) + "]";
  expect_refused(load_error([&](attncheck_instance& d) { d.hints.k_tile = hi + 1; }), "hints", range);
  expect_refused(load_error([&](attncheck_instance& d) { d.hints.lengths[ATTNCHECK_SIZE_HINT_SLOTS - 1] = hi + 1; }), "hints",
                 range);
  expect_refused(load_error([&](attncheck_instance& d) { d.hints.q_tile = -1; }), "hints", range);
}

TEST(abi_limits, key_blocks_clamp_is_the_hosts) {
  attncheck_instance d = valid_instance();
  d.key_blocks = [](void*, const attncheck_problem*) -> std::int64_t { return std::numeric_limits<std::int64_t>::max(); };
  const auto many = subject::adopt(&d, "limits");
  for (std::int64_t lk : {0, 1, 7, 4096}) {
    attn_case c;
    c.lk = lk;
    EXPECT_EQ(many->key_blocks(c), std::max<std::int64_t>(1, ATTNCHECK_MAX_KEY_BLOCKS_PER_KEY * lk)) << "lk=" << lk;
  }
  attncheck_instance z = valid_instance();
  z.key_blocks = [](void*, const attncheck_problem*) -> std::int64_t { return -5; };
  attn_case c;
  c.lk = 7;
  EXPECT_EQ(subject::adopt(&z, "limits")->key_blocks(c), 1);
}

TEST(abi_limits, err_capacity_is_what_the_host_passes) {
  attncheck_instance d = valid_instance();
  const auto s = subject::adopt(&d, "limits");
  attn_case c = parse_line("ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1,f32,values=normal,seed=1)");
  materialize(c);
  seen_err_len = 0;
  ASSERT_TRUE(s->attend(c).ok());
  EXPECT_EQ(seen_err_len, static_cast<std::size_t>(ATTNCHECK_ERR_CAPACITY));
}

// The prototypes subject.h declares are the entry-point types the host looks up.
TEST(abi_limits, entry_point_prototypes_match_the_types) {
  static_assert(std::is_same_v<decltype(&attncheck_subject_v2), attncheck_subject_entry_v2>);
  static_assert(std::is_same_v<decltype(&attncheck_subject_v1), attncheck_subject_entry>);
  EXPECT_STREQ(ATTNCHECK_SUBJECT_ENTRY_V2, "attncheck_subject_v2");
  EXPECT_STREQ(ATTNCHECK_SUBJECT_ENTRY, "attncheck_subject_v1");
}

}  // namespace
}  // namespace attncheck
