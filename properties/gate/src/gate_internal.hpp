// Internal to the gate (properties/gate/src/): the pieces one part of the
// gate needs from another. Not installed.
#pragma once

#include <cstdio>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "attncheck/gate.hpp"
#include "attncheck/isolate.hpp"

namespace attncheck::gate_detail {

// select.cpp: which laws a gate runs.
bool selected(const std::string& law, const std::vector<std::string>& only);

// One subject's part of a gate run: its instance and the laws it runs.
struct gate_plan {
  run_config run;  ///< job_config of the run and the job
  std::shared_ptr<subject> subj;
  std::vector<const law*> chosen;
};

gate_plan plan_gate(const run_config& run, const subject_job& job);

// isolation.cpp: each law in its own child process.
// Why a child process did not complete: a hang (stopped at the timeout) or a crash.
std::string process_message(const child_outcome& co, double timeout_s);
// Runs the laws, each in its own child process, run.jobs at once (results in
// order); each law runs its own subject's options (cases, seed, budgets).
std::vector<law_report> run_laws_isolated(const std::vector<const law*>& laws, const std::vector<const subject*>& subjects,
                                          const std::vector<const run_config*>& configs, const run_config& run);

// result.cpp: one subject's result from its plan and law reports (nothing saved yet).
gate_result make_result(const gate_plan& p, std::vector<law_report> reports, double seconds);
// True when two specs load the same subject with the same options.
bool same_spec(const std::string& a, const std::string& b);

}  // namespace attncheck::gate_detail
