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
CLI::App* bench_app = nullptr;

int run_bench() {
#ifdef ATTNCHECK_HAVE_BENCH
  // Everything after `bench` (options included) belongs to the benchmark.
  std::vector<std::string> args{"attncheck bench"};
  for (const auto& a : bench_app->remaining()) args.push_back(a);
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
  bench_app = app.add_subcommand("bench", "Benchmark the bundled kernel: FMA peak and bandwidth probes, prefill and decode cases "
                                          "(options pass through: --threads N, --reps N, --quick, --no-rss)");
  bench_app->allow_extras();
  bench_app->prefix_command();
  register_runner(bench_app, [] { return run_bench(); });
}

}  // namespace attncheck::cli
