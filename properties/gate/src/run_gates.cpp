// The gate as the CLI and Python run it: gate every job, save each failing
// law's counterexample, and hand each result to the sinks in order.
#include "attncheck/gate.hpp"

namespace attncheck {

std::vector<gate_result> run_gates(const run_config& run, const std::vector<subject_job>& jobs,
                                   const std::vector<gate_sink*>& sinks) {
  std::vector<gate_result> results = gate_subjects(run, jobs);
  for (std::size_t i = 0; i < results.size(); ++i) {
    save_counterexamples(results[i]);
    for (gate_sink* s : sinks) s->take(results[i], i);
  }
  for (gate_sink* s : sinks) s->finish(results);
  return results;
}

gate_result run_gate(const run_config& run, const subject_job& job, const std::vector<gate_sink*>& sinks) {
  return run_gates(run, {job}, sinks).front();
}

}  // namespace attncheck
