// The result model's JSON codec (result_json.hpp): one writer and one reader
// per type, for the wire, repro's child, --json and Python.
#include "attncheck/result_json.hpp"

#include <cmath>
#include <map>

#include "attncheck/case_file.hpp"
#include "attncheck/version.hpp"

namespace attncheck {

std::string provenance_line() {
  return std::string("attncheck ") + version_string + ", contract " + contract_version +
         ", oracle auto_tier (binary64 where its own error is at most 2^-20 of the bound, else " + oracle_precision_description +
         ")";
}

std::string probabilistic_statement() {
  return "probabilistic bound (Higham & Mary 2019) where the sound bound is +inf or useless: its own verdict (prob), "
         "failure probability <= 2^" +
         gate_detail::number_text(std::log2(prob_failure_per_element), "%.0f") +
         " per element if rounding errors are independent and of mean zero";
}

nlohmann::json number_json(double x, json_numbers n) {
  if (std::isfinite(x)) return x;
  if (n == json_numbers::public_numbers) return nullptr;
  return std::isnan(x) ? "nan" : x > 0 ? "inf" : "-inf";
}

double number_from_json(const nlohmann::json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_null()) return std::nan("");
  const auto t = j.get<std::string>();
  if (t == "inf") return HUGE_VAL;
  if (t == "-inf") return -HUGE_VAL;
  if (t == "nan") return std::nan("");
  throw std::runtime_error("'" + t + "' is not a number");
}

namespace {

// Each type's keys, named once for writing and reading (fields_json, fields_from_json).
constexpr auto index_fields = [](auto& x, auto&& f) { f("b", x.b), f("h", x.h), f("i", x.i), f("e", x.e); };

constexpr auto worst_fields = [](auto& w, auto&& f) {
  f("where", w.where), f("at", w.at), f("expected", w.expected), f("got", w.got), f("bound", w.bound), f("ratio", w.ratio);
};

constexpr auto outcome_fields = [](auto& o, auto&& f) {
  f("v", o.v), f("kind", o.kind), f("message", o.message), f("compared", o.compared), f("unbounded", o.unbounded);
  f("vacuous", o.vacuous), f("useless", o.useless), f("prob_compared", o.prob_compared), f("prob_failure", o.prob_failure);
  f("max_ratio", o.max_ratio), f("prob_max_ratio", o.prob_max_ratio), f("worst", o.worst), f("prob_worst", o.prob_worst);
};

constexpr auto heat_fields = [](auto& m, auto&& f) {
  f("b", m.b), f("h", m.h), f("rows", m.rows), f("cols", m.cols), f("row0", m.row0), f("col0", m.col0);
  f("all_rows", m.all_rows), f("all_cols", m.all_cols), f("lse", m.lse_column), f("ratio", m.ratio), f("got", m.got);
  f("worst_row", m.worst_row), f("worst_col", m.worst_col), f("worst_where", m.worst_where), f("worst_ratio", m.worst_ratio);
};

}  // namespace

// An element index holds no double: its numbers mode does not matter.
nlohmann::json to_json(const element_index& at) { return fields_json(at, json_numbers::exact, index_fields); }
element_index element_index_from_json(const nlohmann::json& j) { return fields_from_json<element_index>(j, index_fields); }

nlohmann::json to_json(const worst_element& w, json_numbers n) { return fields_json(w, n, worst_fields); }
worst_element worst_from_json(const nlohmann::json& j) { return fields_from_json<worst_element>(j, worst_fields); }

nlohmann::json to_json(const law_outcome& o, json_numbers n) { return fields_json(o, n, outcome_fields); }
law_outcome outcome_from_json(const nlohmann::json& j) { return fields_from_json<law_outcome>(j, outcome_fields); }

nlohmann::json to_json(const heat_map& m, json_numbers n) { return fields_json(m, n, heat_fields); }
heat_map heat_from_json(const nlohmann::json& j) { return fields_from_json<heat_map>(j, heat_fields); }

nlohmann::json to_json(const law_report& l, json_numbers n) {
  const auto number = [n](double x) { return number_json(x, n); };
  // A law cut short by its own time limit: verdict and kind "timeout" (not a failure of the subject).
  const bool timeout = timed_out(l);
  nlohmann::json j = {{"name", l.law},
                      {"verdict", timeout ? "timeout" : verdict_id(l.v)},
                      {"cases", l.cases},
                      {"judged", l.judged},
                      {"min_judged", number(l.min_judged)},
                      {"shrink_steps", l.shrink_steps},
                      {"seconds", number(l.seconds)},
                      {"max_ratio", number(l.max_ratio)}};
  if (l.v == verdict::skip) j["skip_reason"] = l.skip_reason;
  // The probabilistic verdict (its own) and the elements judged by each kind of bound, per dtype.
  j["probabilistic"] = {{"verdict", prob_verdict_id(l.prob)}, {"cases", l.prob_cases}, {"max_ratio", number(l.prob_max_ratio)}};
  if (l.prob == prob_verdict::fail)
    j["probabilistic"]["message"] = l.prob_failure, j["probabilistic"]["case"] = l.prob_failure_case;
  for (std::size_t t = 0; t < l.shares.size(); ++t)
    if (l.shares[t].total())
      j["judged_elements"][std::string(name(static_cast<dtype>(t)))] = {{"sound", l.shares[t].sound},
                                                                        {"probabilistic", l.shares[t].prob},
                                                                        {"unjudged", l.shares[t].unjudged},
                                                                        {"sound_finite", l.shares[t].sound_finite}};
  if (!l.unjudged_why.empty()) j["unjudged_why"] = l.unjudged_why;
  if (!l.declines.empty()) j["declines"] = l.declines;  // cases declined (replaced), by reason
  if (l.v == verdict::fail) {
    j["kind"] = failure_kind_name(l.failure.kind);
    j["message"] = l.failure.message;
    if (!l.failure.worst.where.empty()) j["worst"] = l.failure.worst.describe();
    j["reproduce"] = l.reproduce;
    if (l.counterexample) {
      const attn_case& c = *l.counterexample;
      j[timeout ? "case" : "counterexample"] = to_line(c);  // a timeout's case is the one it was checking
      j["shape"] = {{"b", c.b}, {"hq", c.hq}, {"hkv", c.hkv}, {"lq", c.lq}, {"lk", c.lk}, {"d", c.d}, {"dv", c.dv}};
    }
  }
  if (n == json_numbers::public_numbers) return j;
  // The rest of the report, whole (the counterexample as a case file: the one-line form is not its values).
  nlohmann::json x = {
      {"v", static_cast<int>(l.v)},
      {"unjudged_why", l.unjudged_why},
      {"stats", l.stats.counts},
      {"stats_n", l.stats.n},
      {"skip_reason", l.skip_reason},
      {"max_ratio_case", l.max_ratio_case},
      {"ratio_histogram", l.ratio_histogram},
      {"failure", to_json(l.failure, n)},
      {"reproduce", l.reproduce},
      {"prob", {{"v", static_cast<int>(l.prob)}, {"failure", l.prob_failure}, {"failure_case", l.prob_failure_case}}}};
  for (const auto& sh : l.shares) x["shares"].push_back({sh.sound, sh.prob, sh.unjudged, sh.sound_finite});
  if (l.counterexample) x["counterexample"] = format_case_file({*l.counterexample, l.law, {}, {}});
  if (l.heat) x["heat"] = to_json(*l.heat, n);
  j["exact"] = std::move(x);
  return j;
}

law_report law_report_from_json(const nlohmann::json& j) {
  law_report r;
  const auto& x = j.at("exact");
  r.law = j.at("name").get<std::string>();
  r.v = static_cast<verdict>(x.at("v").get<int>());
  r.cases = j.at("cases").get<int>();
  r.judged = j.at("judged").get<int>();
  r.min_judged = number_from_json(j.at("min_judged"));
  r.shrink_steps = j.at("shrink_steps").get<int>();
  r.seconds = number_from_json(j.at("seconds"));
  r.max_ratio = number_from_json(j.at("max_ratio"));
  const auto& p = j.at("probabilistic");
  r.prob_cases = p.at("cases").get<std::int64_t>();
  r.prob_max_ratio = number_from_json(p.at("max_ratio"));
  r.unjudged_why = x.at("unjudged_why").get<std::string>();
  if (j.contains("declines")) r.declines = j.at("declines").get<std::map<std::string, std::int64_t>>();
  r.stats.counts = x.at("stats").get<std::map<std::string, std::int64_t>>();
  r.stats.n = x.at("stats_n").get<std::int64_t>();
  r.skip_reason = x.at("skip_reason").get<std::string>();
  r.max_ratio_case = x.at("max_ratio_case").get<std::string>();
  r.ratio_histogram = x.at("ratio_histogram").get<decltype(r.ratio_histogram)>();
  r.failure = outcome_from_json(x.at("failure"));
  r.reproduce = x.at("reproduce").get<std::string>();
  r.prob = static_cast<prob_verdict>(x.at("prob").at("v").get<int>());
  r.prob_failure = x.at("prob").at("failure").get<std::string>();
  r.prob_failure_case = x.at("prob").at("failure_case").get<std::string>();
  for (std::size_t k = 0; k < r.shares.size() && k < x.at("shares").size(); ++k) {
    const auto& sh = x.at("shares")[k];
    r.shares[k] = {sh.at(0).get<std::int64_t>(), sh.at(1).get<std::int64_t>(), sh.at(2).get<std::int64_t>(),
                   sh.at(3).get<std::int64_t>()};
  }
  if (x.contains("counterexample")) r.counterexample = parse_case_file(x.at("counterexample").get<std::string>()).c;
  if (x.contains("heat")) r.heat = heat_from_json(x.at("heat"));
  return r;
}

nlohmann::json to_json(const gate_result& r) {
  nlohmann::json laws = nlohmann::json::array();
  for (const auto& l : r.reports) laws.push_back(to_json(l, json_numbers::public_numbers));
  nlohmann::json nb = nlohmann::json::array();
  for (const auto& [lk, n] : r.declared.nb_at) nb.push_back({{"lk", lk}, {"nb", n}});
  std::vector<std::int64_t> lengths, dims;
  for (int i = 0; i < ATTNCHECK_SIZE_HINT_SLOTS; ++i) {
    if (r.hints.lengths[i]) lengths.push_back(r.hints.lengths[i]);
    if (r.hints.head_dims[i]) dims.push_back(r.hints.head_dims[i]);
  }
  nlohmann::json declared = {{"abi", r.abi},
                             {"compute_unit_roundoff", r.declared.u},
                             {"exp_ulps", r.declared.exp_ulps},
                             {"key_blocks", nb},
                             {"size_hints",
                              {{"declared", !r.default_hints},
                               {"q_tile", r.hints.q_tile},
                               {"k_tile", r.hints.k_tile},
                               {"split_keys", r.hints.split_keys},
                               {"lengths", lengths},
                               {"head_dims", dims}}}};
  // Only where declared, so that a one-u subject with the contract's conventions writes the JSON it did.
  if (!r.declared.profile.empty()) declared["profile"] = r.declared.profile;
  if (!r.declared.conventions.empty()) declared["conventions"] = r.declared.conventions;
  if (!r.declared.limits.empty()) declared["limits"] = r.declared.limits;
  const nlohmann::json made_by = {
      {"version", version_string},
      {"contract", contract_version},
      {"oracle", {{"laws", "auto_tier"}, {"precision", oracle_precision_id}, {"bits", oracle_precision_bits}}},
      {"line", provenance_line()}};
  nlohmann::json doc = {{"attncheck", made_by},     {"subject", r.subject_name},
                        {"declared", declared},     {"seed", r.run.seed},
                        {"seconds", r.seconds},     {"failed", r.failed() - r.timed_out()},
                        {"unjudged", r.unjudged()}, {"laws", laws}};
  doc["run"] = run_string(r.run);  // the minimal string that reproduces the run (attncheck/run_config.hpp)
  doc["timed_out"] = r.timed_out();
  doc["prob_failed"] = r.prob_failed();
  doc["probabilistic"] = {{"statement", probabilistic_statement()}, {"failure_per_element", prob_failure_per_element}};
  return doc;
}

}  // namespace attncheck
