// attncheck bench: forwards to the bundled kernel's benchmark (impl/bench).
#include <iostream>
#include <vector>

#include "cli_state.hpp"
#include "commands.hpp"

#ifdef ATTNCHECK_HAVE_BENCH
#include "bench.hpp"
#endif

namespace attncheck::cli {

namespace {
std::vector<std::string> bench_rest;

int run_bench() {
#ifdef ATTNCHECK_HAVE_BENCH
  std::vector<std::string> args{"attncheck bench"};
  args.insert(args.end(), bench_rest.begin(), bench_rest.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return attnimpl::bench::run(static_cast<int>(argv.size()), argv.data());
#else
  std::cerr << "attncheck: this build has no benchmark (impl/bench not built)\n";
  return 2;
#endif
}
}  // namespace

void add_bench(CLI::App& app) {
  auto* b = app.add_subcommand("bench", "Benchmark the bundled kernel: FMA peak and bandwidth probes, prefill and decode cases");
  b->allow_extras();
  b->add_option("args", bench_rest, "arguments passed to the benchmark (try --help)");
  register_runner(b, [] { return run_bench(); });
}

}  // namespace attncheck::cli
