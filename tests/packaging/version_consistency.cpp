// attncheck/version.hpp agrees with CMake's project version, docs/spec.md's
// contract version (passed in by tests/packaging/CMakeLists.txt) and the
// oracle's real type (its bits are checked at compile time).
#include <boost/multiprecision/mpfr.hpp>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

#include "attncheck/version.hpp"

static_assert(std::numeric_limits<boost::multiprecision::static_mpfr_float_50>::digits == attncheck::oracle_precision_bits,
              "version.hpp's oracle bits differ from static_mpfr_float_50's");

int main() {
  const std::string version = std::to_string(attncheck::version_major) + "." + std::to_string(attncheck::version_minor) + "." +
                              std::to_string(attncheck::version_patch);
  const std::string contract =
      std::to_string(attncheck::contract_version_major) + "." + std::to_string(attncheck::contract_version_minor);
  int bad = 0;
  if (version != EXPECTED_VERSION || std::strcmp(attncheck::version_string, EXPECTED_VERSION) != 0) {
    std::printf("version %s / %s, CMake says %s\n", version.c_str(), attncheck::version_string, EXPECTED_VERSION);
    bad = 1;
  }
  if (contract != EXPECTED_CONTRACT || std::strcmp(attncheck::contract_version, EXPECTED_CONTRACT) != 0) {
    std::printf("contract %s / %s, docs/spec.md says %s\n", contract.c_str(), attncheck::contract_version, EXPECTED_CONTRACT);
    bad = 1;
  }
  std::printf("%s\noracle: %s\n", attncheck::version_line, attncheck::oracle_precision_description);
  return bad;
}
