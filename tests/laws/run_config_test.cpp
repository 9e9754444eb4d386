// The run configuration's codec (attncheck/run_config.hpp): the defaults
// print as nothing, the minimal string parses back to the same run, and a bad
// key or value is one error naming the field and its limit.
#include <gtest/gtest.h>

#include <string>

#include "attncheck/case.hpp"
#include "attncheck/run_config.hpp"

namespace attncheck {
namespace {

std::string error_of(const std::string& text, const run_config& base = run_config{}) {
  try {
    parse_run_config(text, base, "--run");
  } catch (const input_error& e) {
    EXPECT_EQ(e.field(), "--run");
    return e.what();
  }
  return "";
}

TEST(run_config, defaults_print_as_the_empty_string) {
  EXPECT_EQ(minimal_string(run_config{}), "");
  EXPECT_EQ(run_string(run_config{}), "");
  for (const auto e :
       {entry_point::gate_cli, entry_point::library, entry_point::gtest, entry_point::python, entry_point::mutation})
    EXPECT_EQ(minimal_string(run_defaults(e), run_defaults(e)), "");
  EXPECT_EQ(parse_run_config("", run_config{}, "--run"), run_config{});
}

TEST(run_config, the_table_keeps_every_entry_points_defaults) {
  const run_config cli;
  EXPECT_EQ(cli.cases, 1000);
  EXPECT_EQ(cli.seed, 1u);
  EXPECT_EQ(cli.law_work, 150'000'000);
  EXPECT_EQ(cli.max_work, 8'000'000);
  EXPECT_EQ(cli.jobs, 0);
  EXPECT_EQ(cli.law_timeout, 600);
  EXPECT_EQ(cli.out_dir, "attncheck-out");
  EXPECT_EQ(run_defaults(entry_point::library).cases, 100);
  EXPECT_EQ(run_defaults(entry_point::library).jobs, 2);
  EXPECT_EQ(run_defaults(entry_point::gtest).law_work, 20'000'000);
  EXPECT_EQ(run_defaults(entry_point::gtest).cases, 100);
  EXPECT_EQ(run_defaults(entry_point::python).law_timeout, 120);
  EXPECT_EQ(run_defaults(entry_point::python).jobs, 2);
  EXPECT_EQ(run_defaults(entry_point::mutation).law_timeout, 60);
  EXPECT_EQ(run_default::repro_timeout, 120);
  EXPECT_EQ(minimal_string(run_defaults(entry_point::python)), "cases=100 jobs=2 law_timeout=120");
}

TEST(run_config, minimal_prints_only_what_differs) {
  run_config c;
  c.cases = 300;
  c.seed = 7;
  EXPECT_EQ(minimal_string(c), "seed=7 cases=300");
  c.json = "out.json";
  c.jobs = 3;
  EXPECT_EQ(minimal_string(c), "seed=7 cases=300 jobs=3 json=out.json");
  EXPECT_EQ(run_string(c), "seed=7 cases=300");  // no jobs or files: they change no verdict
}

TEST(run_config, parse_of_minimal_is_the_same_run) {
  run_config c;
  c.seed = 18446744073709551615ull;
  c.cases = 1;
  c.max_size = 7;
  c.max_work = 16;
  c.small_work = 5;
  c.law_work = 0;
  c.reproduce = "BAEAAAAAAAAAAAA";
  c.only = {"cache", "gqa."};
  c.jobs = 64;
  c.law_timeout = 0.1;
  c.watchdog.floor_s = 1.0 / 3;
  c.watchdog.factor = 2.5;
  c.isolate = false;
  c.strict = true;
  c.prob_fails_gate = true;
  c.out_dir = "cases";
  c.json = "a.json";
  c.junit = "a.xml";
  c.progress_seconds = 0.5;
  c.stats = true;
  EXPECT_EQ(parse_run_config(minimal_string(c), run_config{}, "t"), c) << minimal_string(c);
  // Against another base too, `only` included (the text starts it from none).
  const run_config base = run_defaults(entry_point::gtest);
  run_config b = base;
  b.only = {"x"};
  run_config d = c;
  d.only.clear();
  EXPECT_EQ(parse_run_config(minimal_string(c, base), base, "t"), c);
  EXPECT_EQ(parse_run_config(minimal_string(d, b), b, "t"), d) << minimal_string(d, b);
  // Commas or spaces between fields.
  EXPECT_EQ(parse_run_config("cases=300,seed=7", run_config{}, "t"), parse_run_config("seed=7 cases=300", run_config{}, "t"));
}

TEST(run_config, a_bad_key_or_value_names_the_field_and_its_limit) {
  EXPECT_NE(error_of("colour=red").find("unknown key 'colour' (one of: seed, cases,"), std::string::npos)
      << error_of("colour=red");
  EXPECT_EQ(error_of("cases=0"), "--run: cases=0: cases is an integer in [1, 10000000]");
  EXPECT_EQ(error_of("cases=12x"), "--run: cases=12x: cases is an integer in [1, 10000000]");
  EXPECT_EQ(error_of("max_work=20000001"), "--run: max_work=20000001: max_work is an integer in [16, 20000000]");
  EXPECT_EQ(error_of("law_timeout=0"), "--run: law_timeout=0: law_timeout is a number in [0.1, 86400]");
  EXPECT_EQ(error_of("law_timeout=nan"), "--run: law_timeout=nan: law_timeout is a number in [0.1, 86400]");
  EXPECT_EQ(error_of("isolate=yes"), "--run: isolate=yes: isolate is 0 or 1");
  EXPECT_EQ(error_of("seed=-1"), "--run: seed=-1: seed is an integer in [0, 18446744073709551615]");
  EXPECT_EQ(error_of("cases"), "--run: 'cases' is not key=value");
  run_config c;
  EXPECT_THROW(set_run_field(c, "jobs", "65", "ATTNCHECK_LAW_JOBS"), input_error);
  EXPECT_EQ(c, run_config{});
}

TEST(run_config, copy_of_one_field) {
  run_config from;
  from.cases = 5;
  from.only = {"cache"};
  run_config to;
  copy_run_field(to, from, "cases");
  EXPECT_EQ(to.cases, 5);
  EXPECT_TRUE(to.only.empty());
  copy_run_field(to, from, "only");
  EXPECT_EQ(to, from);
}

}  // namespace
}  // namespace attncheck
