// `attncheck repro`: replays a saved case file, in a child process by default.
#include <memory>
#include <ostream>
#include <tuple>
#include <utility>

#include "attncheck/case_file.hpp"
#include "attncheck/result_json.hpp"

#include "gate_internal.hpp"

namespace attncheck {

using namespace gate_detail;

int repro_case_file(const std::string& file, const std::string& subject_spec, const std::string& law_override, std::ostream& out,
                    bool isolate, double timeout_s, repro_result* result) {
  const case_record rec = read_case_file(file);
  const std::string law_name = law_override.empty() ? rec.law : law_override;
  if (law_name.empty()) throw input_error("law", file + " names no law; pass --law NAME (see `attncheck laws`)");
  const law* l = find_law(law_name);
  if (!l) throw input_error("law", "'" + law_name + "' is not a law (see `attncheck laws`)");
  // No subject given: the one the file records (save_counterexamples writes its spec).
  const std::string spec = subject_spec.empty() ? rec.subject : subject_spec;
  if (spec.empty())
    throw input_error("subject", file + " records no subject; pass --subject NAME|PATH[:key=value,...] to replay it");
  std::shared_ptr<subject> subj;
  try {
    subj = subject::load(spec);
  } catch (const input_error& e) {
    if (!subject_spec.empty()) throw;
    throw input_error("subject", "cannot load '" + spec + "', the subject " + file + " records (" + e.what() +
                                     "); pass --subject to replay it on another");
  }
  if (subject_spec.empty())
    out << "replaying on " << spec << ", the subject " << file << " records\n";
  else if (!rec.subject.empty() && !gate_detail::same_spec(rec.subject, subject_spec))
    out << "replaying on " << subject_spec << " (--subject); " << file << " was saved from " << rec.subject << "\n";
  repro_result local;
  repro_result& rr = result ? *result : local;
  rr.file = file, rr.law = law_name, rr.subject_name = subj->name(), rr.subject_spec = spec, rr.c = rec.c;
  // A skip replayed nothing: never exit 0 (which would read as "fixed").
  if (auto why = l->applicable(*subj); !why.empty()) {
    out << "SKIP " << law_name << ": " << why << " (nothing replayed)\n";
    rr.outcome = law_outcome::skip(why);
    return rr.status = 3;
  }
  if (auto why = subj->cannot_take(rec.c); !why.empty()) {
    out << "SKIP " << law_name << ": subject cannot take this case (" << why << "; nothing replayed)\n";
    rr.outcome = law_outcome::skip("subject cannot take this case (" + why + ")");
    return rr.status = 3;
  }
  // The replay keeps the elements it compares, for the report's heat map.
  const auto replay_logged = [&] {
    element_log log;
    const law_outcome o = replay(*l, *subj, rec.c);
    return std::pair{o, heat_map_of(log, o.worst)};
  };
  law_outcome o;
  if (isolate) {
    // The child sends the outcome and its heat map through the result codec.
    const child_outcome co = run_isolated(
        [&] {
          const auto [replayed, heat] = replay_logged();
          nlohmann::json j = {{"outcome", to_json(replayed, json_numbers::exact)}};
          if (heat) j["heat"] = to_json(*heat, json_numbers::exact);
          return j.dump();
        },
        timeout_s);
    if (co.completed) {
      const auto j = nlohmann::json::parse(co.payload);
      o = outcome_from_json(j.at("outcome"));
      if (j.contains("heat")) rr.heat = heat_from_json(j.at("heat"));
    } else {
      o.fail(process_message(co, timeout_s), co.timed_out ? failure_kind::hang : failure_kind::crash);
    }
  } else {
    std::tie(o, rr.heat) = replay_logged();
  }
  if (o.v == verdict::skip) {  // a version 4 subject declined the case: nothing judged, never "fixed"
    out << "SKIP " << law_name << ": " << o.message << " (nothing judged)\n";
    rr.outcome = o;
    return rr.status = 3;
  }
  failure_report screen;
  screen.kind = o.kind;
  screen.verdict = o.v == verdict::fail ? "FAIL" : "PASS";
  screen.law = law_name;
  screen.subject_name = subj->name(), screen.subject_spec = spec;
  screen.case_line = to_line(rec.c);
  screen.file = file;
  if (o.v == verdict::fail) screen.message = o.message;
  if (!o.worst.where.empty()) screen.worst = o.worst.describe();
  screen.judged = std::to_string(o.compared) + " elements";
  if (o.unbounded) screen.judged += "; " + std::to_string(o.unbounded) + " outside the bound's domain (+inf bound: not judged)";
  // A failing replay judged what failed: "judges nothing" would contradict it.
  if (!o.vacuous.empty())
    screen.judged += o.v == verdict::fail ? "; part of the law had nothing to judge here: " + o.vacuous
                                          : "; the case judges nothing for this law: " + o.vacuous;
  out << print_failure(screen);
  rr.outcome = o;
  return rr.status = o.v == verdict::fail ? 1 : 0;
}

}  // namespace attncheck
