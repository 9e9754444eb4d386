// Which subcommand runs: each add_* registers its runner here.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace attncheck::cli {

void register_runner(CLI::App* sub, std::function<int()> run);

}  // namespace attncheck::cli
