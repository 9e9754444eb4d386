// The gate's JSON: per-law results and what produced them.
#include <cmath>
#include <fstream>

#include "attncheck/version.hpp"

#include <nlohmann/json.hpp>

#include "attncheck/report.hpp"

namespace attncheck {

std::string provenance_line() {
  return std::string("attncheck ") + version_string + ", contract " + contract_version +
         ", oracle auto_tier (binary64 where its own error is at most 2^-20 of the bound, else " + oracle_precision_description +
         ")";
}

void write_json(const std::string& path, const gate_result& r) {
  // inf and NaN are not JSON numbers: a non-finite ratio is written as null.
  const auto number = [](double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); };
  nlohmann::json laws = nlohmann::json::array();
  for (const auto& l : r.reports) {
    // A law cut short by its own time limit: verdict and kind "timeout" (not a failure of the subject).
    const bool timeout = timed_out(l);
    nlohmann::json j = {{"name", l.law},
                        {"verdict", timeout ? "timeout" : verdict_id(l.v)},
                        {"cases", l.cases},
                        {"judged", l.judged},
                        {"min_judged", l.min_judged},
                        {"shrink_steps", l.shrink_steps},
                        {"seconds", l.seconds},
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
    laws.push_back(std::move(j));
  }
  nlohmann::json nb = nlohmann::json::array();
  for (const auto& [lk, n] : r.declared.nb_at) nb.push_back({{"lk", lk}, {"nb", n}});
  std::vector<std::int64_t> lengths, dims;
  for (int i = 0; i < ATTNCHECK_SIZE_HINT_SLOTS; ++i) {
    if (r.hints.lengths[i]) lengths.push_back(r.hints.lengths[i]);
    if (r.hints.head_dims[i]) dims.push_back(r.hints.head_dims[i]);
  }
  const nlohmann::json declared = {{"abi", r.abi},
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
  const nlohmann::json made_by = {
      {"version", version_string},
      {"contract", contract_version},
      {"oracle", {{"laws", "auto_tier"}, {"precision", oracle_precision_id}, {"bits", oracle_precision_bits}}},
      {"line", provenance_line()}};
  nlohmann::json doc = {{"attncheck", made_by},     {"subject", r.subject_name},
                        {"declared", declared},     {"seed", r.options.run.seed},
                        {"seconds", r.seconds},     {"failed", r.failed() - r.timed_out()},
                        {"unjudged", r.unjudged()}, {"laws", laws}};
  doc["timed_out"] = r.timed_out();
  doc["prob_failed"] = r.prob_failed();
  doc["probabilistic"] = {{"statement", probabilistic_statement()}, {"failure_per_element", prob_failure_per_element}};
  std::ofstream f(path);
  if (!f) throw input_error("--json", "cannot write '" + path + "'");
  f << doc.dump(2) << "\n";
  if (!f) throw input_error("--json", "write to '" + path + "' failed");
}

}  // namespace attncheck
