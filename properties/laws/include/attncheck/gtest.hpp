// GoogleTest integration: one test per registered law on your subject.
//
//     #include <attncheck/gtest.hpp>
//     ATTNCHECK_GATE_TESTS(my_kernel, "path/to/libmy_kernel.so:block=64");
//
// instantiates a value-parameterized test over all_laws(), so ctest (with
// gtest_discover_tests) lists one test per law, named
// all_laws/my_kernel.law/<group>_<law_name>. A law the subject cannot take
// (a feature it does not declare) is reported as skipped; a failure prints the
// gate's one-screen verdict (case, worst element, RC_PARAMS to reproduce).
// The subject spec is anything `attncheck gate --subject` takes: a plugin
// path with options, or a registered kind (builtin and naive once the program
// links attncheck::subjects and calls attncheck::register_bundled_subjects()).
//
// Run options come from the environment (attncheck/environment.hpp), so ctest properties can set them,
// read through the run codec (attncheck/run_config.hpp: a bad value is one line naming the variable and its limit)
// over the run table's gtest defaults:
//   ATTNCHECK_LAW_CASES  cases per law (default 100)
//   ATTNCHECK_LAW_SEED   rapidcheck seed (default 1)
//   ATTNCHECK_LAW_WORK   multiply-adds each law may spend on large cases (default 20000000)
// ATTNCHECK_GATE_TESTS_WITH(suite, spec, options) takes an attncheck::run_options instead.
//
// Link attncheck::laws and GTest::gtest_main (this header does not bring GTest).
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "attncheck/environment.hpp"
#include "attncheck/runner.hpp"

namespace attncheck::gtest {

/// The name of every registered law, in gate order.
inline std::vector<std::string> law_names() {
  std::vector<std::string> names;
  for (const auto& l : all_laws()) names.push_back(l.name);
  return names;
}

/// A GoogleTest-safe test name: "causal.future_keys" -> "causal_future_keys".
inline std::string test_name(const testing::TestParamInfo<std::string>& p) {
  std::string n = p.param;
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

/// The run configuration of ATTNCHECK_GATE_TESTS: run_defaults(entry_point::gtest)
/// with ATTNCHECK_LAW_CASES, ATTNCHECK_LAW_SEED and ATTNCHECK_LAW_WORK applied
/// (cases, seed, law_work). Throws input_error naming the variable on a bad value.
inline run_config config_from_environment() {
  run_config c = run_defaults(entry_point::gtest);
  for (const auto& [variable, key] : {std::pair{"ATTNCHECK_LAW_CASES", "cases"}, std::pair{"ATTNCHECK_LAW_SEED", "seed"},
                                      std::pair{"ATTNCHECK_LAW_WORK", "law_work"}})
    if (const auto& v = environment(variable); !v.empty()) set_run_field(c, key, v, variable);
  return c;
}

/// Run options from the environment (config_from_environment).
inline run_options options_from_environment() { return run_options_of(config_from_environment()); }

/// One law on one subject, as GoogleTest assertions: fail and unjudged fail
/// the test, skip skips it.
inline void check_law(const std::string& law_name, const std::string& subject_spec, const run_options& ro) {
  const auto s = subject::load(subject_spec);
  const law* l = find_law(law_name);
  ASSERT_NE(l, nullptr) << "no law named " << law_name;
  if (const auto why = l->applicable(*s); !why.empty()) GTEST_SKIP() << why;
  const law_report r = run_law(*l, *s, ro);
  if (r.v == verdict::skip) GTEST_SKIP() << r.skip_reason;
  EXPECT_NE(r.v, verdict::fail) << failure_screen(r, *s, "");
  EXPECT_NE(r.v, verdict::unjudged) << l->name << " judged " << r.judged << " of " << r.cases << " cases (floor " << l->min_judged
                                    << "): " << r.unjudged_why;
  EXPECT_GT(r.cases, 0) << l->name << " ran no case";
  std::cout << "[ attncheck ] " << l->name << " on " << s->name() << ": " << r.cases << " cases, seed " << ro.seed
            << ", max observed/bound " << r.max_ratio << "\n";
}

}  // namespace attncheck::gtest

/// One GoogleTest test per law of the registry, on the subject `subject_spec`
/// (a string expression), with run options from the environment.
#define ATTNCHECK_GATE_TESTS(suite_name, subject_spec) \
  ATTNCHECK_GATE_TESTS_WITH(suite_name, subject_spec, ::attncheck::gtest::options_from_environment())

/// The same with explicit run options (an expression of type attncheck::run_options).
#define ATTNCHECK_GATE_TESTS_WITH(suite_name, subject_spec, run_options_expr)                                \
  class suite_name : public ::testing::TestWithParam<std::string> {};                                        \
  TEST_P(suite_name, law) { ::attncheck::gtest::check_law(GetParam(), (subject_spec), (run_options_expr)); } \
  INSTANTIATE_TEST_SUITE_P(all_laws, suite_name, ::testing::ValuesIn(::attncheck::gtest::law_names()),       \
                           ::attncheck::gtest::test_name)
