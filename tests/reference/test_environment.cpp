// The environment codec: documented variables only, read once; the
// key=value parser every setting string goes through.
#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>

#include "attncheck/case.hpp"
#include "attncheck/environment.hpp"

namespace attncheck {
namespace {

TEST(environment, undocumented_names_are_refused_and_values_are_read_once) {
  EXPECT_THROW(environment("ATTNCHECK_NO_SUCH_VARIABLE"), std::logic_error);
  const std::string first = environment("ATTNCHECK_FUZZ_SUBJECT");
  ::setenv("ATTNCHECK_FUZZ_SUBJECT", (first + "changed").c_str(), 1);
  EXPECT_EQ(environment("ATTNCHECK_FUZZ_SUBJECT"), first);
  for (const auto& v : environment_variables()) {
    // The suite's own, and the bundled kernel's one (ATTNIMPL_ISA, which its builtin subject reads).
    const std::string name = v.name;
    EXPECT_TRUE(name.rfind("ATTNCHECK_", 0) == 0 || name == "ATTNIMPL_ISA") << name;
    EXPECT_GT(std::string(v.what).size(), 10u) << v.name << " is not described";
  }
}

TEST(environment, key_values_parse_in_order_and_name_the_field) {
  const auto kv = parse_key_values("a=1,,b=,c=x=y", "ATTNCHECK_FUZZ");
  ASSERT_EQ(kv.size(), 3u);
  EXPECT_EQ(kv[0], (std::pair<std::string, std::string>{"a", "1"}));
  EXPECT_EQ(kv[1], (std::pair<std::string, std::string>{"b", ""}));
  EXPECT_EQ(kv[2], (std::pair<std::string, std::string>{"c", "x=y"}));
  EXPECT_TRUE(parse_key_values("", "f").empty());
  for (const char* bad : {"a", "a=1,b", "=1"}) {
    try {
      parse_key_values(bad, "ATTNCHECK_FUZZ");
      FAIL() << bad << " parsed";
    } catch (const input_error& e) {
      EXPECT_EQ(e.field(), "ATTNCHECK_FUZZ");
    }
  }
}

}  // namespace
}  // namespace attncheck
