// attncheck oracle FILE: the reference result of a case file as JSON.
#include <cmath>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>

#include "attncheck/case_file.hpp"
#include "attncheck/oracle.hpp"
#include "attncheck/version.hpp"
#include "cli_state.hpp"
#include "commands.hpp"

namespace attncheck::cli {

namespace {

struct oracle_args {
  std::string file;
  bool with_p = false;
  std::string precision = "mpfr50";
  double u = 0x1p-24;
  double exp_ulps = 1.0;
  std::int64_t key_blocks = 1;
} args;

// JSON has no infinities or NaN: they print as the strings "inf", "-inf", "nan".
nlohmann::json number(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return x;
}

// Not claimed (NaN) prints as null.
nlohmann::json claimed(double x) { return std::isnan(x) ? nlohmann::json(nullptr) : number(x); }

// An accuracy relative to its value: 0 for an exact value, inf for a nonzero
// error on a zero value.
double relative(double accuracy, double value) {
  if (accuracy == 0 || std::isnan(accuracy)) return accuracy;
  return std::isfinite(value) && value != 0 ? accuracy / std::fabs(value) : std::numeric_limits<double>::infinity();
}

// f(k) for every element k of a row-major box of extents extent[0..axes),
// nested as JSON arrays; k counts from `next`. oracle_result's O, LSE and P are
// row-major over (B, Lq, Hq, Dv), (B, Hq, Lq) and (B, Hq, Lq, Lk).
template <class F>
nlohmann::json nested(const std::int64_t* extent, int axes, std::size_t& next, F f) {
  auto a = nlohmann::json::array();
  for (std::int64_t x = 0; x < extent[0]; ++x) a.push_back(axes == 1 ? f(next++) : nested(extent + 1, axes - 1, next, f));
  return a;
}

template <class F>
nlohmann::json o_array(const attn_case& c, F f) {
  const std::int64_t extent[] = {c.b, c.lq, c.hq, c.dv};
  std::size_t k = 0;
  return nested(extent, 4, k, f);
}

template <class F>
nlohmann::json lse_array(const attn_case& c, F f) {
  const std::int64_t extent[] = {c.b, c.hq, c.lq};
  std::size_t k = 0;
  return nested(extent, 3, k, f);
}

int run() {
  const case_record rec = read_case_file(args.file);
  oracle_options opt;
  if (args.precision == "mpfr50")
    opt.precision = oracle_precision::mpfr50;
  else if (args.precision == "mpfr100")
    opt.precision = oracle_precision::mpfr100;
  else if (args.precision == "cpp_bin100")
    opt.precision = oracle_precision::cpp_bin100;
  else if (args.precision == "auto")
    opt.precision = oracle_precision::auto_tier;
  else
    throw input_error("--precision", "'" + args.precision + "' is not one of mpfr50, mpfr100, cpp_bin100, auto");
  opt.want_p = args.with_p;
  opt.want_accuracy = true;
  opt.out_type = rec.c.type;
  opt.bound.u_compute = args.u;
  opt.bound.exp_ulps = args.exp_ulps;
  opt.bound.key_blocks = args.key_blocks;
  const attn_case& c = rec.c;
  const oracle_result r = reference(c, opt);
  const std::string tier(name(r.tier));
  nlohmann::json j;
  // What produced these numbers (the oracle's own precision is "precision").
  j["attncheck"] = {{"version", version_string}, {"contract", contract_version}};
  j["case"] = to_line(c);
  j["precision"] = args.precision;
  // One tier computes every row of a case (auto falls back for the whole case).
  j["tier"] = tier;
  j["accuracy"] = oracle_accuracy_statement(opt.precision, r.tier);
  j["cite"] = {{"software", "attncheck"},
               {"version", version_string},
               {"contract", contract_version},
               {"tier", tier},
               {"precision", args.precision},
               {"reference", std::string("attncheck developers, \"attncheck: a verification suite for attention "
                                         "kernels\", version ") +
                                 version_string + " (CITATION.cff); oracle accuracy: docs/oracle.md"}};
  j["layout"] = {{"o", "[b][i][h][e]"}, {"lse", "[b][h][i]"}, {"p", "[b][h][i][j]"}};
  j["bound_params"] = {{"u_compute", args.u}, {"exp_ulps", args.exp_ulps}, {"key_blocks", args.key_blocks}};
  j["o"] = o_array(c, [&](std::size_t k) { return number(r.o[k]); });
  j["o_accuracy"] = o_array(c, [&](std::size_t k) { return claimed(r.o_accuracy[k]); });
  j["o_accuracy_relative"] = o_array(c, [&](std::size_t k) { return claimed(relative(r.o_accuracy[k], r.o[k])); });
  j["lse"] = lse_array(c, [&](std::size_t k) { return number(r.lse[k]); });
  j["lse_accuracy"] = lse_array(c, [&](std::size_t k) { return claimed(r.lse_accuracy[k]); });
  j["lse_accuracy_relative"] = lse_array(c, [&](std::size_t k) { return claimed(relative(r.lse_accuracy[k], r.lse[k])); });
  // The bound a subject declaring bound_params is judged against: not the oracle's error.
  j["subject_o_bound"] = o_array(c, [&](std::size_t k) { return number(r.o_bound[k]); });
  j["subject_lse_bound"] = lse_array(c, [&](std::size_t k) { return number(r.lse_bound[k]); });
  if (args.with_p) {
    const std::int64_t extent[] = {c.b, c.hq, c.lq, c.lk};
    std::size_t k = 0;
    j["p"] = nested(extent, 4, k, [&](std::size_t x) { return number(r.p[x]); });
  }
  std::cout << j.dump(2) << "\n";
  return 0;
}

}  // namespace

void add_oracle(CLI::App& app) {
  auto* sub = app.add_subcommand("oracle", "Print the reference O, LSE (and P) of a case file as JSON, with the stated accuracy");
  sub->add_option("file", args.file, "case file (JSON, format attncheck-case version 1)")->required();
  sub->add_flag("--p", args.with_p, "also print the weights P[b][h][i][j]");
  sub->add_option("--precision", args.precision,
                  "mpfr50 (default), mpfr100, cpp_bin100, or auto (the fast binary64 tier where sound, else mpfr50)");
  sub->add_option("--u", args.u, "compute unit roundoff for the bound (default 2^-24)")->check(number_in(0x1p-80, 0.25));
  sub->add_option("--exp-ulps", args.exp_ulps, "declared exp accuracy in ulps for the bound (default 1)")
      ->check(number_in(0.0, 1e6));
  sub->add_option("--key-blocks", args.key_blocks, "nb for the bound (default 1)")
      ->check(number_in(std::int64_t{1}, std::int64_t{1} << 40));
  register_runner(sub, run);
}

}  // namespace attncheck::cli
