// The gate's law selection (--only) and its schedule: every (subject, law)
// pair of a run, isolated or in process.
#include <chrono>

#include "attncheck/suggest.hpp"
#include "gate_internal.hpp"

namespace attncheck {
namespace gate_detail {

bool selected(const std::string& law, const std::vector<std::string>& only) {
  if (only.empty()) return true;
  for (const auto& o : only)
    if (law == o || law.rfind(o + ".", 0) == 0 || (!o.empty() && o.back() == '.' && law.rfind(o, 0) == 0)) return true;
  return false;
}

gate_plan plan_gate(const run_config& run, const subject_job& job) {
  gate_plan p{job_config(run, job), job.instance ? job.instance : subject::load(job.subject), {}};
  const run_config& opt = p.run;
  for (const auto& name : opt.only)
    if (!find_law(name)) {
      bool prefix = false;
      for (const auto& l : all_laws()) prefix = prefix || selected(l.name, {name});
      if (!prefix) {
        std::vector<std::string> names;
        for (const auto& l : all_laws()) names.push_back(l.name), names.push_back(l.name.substr(0, l.name.find('.')));
        throw input_error("--only",
                          "'" + name + "' names no law or group" + did_you_mean(name, names) + " (see `attncheck laws`)");
      }
    }
  if (opt.strict && !(p.subj->desc().compute_unit_roundoff <= 0x1p-24))
    throw input_error("subject.compute_unit_roundoff", "--strict requires u <= 2^-24 (f32 compute); " + p.subj->name() +
                                                           " declares u = " + number_text(p.subj->desc().compute_unit_roundoff));
  for (const auto& l : all_laws())
    if (selected(l.name, opt.only)) p.chosen.push_back(&l);
  return p;
}

}  // namespace gate_detail

using namespace gate_detail;

run_config job_config(const run_config& run, const subject_job& job) {
  run_config c = run;
  if (job.seed) c.seed = *job.seed;
  if (job.only) c.only = *job.only;
  if (!job.out_dir.empty()) c.out_dir = job.out_dir;
  if (!job.json.empty()) c.json = job.json;
  if (!job.junit.empty()) c.junit = job.junit;
  return c;
}

std::vector<gate_result> gate_subjects(const run_config& run, const std::vector<subject_job>& jobs) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<gate_plan> plans;
  for (const auto& j : jobs) plans.push_back(plan_gate(run, j));
  // Every (subject, law) pair in one schedule, so no core idles while a slow
  // law of one subject finishes; reports come back in order.
  std::vector<std::vector<law_report>> reports(plans.size());
  if (run.isolate) {
    std::vector<const law*> laws;
    std::vector<const subject*> subjects;
    std::vector<const run_config*> configs;
    for (const auto& p : plans)
      for (const law* l : p.chosen) laws.push_back(l), subjects.push_back(p.subj.get()), configs.push_back(&p.run);
    auto all = run_laws_isolated(laws, subjects, configs, run);
    std::size_t k = 0;
    for (std::size_t i = 0; i < plans.size(); ++i)
      for (std::size_t n = 0; n < plans[i].chosen.size(); ++n) reports[i].push_back(std::move(all[k++]));
  } else {
    for (auto& p : plans)
      for (const law* l : p.chosen) reports[&p - plans.data()].push_back(run_law(*l, *p.subj, run_options_of(p.run)));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<gate_result> results;
  for (std::size_t i = 0; i < plans.size(); ++i) results.push_back(make_result(plans[i], std::move(reports[i]), seconds));
  return results;
}

}  // namespace attncheck
