// Subcommands of build/attncheck; each add_* registers one, run_selected runs it.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "attncheck/campaign.hpp"

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

/// The end of `campaign` and of a campaign `merge`: the result's JSON where
/// json_path names a file (then "results: PATH"), and the exit code: 1 when
/// the result has a violation, else 0.
int finish_campaign(const campaign_result& r, const std::string& json_path);

/// Runs the subcommand the user chose; returns the process exit code.
int run_selected(CLI::App& app);

}  // namespace attncheck::cli
