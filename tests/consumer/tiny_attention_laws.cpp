// One ctest test per law of attncheck on the tiny C plugin of this project.
#include <attncheck/gtest.hpp>
#include <attncheck/version.hpp>

ATTNCHECK_GATE_TESTS(tiny_attention, TINY_ATTENTION_PLUGIN);

// The header the package installed agrees with the package's CMake variables.
TEST(installed_attncheck, reports_its_versions) {
  EXPECT_STREQ(attncheck::version_string, EXPECTED_ATTNCHECK_VERSION);
  EXPECT_STREQ(attncheck::contract_version, EXPECTED_CONTRACT_VERSION);
  EXPECT_FALSE(attncheck::gtest::law_names().empty());
}
