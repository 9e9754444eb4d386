// attncheck bench: forwards to the bundled kernel's benchmark (impl/bench);
// --html FILE also draws its result.
#include <iostream>
#include <string>
#include <vector>

#include "attncheck/report_html.hpp"
#include "cli_state.hpp"
#include "commands.hpp"

#ifdef ATTNCHECK_HAVE_BENCH
#include "bench.hpp"
#endif

namespace attncheck::cli {

namespace {
CLI::App* bench_app = nullptr;

#ifdef ATTNCHECK_HAVE_BENCH
// The bench's result as the HTML report draws it.
html::bench_report report_of(const attnimpl::bench::result& b) {
  html::bench_report r;
  r.threads = b.threads;
  r.peak_gflops = b.peaks.fma_all, r.peak_gflops_1 = b.peaks.fma1;
  r.bandwidth_gbs = b.peaks.bw_all, r.bandwidth_gbs_1 = b.peaks.bw1;
  for (const auto& row : b.cases)
    r.cases.push_back({.name = row.name,
                       .kind = row.decode ? "decode" : "prefill",
                       .threads = row.threads,
                       .ms = row.ms,
                       .gflops = row.gflops,
                       .gbs = row.gbs.value_or(0),
                       .baseline_ms = row.naive_ms.value_or(0)});
  r.table = b.text;
  return r;
}
#endif

int run_bench() {
#ifdef ATTNCHECK_HAVE_BENCH
  // Everything after `bench` (options included) belongs to the benchmark, but --html FILE.
  std::vector<std::string> args{"attncheck bench"};
  std::string html;
  const auto rest = bench_app->remaining();
  for (std::size_t i = 0; i < rest.size(); ++i) {
    if (rest[i] == "--html") {
      if (i + 1 == rest.size()) throw input_error("--html", "needs a file name");
      html = rest[++i];
    } else {
      args.push_back(rest[i]);
    }
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  attnimpl::bench::result measured;
  const int status = attnimpl::bench::run(static_cast<int>(argv.size()), argv.data(), measured);
  if (status != 0 || html.empty()) return status;
  if (measured.cases.empty()) throw input_error("--html", "the benchmark printed no case row to draw");
  html::write_bench_html(html, report_of(measured));
  std::cout << "report: " << html << "\n";
  return 0;
#else
  std::cerr << "attncheck: this build has no benchmark (impl/bench not built)\n";
  return 2;
#endif
}
}  // namespace

void add_bench(CLI::App& app) {
  bench_app = app.add_subcommand("bench",
                                 "Benchmark the bundled kernel: FMA peak and bandwidth probes, prefill and decode cases "
                                 "(options pass through: --threads N, --reps N, --quick, --no-rss; "
                                 "--html FILE also writes an HTML report)");
  bench_app->allow_extras();
  bench_app->prefix_command();
  register_runner(bench_app, [] { return run_bench(); });
}

}  // namespace attncheck::cli
