// Which subcommand runs: each add_* registers its runner here.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace attncheck::cli {

void register_runner(CLI::App* sub, std::function<int()> run);

/// Cases per law of `attncheck gate` when --cases is not given.
int default_gate_cases();

}  // namespace attncheck::cli
