// attncheck oracle FILE: the reference result of a case file as JSON.
#include <cmath>
#include <iostream>
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
  opt.out_type = rec.c.type;
  opt.bound.u_compute = args.u;
  opt.bound.exp_ulps = args.exp_ulps;
  opt.bound.key_blocks = args.key_blocks;
  const attn_case& c = rec.c;
  const oracle_result r = reference(c, opt);
  nlohmann::json j;
  // What produced these numbers (the oracle's own precision is "precision").
  j["attncheck"] = {{"version", version_string}, {"contract", contract_version}};
  j["case"] = to_line(c);
  j["precision"] = args.precision;
  j["tier"] = std::string(name(r.tier));
  j["accuracy"] = oracle_accuracy_statement();
  j["layout"] = {{"o", "[b][i][h][e]"}, {"lse", "[b][h][i]"}, {"p", "[b][h][i][j]"}};
  j["bound_params"] = {{"u_compute", args.u}, {"exp_ulps", args.exp_ulps}, {"key_blocks", args.key_blocks}};
  auto o = nlohmann::json::array(), ob = nlohmann::json::array();
  for (std::int64_t b = 0; b < c.b; ++b) {
    auto ob_b = nlohmann::json::array(), o_b = nlohmann::json::array();
    for (std::int64_t i = 0; i < c.lq; ++i) {
      auto o_i = nlohmann::json::array(), ob_i = nlohmann::json::array();
      for (std::int64_t h = 0; h < c.hq; ++h) {
        auto o_h = nlohmann::json::array(), ob_h = nlohmann::json::array();
        for (std::int64_t e = 0; e < c.dv; ++e) {
          o_h.push_back(number(r.o[r.o_index(b, i, h, e)]));
          ob_h.push_back(number(r.o_bound[r.o_index(b, i, h, e)]));
        }
        o_i.push_back(o_h), ob_i.push_back(ob_h);
      }
      o_b.push_back(o_i), ob_b.push_back(ob_i);
    }
    o.push_back(o_b), ob.push_back(ob_b);
  }
  j["o"] = o;
  j["o_bound"] = ob;
  auto lse = nlohmann::json::array(), lseb = nlohmann::json::array(), p = nlohmann::json::array();
  for (std::int64_t b = 0; b < c.b; ++b) {
    auto l_b = nlohmann::json::array(), lb_b = nlohmann::json::array(), p_b = nlohmann::json::array();
    for (std::int64_t h = 0; h < c.hq; ++h) {
      auto l_h = nlohmann::json::array(), lb_h = nlohmann::json::array(), p_h = nlohmann::json::array();
      for (std::int64_t i = 0; i < c.lq; ++i) {
        l_h.push_back(number(r.lse[r.lse_index(b, h, i)]));
        lb_h.push_back(number(r.lse_bound[r.lse_index(b, h, i)]));
        if (args.with_p) {
          auto p_i = nlohmann::json::array();
          for (std::int64_t jj = 0; jj < c.lk; ++jj) p_i.push_back(number(r.p[r.p_index(b, h, i, jj)]));
          p_h.push_back(p_i);
        }
      }
      l_b.push_back(l_h), lb_b.push_back(lb_h), p_b.push_back(p_h);
    }
    lse.push_back(l_b), lseb.push_back(lb_b), p.push_back(p_b);
  }
  j["lse"] = lse;
  j["lse_bound"] = lseb;
  if (args.with_p) j["p"] = p;
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
  sub->add_option("--u", args.u, "compute unit roundoff for the bound (default 2^-24)")->check(CLI::Range(0x1p-80, 0.25));
  sub->add_option("--exp-ulps", args.exp_ulps, "declared exp accuracy in ulps for the bound (default 1)")
      ->check(CLI::Range(0.0, 1e6));
  sub->add_option("--key-blocks", args.key_blocks, "nb for the bound (default 1)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40));
  register_runner(sub, run);
}

}  // namespace attncheck::cli
