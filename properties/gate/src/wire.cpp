// The parent/child wire format: a law's report as JSON, doubles as their bit
// patterns (JSON numbers cannot hold inf or NaN).
#include <bit>
#include <map>

#include "attncheck/case_file.hpp"

#include "gate_internal.hpp"

namespace attncheck {
namespace gate_detail {

namespace {

// law_report and law_outcome travel from a child process to the gate as JSON.
nlohmann::json outcome_to_json(const law_outcome& o) {
  return {{"v", static_cast<int>(o.v)},
          {"kind", static_cast<int>(o.kind)},
          {"message", o.message},
          {"compared", o.compared},
          {"unbounded", o.unbounded},
          {"vacuous", o.vacuous},
          {"useless", o.useless},
          {"prob_compared", o.prob_compared},
          {"prob_failure", o.prob_failure},
          {"max_ratio", o.max_ratio},
          {"worst",
           {{"where", o.worst.where},
            {"expected", o.worst.expected},
            {"got", o.worst.got},
            {"bound", o.worst.bound},
            {"ratio", o.worst.ratio}}}};
}

// JSON numbers cannot hold inf or NaN: doubles travel as their bit patterns.
nlohmann::json bits_of(double x) { return std::bit_cast<std::uint64_t>(x); }

double double_of(const nlohmann::json& j) { return std::bit_cast<double>(j.get<std::uint64_t>()); }

}  // namespace

nlohmann::json outcome_json(const law_outcome& o) {
  auto j = outcome_to_json(o);
  j["max_ratio"] = bits_of(o.max_ratio);
  j["prob_max_ratio"] = bits_of(o.prob_max_ratio);
  for (const char* k : {"expected", "got", "bound", "ratio"}) j["worst"][k] = bits_of(j["worst"][k].get<double>());
  return j;
}

law_outcome outcome_from(const nlohmann::json& j) {
  law_outcome o;
  o.v = static_cast<verdict>(j.at("v").get<int>());
  o.message = j.at("message").get<std::string>();
  o.kind = static_cast<failure_kind>(j.value("kind", 0));
  o.compared = j.value("compared", std::int64_t{0});
  o.unbounded = j.value("unbounded", std::int64_t{0});
  o.vacuous = j.value("vacuous", std::string());
  o.useless = j.value("useless", std::int64_t{0});
  o.prob_compared = j.value("prob_compared", std::int64_t{0});
  o.prob_failure = j.value("prob_failure", std::string());
  if (j.contains("prob_max_ratio")) o.prob_max_ratio = double_of(j.at("prob_max_ratio"));
  o.max_ratio = double_of(j.at("max_ratio"));
  const auto& w = j.at("worst");
  o.worst = {w.at("where").get<std::string>(), double_of(w.at("expected")), double_of(w.at("got")), double_of(w.at("bound")),
             double_of(w.at("ratio"))};
  return o;
}

nlohmann::json heat_json(const heat_map& m) {
  nlohmann::json ratio = nlohmann::json::array();
  for (double x : m.ratio) ratio.push_back(bits_of(x));
  return {{"b", m.b},
          {"h", m.h},
          {"rows", m.rows},
          {"cols", m.cols},
          {"row0", m.row0},
          {"col0", m.col0},
          {"all_rows", m.all_rows},
          {"all_cols", m.all_cols},
          {"lse", m.lse_column},
          {"ratio", ratio},
          {"worst_row", m.worst_row},
          {"worst_col", m.worst_col},
          {"worst_where", m.worst_where},
          {"worst_ratio", bits_of(m.worst_ratio)}};
}

heat_map heat_from(const nlohmann::json& j) {
  heat_map m;
  m.b = j.at("b"), m.h = j.at("h"), m.rows = j.at("rows"), m.cols = j.at("cols"), m.row0 = j.at("row0"), m.col0 = j.at("col0");
  m.all_rows = j.at("all_rows"), m.all_cols = j.at("all_cols"), m.lse_column = j.at("lse");
  for (const auto& x : j.at("ratio")) m.ratio.push_back(double_of(x));
  m.worst_row = j.at("worst_row"), m.worst_col = j.at("worst_col");
  m.worst_where = j.at("worst_where").get<std::string>();
  m.worst_ratio = double_of(j.at("worst_ratio"));
  return m;
}

std::string report_to_payload(const law_report& r) {
  nlohmann::json j = {{"law", r.law},
                      {"v", static_cast<int>(r.v)},
                      {"cases", r.cases},
                      {"judged", r.judged},
                      {"unjudged_why", r.unjudged_why},
                      {"min_judged", r.min_judged},
                      {"stats", r.stats.counts},
                      {"stats_n", r.stats.n},
                      {"shrink_steps", r.shrink_steps},
                      {"skip_reason", r.skip_reason},
                      {"max_ratio", bits_of(r.max_ratio)},
                      {"max_ratio_case", r.max_ratio_case},
                      {"ratio_histogram", r.ratio_histogram},
                      {"seconds", bits_of(r.seconds)},
                      {"failure", outcome_json(r.failure)},
                      {"reproduce", r.reproduce}};
  // The probabilistic verdict and the judged shares per dtype.
  j["prob"] = {{"v", static_cast<int>(r.prob)},
               {"cases", r.prob_cases},
               {"max_ratio", bits_of(r.prob_max_ratio)},
               {"failure", r.prob_failure},
               {"failure_case", r.prob_failure_case}};
  for (const auto& sh : r.shares) j["shares"].push_back({sh.sound, sh.prob, sh.unjudged, sh.sound_finite});
  if (r.counterexample) j["counterexample"] = format_case_file({*r.counterexample, r.law, {}, {}});
  if (r.heat) j["heat"] = heat_json(*r.heat);
  return j.dump();
}

law_report report_from_payload(const std::string& payload) {
  const auto j = nlohmann::json::parse(payload);
  law_report r;
  r.law = j.at("law").get<std::string>();
  r.v = static_cast<verdict>(j.at("v").get<int>());
  r.cases = j.at("cases").get<int>();
  r.judged = j.at("judged").get<int>();
  r.unjudged_why = j.at("unjudged_why").get<std::string>();
  r.min_judged = j.at("min_judged").get<double>();
  r.stats.counts = j.at("stats").get<std::map<std::string, std::int64_t>>();
  r.stats.n = j.at("stats_n").get<std::int64_t>();
  r.shrink_steps = j.at("shrink_steps").get<int>();
  r.skip_reason = j.at("skip_reason").get<std::string>();
  r.max_ratio = double_of(j.at("max_ratio"));
  r.max_ratio_case = j.at("max_ratio_case").get<std::string>();
  r.ratio_histogram = j.at("ratio_histogram").get<decltype(r.ratio_histogram)>();
  r.seconds = double_of(j.at("seconds"));
  r.failure = outcome_from(j.at("failure"));
  r.reproduce = j.at("reproduce").get<std::string>();
  if (j.contains("prob")) {
    const auto& p = j.at("prob");
    r.prob = static_cast<prob_verdict>(p.at("v").get<int>());
    r.prob_cases = p.at("cases").get<std::int64_t>();
    r.prob_max_ratio = double_of(p.at("max_ratio"));
    r.prob_failure = p.at("failure").get<std::string>();
    r.prob_failure_case = p.at("failure_case").get<std::string>();
  }
  if (j.contains("shares"))
    for (std::size_t k = 0; k < r.shares.size() && k < j.at("shares").size(); ++k) {
      const auto& sh = j.at("shares")[k];
      r.shares[k] = {sh.at(0).get<std::int64_t>(), sh.at(1).get<std::int64_t>(), sh.at(2).get<std::int64_t>(),
                     sh.at(3).get<std::int64_t>()};
    }
  if (j.contains("counterexample")) r.counterexample = parse_case_file(j.at("counterexample").get<std::string>()).c;
  if (j.contains("heat")) r.heat = heat_from(j.at("heat"));
  return r;
}

}  // namespace gate_detail

}  // namespace attncheck
