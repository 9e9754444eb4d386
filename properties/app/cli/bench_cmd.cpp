// attncheck bench: forwards to the bundled kernel's benchmark (impl/bench);
// --html FILE also draws its table (the benchmark's own output, read back).
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <iostream>
#include <string>
#include <thread>
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
// Runs fn with standard output passing through a pipe: every byte still goes
// to the real standard output as it comes, and is also kept and returned.
std::string tee_stdout(const std::function<void()>& fn) {
  std::fflush(stdout);
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
  const int real = dup(STDOUT_FILENO);
  dup2(fds[1], STDOUT_FILENO);
  close(fds[1]);
  std::string kept;
  std::thread reader([&kept, fd = fds[0], real] {
    char buf[4096];
    for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) {
      kept.append(buf, static_cast<std::size_t>(n));
      for (ssize_t done = 0; done < n;) {
        const ssize_t w = write(real, buf + done, static_cast<std::size_t>(n - done));
        if (w <= 0) break;
        done += w;
      }
    }
    close(fd);
  });
  fn();
  std::fflush(stdout);
  dup2(real, STDOUT_FILENO);  // closes the pipe's last write end: the reader sees its end
  close(real);
  reader.join();
  return kept;
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
  if (html.empty()) return attnimpl::bench::run(static_cast<int>(argv.size()), argv.data());
  int status = 0;
  const std::string table = tee_stdout([&] { status = attnimpl::bench::run(static_cast<int>(argv.size()), argv.data()); });
  if (status != 0) return status;
  const html::bench_report r = html::parse_bench_table(table);
  if (r.cases.empty()) throw input_error("--html", "the benchmark printed no case row to draw");
  html::write_bench_html(html, r);
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
