// The run configuration's codec: one table of keys, each with its limit,
// parser and printer (attncheck/run_config.hpp).
#include "attncheck/run_config.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <thread>

#include "attncheck/case.hpp"
#include "attncheck/environment.hpp"

namespace attncheck {

namespace {

std::string text_of(double x) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

template <class T>
std::string text_of_int(T x) {
  return std::to_string(x);
}

[[noreturn]] void bad(const std::string& source, std::string_view key, std::string_view value, const std::string& want) {
  throw input_error(source, std::string(key) + "=" + std::string(value) + ": " + std::string(key) + " " + want);
}

template <class T>
T integer_in(const std::string& source, std::string_view key, std::string_view v, T lo, T hi) {
  T x{};
  const auto r = std::from_chars(v.data(), v.data() + v.size(), x);
  if (v.empty() || r.ec != std::errc() || r.ptr != v.data() + v.size() || x < lo || x > hi)
    bad(source, key, v, "is an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

double real_in(const std::string& source, std::string_view key, std::string_view v, double lo, double hi) {
  double x = 0;
  const auto r = std::from_chars(v.data(), v.data() + v.size(), x);
  if (v.empty() || r.ec != std::errc() || r.ptr != v.data() + v.size() || !std::isfinite(x) || x < lo || x > hi)
    bad(source, key, v, "is a number in [" + text_of(lo) + ", " + text_of(hi) + "]");
  return x;
}

bool flag_in(const std::string& source, std::string_view key, std::string_view v) {
  if (v == "1" || v == "true") return true;
  if (v == "0" || v == "false") return false;
  bad(source, key, v, "is 0 or 1");
}

// One key of the table: how to set it from text, print it, compare and copy it.
struct field {
  run_key key;
  std::function<void(run_config&, std::string_view, const std::string&)> set;
  std::function<std::vector<std::string>(const run_config&)> print;  ///< one value, or one per `only` entry
  std::function<bool(const run_config&, const run_config&)> same;
  std::function<void(run_config&, const run_config&)> copy;
};

template <class T>
field integer_field(const char* key, const char* what, bool verdict, T run_config::*m, T lo, T hi) {
  return {{key, what, verdict},
          [=](run_config& c, std::string_view v, const std::string& src) { c.*m = integer_in<T>(src, key, v, lo, hi); },
          [=](const run_config& c) { return std::vector<std::string>{text_of_int(c.*m)}; },
          [=](const run_config& a, const run_config& b) { return a.*m == b.*m; },
          [=](run_config& to, const run_config& from) { to.*m = from.*m; }};
}

// `ref` is a generic lambda giving the member of a (const) run_config.
template <class Ref>
field real_field(const char* key, const char* what, bool verdict, Ref ref, double lo, double hi) {
  return {{key, what, verdict},
          [=](run_config& c, std::string_view v, const std::string& src) { ref(c) = real_in(src, key, v, lo, hi); },
          [=](const run_config& c) { return std::vector<std::string>{text_of(ref(c))}; },
          [=](const run_config& a, const run_config& b) { return ref(a) == ref(b); },
          [=](run_config& to, const run_config& from) { ref(to) = ref(from); }};
}

field flag_field(const char* key, const char* what, bool verdict, bool run_config::*m) {
  return {{key, what, verdict},
          [=](run_config& c, std::string_view v, const std::string& src) { c.*m = flag_in(src, key, v); },
          [=](const run_config& c) { return std::vector<std::string>{c.*m ? "1" : "0"}; },
          [=](const run_config& a, const run_config& b) { return a.*m == b.*m; },
          [=](run_config& to, const run_config& from) { to.*m = from.*m; }};
}

// A value the text form can carry: no separator inside.
std::string_view plain(const std::string& source, std::string_view key, std::string_view v) {
  if (v.find_first_of(", \t\n") != std::string_view::npos) bad(source, key, v, "holds no ',' or space");
  return v;
}

field text_field(const char* key, const char* what, bool verdict, std::string run_config::*m) {
  return {{key, what, verdict},
          [=](run_config& c, std::string_view v, const std::string& src) { c.*m = std::string(plain(src, key, v)); },
          [=](const run_config& c) { return std::vector<std::string>{c.*m}; },
          [=](const run_config& a, const run_config& b) { return a.*m == b.*m; },
          [=](run_config& to, const run_config& from) { to.*m = from.*m; }};
}

const std::vector<field>& fields() {
  static const std::vector<field> table = [] {
    std::vector<field> t;
    t.push_back(integer_field<std::uint64_t>("seed", "rapidcheck seed", true, &run_config::seed, 0, UINT64_MAX));
    t.push_back(integer_field<int>("cases", "cases per law", true, &run_config::cases, 1, run_default::max_cases));
    t.push_back(integer_field<int>("max_size", "rapidcheck's size ceiling", true, &run_config::max_size, 0, 1'000'000));
    t.push_back(integer_field<std::int64_t>("max_work", "largest case while a law's budget lasts", true, &run_config::max_work,
                                            16, run_default::max_work_limit));
    t.push_back(integer_field<std::int64_t>("small_work", "largest case once the budget is spent", true, &run_config::small_work,
                                            1, run_default::max_work_limit));
    t.push_back(integer_field<std::int64_t>("law_work", "each law's budget of multiply-adds on large cases", true,
                                            &run_config::law_work, 0, std::int64_t{1} << 50));
    t.push_back(text_field("reproduce", "RC_PARAMS reproduce string", true, &run_config::reproduce));
    t.push_back({{"only", "a law or group to run (repeatable; empty value: every law)", true},
                 [](run_config& c, std::string_view v, const std::string& src) {
                   if (v.empty())
                     c.only.clear();
                   else
                     c.only.emplace_back(plain(src, "only", v));
                 },
                 [](const run_config& c) { return c.only; },
                 [](const run_config& a, const run_config& b) { return a.only == b.only; },
                 [](run_config& to, const run_config& from) { to.only = from.only; }});
    t.push_back(integer_field<int>("jobs", "laws at once (0: the CPUs, at most 8)", false, &run_config::jobs, 0, 64));
    t.push_back(real_field(
        "law_timeout", "seconds one law may run", true, [](auto& c) -> auto& { return c.law_timeout; }, 0.1, 86400));
    t.push_back(real_field(
        "watchdog_floor", "seconds a call may always run", true, [](auto& c) -> auto& { return c.watchdog.floor_s; }, 0.01,
        86400));
    t.push_back(real_field(
        "watchdog_factor", "a call is hung past this multiple of its expected time", true,
        [](auto& c) -> auto& { return c.watchdog.factor; }, 1, 1e6));
    t.push_back(flag_field("isolate", "each law in a child process", true, &run_config::isolate));
    t.push_back(flag_field("strict", "refuse a subject that declares u > 2^-24", true, &run_config::strict));
    t.push_back(flag_field("prob_fails_gate", "a FAIL(prob) fails the gate", true, &run_config::prob_fails_gate));
    t.push_back(flag_field("strict_declines", "a case the subject declines fails the law", true, &run_config::strict_declines));
    t.push_back(text_field("out", "where counterexamples are saved", false, &run_config::out_dir));
    t.push_back(text_field("json", "per-law results as JSON", false, &run_config::json));
    t.push_back(text_field("junit", "JUnit XML", false, &run_config::junit));
    t.push_back(real_field(
        "progress_seconds", "seconds between plain progress lines", false, [](auto& c) -> auto& { return c.progress_seconds; },
        0.1, 3600));
    t.push_back(flag_field("stats", "print the realized distribution of the cases", false, &run_config::stats));
    return t;
  }();
  return table;
}

std::string key_list() {
  std::string s;
  for (const auto& f : fields()) s += (s.empty() ? "" : ", ") + std::string(f.key.key);
  return s;
}

const field& field_of(std::string_view key, const std::string& source) {
  for (const auto& f : fields())
    if (key == f.key.key) return f;
  throw input_error(source, "unknown key '" + std::string(key) + "' (one of: " + key_list() + ")");
}

std::string minimal_of(const run_config& c, const run_config& base, bool verdict_only) {
  std::string s;
  const auto add = [&s](const char* key, const std::string& v) { s += (s.empty() ? "" : " ") + std::string(key) + "=" + v; };
  for (const auto& f : fields()) {
    if ((verdict_only && !f.key.verdict) || f.same(c, base)) continue;
    if (std::string_view(f.key.key) == "only" && !base.only.empty()) add("only", "");  // start from none
    for (const auto& v : f.print(c)) add(f.key.key, v);
  }
  return s;
}

}  // namespace

bool run_config::operator==(const run_config& o) const {
  for (const auto& f : fields())
    if (!f.same(*this, o)) return false;
  return progress == o.progress;
}

run_config run_defaults(entry_point e) {
  run_config c;
  switch (e) {
    case entry_point::gate_cli: break;
    case entry_point::library:
      c.cases = run_default::quick_cases;
      c.jobs = run_default::library_jobs;
      break;
    case entry_point::gtest:
      c.cases = run_default::quick_cases;
      c.law_work = run_default::gtest_law_work;
      c.jobs = run_default::library_jobs;
      break;
    case entry_point::python:
      c.cases = run_default::quick_cases;
      c.jobs = run_default::library_jobs;
      c.law_timeout = run_default::python_law_timeout;
      break;
    case entry_point::mutation: c.law_timeout = run_default::mutation_law_timeout; break;
  }
  return c;
}

int resolved_jobs(int jobs) { return jobs > 0 ? jobs : std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, 8); }

void set_run_field(run_config& c, std::string_view key, std::string_view value, const std::string& source) {
  field_of(key, source).set(c, value, source);
}

run_config parse_run_config(std::string_view text, run_config base, const std::string& source) {
  std::string commas(text);
  std::replace_if(
      commas.begin(), commas.end(), [](char ch) { return ch == ' ' || ch == '\t' || ch == '\n'; }, ',');
  for (const auto& [key, value] : parse_key_values(commas, source)) set_run_field(base, key, value, source);
  return base;
}

std::string minimal_string(const run_config& c, const run_config& base) { return minimal_of(c, base, false); }

std::string run_string(const run_config& c) { return minimal_of(c, run_config{}, true); }

void copy_run_field(run_config& to, const run_config& from, std::string_view key) { field_of(key, "run").copy(to, from); }

const std::vector<run_key>& run_keys() {
  static const std::vector<run_key> keys = [] {
    std::vector<run_key> k;
    for (const auto& f : fields()) k.push_back(f.key);
    return k;
  }();
  return keys;
}

}  // namespace attncheck
