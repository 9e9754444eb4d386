// The result model's one JSON codec: a worst element, a law outcome, a heat
// map, a law report and a gate_result as JSON, and back. Every path that
// moves a result as JSON goes through it: the child-to-parent wire and repro's
// child (json_numbers::exact, read back by the *_from_json functions), the
// gate's --json file (json_numbers::public_numbers, write_json in report.hpp),
// and the Python module's rows.
#pragma once

#include <optional>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "attncheck/gate.hpp"

namespace attncheck {

/// How the codec writes a double.
enum class json_numbers {
  /// Read back as it was: a finite double as a JSON number (nlohmann writes the
  /// shortest text that parses back to the same double), inf and NaN as the
  /// strings "inf", "-inf", "nan" (JSON numbers cannot hold them; a NaN's sign
  /// and payload are not kept). The wire, repro's child, campaign shards.
  exact,
  /// For people's parsers: a non-finite double as null (the --json file).
  public_numbers,
};

nlohmann::json number_json(double x, json_numbers n);
/// A number, or "inf", "-inf", "nan" (exact); null reads as NaN.
double number_from_json(const nlohmann::json& j);

nlohmann::json to_json(const element_index& at);
element_index element_index_from_json(const nlohmann::json& j);

/// where (the text the law wrote), at (the element it names, or null),
/// expected, got, bound, ratio.
nlohmann::json to_json(const worst_element& w, json_numbers n);
worst_element worst_from_json(const nlohmann::json& j);

/// Every field of the outcome (worst and prob_worst as above).
nlohmann::json to_json(const law_outcome& o, json_numbers n);
law_outcome outcome_from_json(const nlohmann::json& j);

nlohmann::json to_json(const heat_map& m, json_numbers n);
heat_map heat_from_json(const nlohmann::json& j);

/// A law report as the --json file writes each of its laws (name, verdict,
/// cases, judged, ..., see write_json); exact adds "exact": the rest of the
/// report (its stats, histogram, full outcome, counterexample as a case file,
/// heat map), so that law_report_from_json gives the report back whole.
nlohmann::json to_json(const law_report& r, json_numbers n);
/// The report of an exact to_json.
law_report law_report_from_json(const nlohmann::json& j);

/// A struct as a JSON object by one list of its fields, for both directions:
/// `fields(x, f)` calls f("key", x.member) for each member (x const or not).
/// Doubles go through number_json / number_from_json, enums as their value,
/// the types above through their own to_json.
template <class V>
nlohmann::json field_json(const V& v, json_numbers n) {
  if constexpr (std::is_same_v<V, double>)
    return number_json(v, n);
  else if constexpr (std::is_enum_v<V>)
    return static_cast<int>(v);
  else if constexpr (std::is_same_v<V, std::vector<double>>) {
    nlohmann::json a = nlohmann::json::array();
    for (double x : v) a.push_back(number_json(x, n));
    return a;
  } else if constexpr (std::is_same_v<V, std::optional<element_index>>)
    return v ? to_json(*v) : nlohmann::json(nullptr);
  else if constexpr (std::is_same_v<V, worst_element>)
    return to_json(v, n);
  else
    return v;
}

template <class V>
void field_from_json(const nlohmann::json& j, V& v) {
  if constexpr (std::is_same_v<V, double>)
    v = number_from_json(j);
  else if constexpr (std::is_enum_v<V>)
    v = static_cast<V>(j.get<int>());
  else if constexpr (std::is_same_v<V, std::vector<double>>) {
    v.clear();
    for (const auto& x : j) v.push_back(number_from_json(x));
  } else if constexpr (std::is_same_v<V, std::optional<element_index>>) {
    if (j.is_null())
      v.reset();
    else
      v = element_index_from_json(j);
  } else if constexpr (std::is_same_v<V, worst_element>)
    v = worst_from_json(j);
  else
    j.get_to(v);
}

template <class T, class Fields>
nlohmann::json fields_json(const T& x, json_numbers n, Fields fields) {
  nlohmann::json j = nlohmann::json::object();
  fields(x, [&](const char* key, const auto& v) { j[key] = field_json(v, n); });
  return j;
}

template <class T, class Fields>
T fields_from_json(const nlohmann::json& j, Fields fields) {
  T x{};
  fields(x, [&](const char* key, auto& v) { field_from_json(j.at(key), v); });
  return x;
}

/// The --json document of a gate run: attncheck (version, contract, oracle),
/// subject, declared, seed, seconds, failed, unjudged, timed_out, prob_failed,
/// probabilistic, and laws (to_json of each report, public numbers).
nlohmann::json to_json(const gate_result& g);

}  // namespace attncheck
