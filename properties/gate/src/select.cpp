// The gate's law selection (--only) and its schedule: every (subject, law)
// pair of a run, isolated or in process.
#include <chrono>

#include "gate_internal.hpp"

namespace attncheck {
namespace gate_detail {

bool selected(const std::string& law, const std::vector<std::string>& only) {
  if (only.empty()) return true;
  for (const auto& o : only)
    if (law == o || law.rfind(o + ".", 0) == 0 || (!o.empty() && o.back() == '.' && law.rfind(o, 0) == 0)) return true;
  return false;
}

gate_plan plan_gate(const gate_options& opt) {
  gate_plan p{&opt, opt.instance ? opt.instance : subject::load(opt.subject), {}};
  for (const auto& name : opt.only)
    if (!find_law(name)) {
      bool prefix = false;
      for (const auto& l : all_laws()) prefix = prefix || selected(l.name, {name});
      if (!prefix) throw input_error("--only", "'" + name + "' names no law or group (see `attncheck laws`)");
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

std::vector<gate_result> gate_subjects(const std::vector<gate_options>& opts) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<gate_plan> plans;
  for (const auto& o : opts) plans.push_back(plan_gate(o));
  // Every (subject, law) pair in one schedule, so no core idles while a slow
  // law of one subject finishes; reports come back in order.
  std::vector<std::vector<law_report>> reports(plans.size());
  if (!opts.empty() && opts.front().isolate) {
    std::vector<const law*> laws;
    std::vector<const subject*> subjects;
    std::vector<const gate_options*> options;
    for (const auto& p : plans)
      for (const law* l : p.chosen) laws.push_back(l), subjects.push_back(p.subj.get()), options.push_back(p.opt);
    auto all = run_laws_isolated(laws, subjects, options, opts.front().jobs);
    std::size_t k = 0;
    for (std::size_t i = 0; i < plans.size(); ++i)
      for (std::size_t n = 0; n < plans[i].chosen.size(); ++n) reports[i].push_back(std::move(all[k++]));
  } else {
    for (std::size_t i = 0; i < plans.size(); ++i)
      for (const law* l : plans[i].chosen) reports[i].push_back(run_law(*l, *plans[i].subj, plans[i].opt->run));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<gate_result> results;
  for (std::size_t i = 0; i < plans.size(); ++i) results.push_back(make_result(plans[i], std::move(reports[i]), seconds));
  return results;
}

}  // namespace attncheck
