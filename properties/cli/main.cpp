// build/attncheck: the command-line face of the suite.
//   oracle FILE      the reference O and LSE (and P) of a case file, as JSON
//   gate             every law against a subject, with a verdict table
//   repro FILE       replays a saved counterexample
//   laws             lists the laws
//   case LINE        writes the case file of a one-line form
//   bench            the bundled kernel's benchmark table
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "attncheck/case.hpp"
#include "commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"attncheck: checks attention kernels against the laws of attention and a high-precision oracle"};
  app.require_subcommand(1);
  attncheck::cli::add_oracle(app);
  attncheck::cli::add_gate(app);
  attncheck::cli::add_repro(app);
  attncheck::cli::add_laws(app);
  attncheck::cli::add_case(app);
  attncheck::cli::add_bench(app);
  attncheck::cli::add_campaign(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return attncheck::cli::run_selected(app);
  } catch (const attncheck::input_error& e) {
    std::fprintf(stderr, "attncheck: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attncheck: error: %s\n", e.what());
    return 2;
  }
}
