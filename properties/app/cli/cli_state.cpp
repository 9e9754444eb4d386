#include "cli_state.hpp"

#include <vector>

#include "commands.hpp"

namespace attncheck::cli {

namespace {
std::vector<std::pair<CLI::App*, std::function<int()>>>& runners() {
  static std::vector<std::pair<CLI::App*, std::function<int()>>> r;
  return r;
}
}  // namespace

void register_runner(CLI::App* sub, std::function<int()> run) { runners().emplace_back(sub, std::move(run)); }

int run_selected(CLI::App&) {
  for (auto& [sub, run] : runners())
    if (sub->parsed()) return run();
  return 2;
}

}  // namespace attncheck::cli
