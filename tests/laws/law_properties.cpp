// Every registered law, on the bundled kernel (production and tiny tiles) and
// on the naive f32 subject, as one ctest test per (law, subject). The list
// comes from the registry (all_laws()), so a new law is covered by
// construction: nothing here names a law.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <map>
#include <set>

#include "attncheck/environment.hpp"
#include "attncheck/bundled_subjects.hpp"
#include "attncheck/mutant_catalogue.hpp"
#include "attncheck/runner.hpp"

namespace attncheck {
namespace {

struct law_on_subject {
  std::string law, subject;
};

void PrintTo(const law_on_subject& p, std::ostream* os) { *os << p.law << " on " << p.subject; }

std::vector<law_on_subject> every_law_on_every_subject() {
  std::vector<law_on_subject> v;
  for (const auto& l : all_laws())
    for (const char* s : {"builtin", builtin_tiny, builtin_portable, "naive"}) v.push_back({l.name, s});
  return v;
}

std::string test_name(const testing::TestParamInfo<law_on_subject>& p) {
  std::string n = p.param.law + "_on_" + p.param.subject;
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

// Cases per law: 150 (ATTNCHECK_LAW_CASES overrides, e.g. for a longer local run).
int cases() {
  run_config c;
  c.cases = 150;
  if (const std::string& env = environment("ATTNCHECK_LAW_CASES"); !env.empty())
    set_run_field(c, "cases", env, "ATTNCHECK_LAW_CASES");
  return c.cases;
}

class law_holds : public testing::TestWithParam<law_on_subject> {};

TEST_P(law_holds, on_generated_cases) {
  const auto s = subject::load(GetParam().subject);
  const law* l = find_law(GetParam().law);
  ASSERT_NE(l, nullptr);
  if (const auto why = l->applicable(*s); !why.empty()) GTEST_SKIP() << why;
  run_options ro;
  ro.seed = 20261129;
  // The portable path computes the AVX2 path's bits (impl_isa_test), so it
  // needs only to show that it runs every law: a third of the cases.
  ro.cases = GetParam().subject == builtin_portable ? std::max(1, cases() / 3) : cases();
  ro.gen.law_work = run_default::gtest_law_work;  // a fifth of the gate's: ctest runs three subjects
  const law_report r = run_law(*l, *s, ro);
  EXPECT_NE(r.v, verdict::fail) << failure_screen(r, *s, "");
  EXPECT_NE(r.v, verdict::unjudged) << l->name << " judged " << r.judged << " of " << r.cases << " cases (floor " << l->min_judged
                                    << "): " << r.unjudged_why;
  EXPECT_GT(r.cases, 0);
}

INSTANTIATE_TEST_SUITE_P(every_law, law_holds, testing::ValuesIn(every_law_on_every_subject()), test_name);

TEST(laws, names_are_unique_and_grouped) {
  std::set<std::string> seen;
  for (const auto& l : all_laws()) {
    EXPECT_TRUE(seen.insert(l.name).second) << "duplicate law " << l.name;
    EXPECT_NE(l.name.find('.'), std::string::npos) << l.name << " has no group";
    EXPECT_FALSE(l.summary.empty()) << l.name;
    EXPECT_GT(l.min_judged, 0.0) << l.name << " has no judged floor";
  }
}

// One law table (catalogue/registry.cpp) serves the gate, this file, the
// fuzzers and the mutation table: each law must reach all of them.
TEST(laws, every_law_reaches_ctest_the_fuzzers_and_the_mutation_table) {
  // ctest: a (law, subject) test for each subject, found in gtest's own registry.
  std::set<std::string> instantiated;
  const auto* unit = testing::UnitTest::GetInstance();
  for (int i = 0; i < unit->total_test_suite_count(); ++i) {
    const auto* suite = unit->GetTestSuite(i);
    if (std::string(suite->name()) != "every_law/law_holds") continue;
    for (int j = 0; j < suite->total_test_count(); ++j) instantiated.insert(suite->GetTestInfo(j)->name());
  }
  for (const auto& l : all_laws())
    for (const char* s : {"builtin", builtin_tiny, builtin_portable, "naive"}) {
      const std::string name = "on_generated_cases/" + test_name(testing::TestParamInfo<law_on_subject>({l.name, s}, 0));
      EXPECT_TRUE(instantiated.count(name)) << l.name << " on " << s << " has no ctest test (" << name << ")";
    }
  // Fuzzers: fuzz_laws picks a law by its place in fuzzed_law_names(): every
  // law is there once, and every name there is a law.
  std::map<std::string, int> listed;
  for (const std::string& n : fuzzed_law_names()) {
    EXPECT_NE(find_law(n), nullptr) << "fuzzed_law_names() names " << n << ", which is no law";
    EXPECT_EQ(++listed[n], 1) << n << " is listed twice in fuzzed_law_names()";
  }
  for (const auto& l : all_laws())
    EXPECT_EQ(listed.count(l.name), 1u) << l.name << " is not in fuzzed_law_names(): fuzz_laws cannot reach it";
  // Mutation table: the table's first seed runs every law (the gate's list);
  // every mutant's expected laws must be registered laws (mutant_specs()
  // throws otherwise), and the table's short names must tell laws apart.
  std::vector<mutant_spec> specs;
  ASSERT_NO_THROW(specs = mutant_specs());
  EXPECT_FALSE(specs.empty());
  std::set<std::string> aliases;
  for (const auto& l : all_laws()) EXPECT_TRUE(aliases.insert(law_alias(l.name)).second) << l.name << ": short name taken";
}

}  // namespace
}  // namespace attncheck
