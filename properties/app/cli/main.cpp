// build/attncheck: the command-line face of the suite.
//   oracle FILE      the reference O and LSE (and P) of a case file, as JSON
//   gate             every law against a subject, with a verdict table
//   repro FILE       replays a saved counterexample
//   laws             lists the laws
//   case LINE        writes the case file of a one-line form
//   bench            the bundled kernel's benchmark table
//   mutation         gates every mutant of the bundled kernel (ci/mutation)
//   merge FILE...    one report of campaign shards or gate runs (their --json files)
//   --version        attncheck, contract and oracle versions (attncheck/version.hpp)
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>

#include "attncheck/bundled_subjects.hpp"
#include "attncheck/case.hpp"
#include "attncheck/suggest.hpp"
#include "attncheck/version.hpp"
#include "commands.hpp"

int main(int argc, char** argv) {
  attncheck::register_bundled_subjects();
  CLI::App app{"attncheck: checks attention kernels against the laws of attention and a high-precision oracle"};
#ifdef ATTNCHECK_PYTHON_EXECUTABLE
  // The python: subjects and the attncheck module load only in this interpreter (docs/python.md).
  app.set_version_flag("--version", std::string(attncheck::version_line) + "\npython: " ATTNCHECK_PYTHON_EXECUTABLE
                                                                           " (python: subjects and the attncheck module)");
#else
  app.set_version_flag("--version", std::string(attncheck::version_line) + "\npython: not built (ATTNCHECK_PYTHON off)");
#endif
  app.require_subcommand(1);
  attncheck::cli::add_oracle(app);
  attncheck::cli::add_gate(app);
  attncheck::cli::add_repro(app);
  attncheck::cli::add_laws(app);
  attncheck::cli::add_case(app);
  attncheck::cli::add_bench(app);
  attncheck::cli::add_campaign(app);
  attncheck::cli::add_mutation(app);
  attncheck::cli::add_merge(app);
  std::string names;
  bool known = false;
  for (const auto* sub : app.get_subcommands({})) {
    names += (names.empty() ? "" : ", ") + sub->get_name();
    known = known || (argc > 1 && sub->get_name() == argv[1]);
  }
  if (argc > 1 && argv[1][0] != '-' && !known) {
    std::fprintf(stderr, "attncheck: unknown command '%s' (one of: %s)\n", argv[1], names.c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // One line naming the option and the limit, like every other input error;
    // a misspelt flag of the command gets the nearest real one.
    std::string near;
    if (known) {
      std::vector<std::string> flags;
      for (const CLI::Option* o : app.get_subcommand(argv[1])->get_options())
        for (const std::string& n : o->get_lnames()) flags.push_back("--" + n);
      for (int i = 2; i < argc && near.empty(); ++i) {
        const std::string arg = argv[i], name = arg.substr(0, arg.find('='));
        if (name.rfind("--", 0) == 0 && std::find(flags.begin(), flags.end(), name) == flags.end())
          near = attncheck::did_you_mean(name, flags);
      }
    }
    std::fprintf(stderr, "attncheck: %s%s (see attncheck --help)\n", e.what(), near.c_str());
    return 2;
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
