// Which subcommand runs: each add_* registers its runner here.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace attncheck::cli {

void register_runner(CLI::App* sub, std::function<int()> run);

/// Largest --max-work: about 10 s of the MPFR oracle for one case (~500 ns a multiply-add).
inline constexpr std::int64_t max_work_limit = 20'000'000;

/// Cases per law of `attncheck gate` when --cases is not given.
int default_gate_cases();

}  // namespace attncheck::cli
