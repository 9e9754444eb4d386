// The gate's result model: one subject's gate_result from its plan and law
// reports, its counts, and saving its counterexamples (a step of its own,
// before anything is printed: the failure screens name the saved files).
#include <cstdio>
#include <filesystem>

#include "attncheck/case_file.hpp"
#include "attncheck/failure_report.hpp"

#include "gate_internal.hpp"

namespace attncheck {

bool timed_out(const law_report& r) { return r.v == verdict::fail && r.failure.kind == failure_kind::timeout; }

namespace gate_detail {

gate_result make_result(const gate_plan& p, std::vector<law_report> reports, double seconds) {
  const auto& subj = p.subj;
  gate_result g;
  g.run = p.run;
  g.subject_name = subj->name();
  g.subject_spec = subj->spec();
  g.dtypes = subj->desc().dtypes, g.features = subj->desc().features, g.claims = subj->desc().invariances;
  g.declared = subj->declared();
  g.hints = subj->hints();
  g.abi = subj->abi();
  g.default_hints = subj->default_hints();
  g.reports = std::move(reports);
  g.saved_at.assign(g.reports.size(), std::string());
  g.seconds = seconds;
  return g;
}

}  // namespace gate_detail

namespace {
// The spec a saved case records for `attncheck repro` to load without
// --subject: the gate's spec, a plugin's path made absolute (a replay may run
// from another folder); the subject's own name when no spec is known.
std::string replayable_spec(const gate_result& g) {
  return g.subject_spec.empty() ? g.subject_name : absolute_spec(g.subject_spec);
}
}  // namespace

namespace gate_detail {
bool same_spec(const std::string& a, const std::string& b) { return a == b || absolute_spec(a) == absolute_spec(b); }
}  // namespace gate_detail

void save_counterexamples(gate_result& g) {
  const std::string& dir = g.run.out_dir;
  g.saved.clear();
  g.saved_at.assign(g.reports.size(), std::string());
  for (std::size_t k = 0; k < g.reports.size(); ++k) {
    const law_report& r = g.reports[k];
    // A timeout's case is the one it was checking, not a counterexample: not saved.
    if (r.v != verdict::fail || !r.counterexample || dir.empty() || timed_out(r)) continue;
    std::filesystem::create_directories(dir);
    char name[64];
    std::snprintf(name, sizeof name, "-%016llx.json", static_cast<unsigned long long>(fingerprint(*r.counterexample)));
    const std::string saved = (std::filesystem::path(dir) / (r.law + name)).string();
    // The note keeps the verdict line and rapidcheck's reproduce string (the console prints it only with --verbose).
    std::string note = r.failure.message.substr(0, 2000);
    if (!r.reproduce.empty()) note += "\nrapidcheck: RC_PARAMS=\"reproduce=" + r.reproduce + "\"";
    case_record rec{*r.counterexample, r.law, replayable_spec(g), note};
    write_case_file(saved, rec);
    g.saved.push_back(saved);
    g.saved_at[k] = saved;
  }
}

int gate_result::failed() const {
  int n = 0;
  for (const auto& r : reports) n += r.v == verdict::fail;
  return n;
}

int gate_result::prob_failed() const {
  int n = 0;
  for (const auto& r : reports) n += r.prob == prob_verdict::fail;
  return n;
}

int gate_result::timed_out() const {
  int n = 0;
  for (const auto& r : reports) n += attncheck::timed_out(r);
  return n;
}

int gate_result::unjudged() const {
  int n = 0;
  for (const auto& r : reports) n += r.v == verdict::unjudged;
  return n;
}

}  // namespace attncheck
