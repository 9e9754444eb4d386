#include "attncheck/environment.hpp"

#include <cstdlib>
#include <map>
#include <stdexcept>

#include "attncheck/case.hpp"

namespace attncheck {

const std::vector<environment_variable>& environment_variables() {
  static const std::vector<environment_variable> table = {
      {"ATTNCHECK_LAW_CASES", "cases per law of ATTNCHECK_GATE_TESTS (attncheck/gtest.hpp) and the ctest law properties"},
      {"ATTNCHECK_LAW_SEED", "rapidcheck seed of ATTNCHECK_GATE_TESTS (default 1)"},
      {"ATTNCHECK_LAW_WORK", "multiply-adds each law may spend on a large case in ATTNCHECK_GATE_TESTS (default 20000000)"},
      {"ATTNCHECK_PYTHON_BRIDGE", "path of libattncheck_python.so for python: subjects (default: found beside the binary)"},
      {"ATTNCHECK_FUZZ", "the fuzz harnesses' settings, key=value,... (docs/fuzz.md)"},
      {"ATTNCHECK_FUZZ_SUBJECT", "the subject the fuzz harnesses check (default builtin:tiles=tiny)"},
      {"ATTNCHECK_FUZZ_WRITE_CASE", "retired: ATTNCHECK_FUZZ=write_case=... (refused when set)"},
      {"ATTNCHECK_FUZZ_VERBOSE", "retired: ATTNCHECK_FUZZ=verbose=1 (refused when set)"},
      {"ATTNCHECK_FUZZ_EXPECT_LAW", "retired: ATTNCHECK_FUZZ=expect_law=... (refused when set)"},
      {"ATTNCHECK_FUZZ_EXPECT_WHY", "retired: ATTNCHECK_FUZZ=expect_why=... (refused when set)"},
      {"ATTNCHECK_FUZZ_STRUCTURAL", "retired: ATTNCHECK_FUZZ=structural=1 (refused when set)"},
      {"ATTNIMPL_ISA",
       "the builtin subject's instruction set by default: auto, avx512, avx2 or portable (its option simd= wins)"},
      {"ATTNCHECK_SEED", "tests: the seed of the oracle's randomized tests (tests/reference)"},
      {"ATTNCHECK_WRITE_CASES", "tests: rewrite the shipped case files of tests/cases (test_case_file)"},
  };
  return table;
}

const std::string& environment(std::string_view name) {
  static const std::map<std::string, std::string, std::less<>> values = [] {
    std::map<std::string, std::string, std::less<>> m;
    for (const auto& v : environment_variables()) {
      const char* value = std::getenv(v.name);
      m[v.name] = value ? value : "";
    }
    return m;
  }();
  const auto it = values.find(name);
  if (it == values.end()) throw std::logic_error("attncheck reads no environment variable " + std::string(name));
  return it->second;
}

std::vector<std::pair<std::string, std::string>> parse_key_values(std::string_view text, const std::string& field) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    if (item.empty()) continue;
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0) throw input_error(field, "'" + std::string(item) + "' is not key=value");
    out.emplace_back(std::string(item.substr(0, eq)), std::string(item.substr(eq + 1)));
  }
  return out;
}

}  // namespace attncheck
