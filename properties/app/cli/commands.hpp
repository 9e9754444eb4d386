// Subcommands of build/attncheck; each add_* registers one, run_selected runs it.
#pragma once

#include <CLI/CLI.hpp>

namespace attncheck::cli {

void add_oracle(CLI::App& app);
void add_gate(CLI::App& app);
void add_repro(CLI::App& app);
void add_laws(CLI::App& app);
void add_case(CLI::App& app);
void add_bench(CLI::App& app);
void add_campaign(CLI::App& app);
void add_mutation(CLI::App& app);
void add_merge(CLI::App& app);

/// Runs the subcommand the user chose; returns the process exit code.
int run_selected(CLI::App& app);

}  // namespace attncheck::cli
