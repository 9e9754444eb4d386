// A campaign result as JSON: its file (write_campaign_json,
// read_campaign_json) and the stats codec the forked workers report through.
#include <fstream>
#include <vector>

#include "attncheck/result_json.hpp"
#include "attncheck/version.hpp"
#include "campaign_internal.hpp"

namespace attncheck {

namespace campaign_detail {

namespace {

// The fields of campaign_stats the result codec writes and reads as they are.
constexpr auto stats_fields = [](auto& s, auto&& f) {
  f("cases", s.cases), f("elements", s.elements), f("violations", s.violations), f("violating_cases", s.violating_cases);
  f("unjudged_elements", s.unjudged_elements), f("fast_tier_cases", s.fast_tier_cases), f("histogram", s.histogram);
  f("declined", s.declined);
  f("max_ratio", s.max_ratio), f("max_ratio_index", s.max_ratio_index), f("max_ratio_case", s.max_ratio_case);
  f("first_violation", s.first_violation);
};

// The bin labels of campaign_edges: "= 0", "(0, 0.001)", "[0.001, 0.01)", ... "[0.9, 1]", "> 1".
nlohmann::json bin_labels() {
  nlohmann::json l = nlohmann::json::array({"= 0"});
  double lo = 0;
  for (std::size_t i = 0; i < campaign_edges.size(); ++i) {
    char label[48];
    std::snprintf(label, sizeof label, "%s%g, %g%s", i == 0 ? "(" : "[", lo, campaign_edges[i],
                  i + 1 == campaign_edges.size() ? "]" : ")");
    l.push_back(label);
    lo = campaign_edges[i];
  }
  l.push_back("> 1");
  return l;
}

}  // namespace

nlohmann::json to_json(const campaign_stats& s) {
  nlohmann::json j = fields_json(s, json_numbers::exact, stats_fields);
  j["violating"] = j["worst"] = nlohmann::json::array();
  for (std::size_t i = 0; i < s.worst.size(); ++i)
    j["worst"].push_back({{"index", s.worst_index[i]},
                          {"ratio", number_json(s.worst[i].first, json_numbers::exact)},
                          {"what", s.worst[i].second}});
  for (const auto& v : s.violating) j["violating"].push_back({{"index", v.index}, {"what", v.what}});
  if (s.fudge_cases)
    j["fudge"] = {{"cases", s.fudge_cases},
                  {"bound_accepts", s.bound_accepts},
                  {"pytorch_accepts", s.pytorch_accepts},
                  {"flash_accepts", s.flash_accepts}};
  return j;
}

campaign_stats stats_from(const nlohmann::json& j) {
  auto s = fields_from_json<campaign_stats>(j, stats_fields);
  for (const auto& v : j.at("violating")) s.violating.push_back({v.at("index"), v.at("what")});
  for (const auto& w : j.at("worst")) {
    s.worst.emplace_back(number_from_json(w.at("ratio")), w.at("what").get<std::string>());
    s.worst_index.push_back(w.at("index"));
  }
  if (j.contains("fudge")) {  // backward runs only
    const auto& f = j.at("fudge");
    s.fudge_cases = f.at("cases"), s.bound_accepts = f.at("bound_accepts");
    s.pytorch_accepts = f.at("pytorch_accepts"), s.flash_accepts = f.at("flash_accepts");
  }
  return s;
}

}  // namespace campaign_detail

using campaign_detail::stats_from;
using campaign_detail::to_json;

void write_campaign_json(const std::string& path, const campaign_result& r) {
  const campaign_options& o = r.options;
  nlohmann::json by = nlohmann::json::object(), shards = nlohmann::json::array();
  for (const auto& [t, st] : r.by_type) by[t] = to_json(st);
  nlohmann::json by_feature = nlohmann::json::object(), by_gradient = nlohmann::json::object();
  for (const auto& [f, st] : r.by_feature) by_feature[f] = to_json(st);
  for (const auto& [g, st] : r.by_gradient) by_gradient[g] = to_json(st);
  for (const auto& sh : r.shards) shards.push_back({{"index", sh.index}, {"cases", sh.cases}, {"seconds", sh.seconds}});
  const std::int64_t total = r.cases();
  const nlohmann::json doc = {{"kind", "attncheck campaign"},
                              {"attncheck", {{"version", r.version}, {"contract", contract_version}}},
                              {"config",
                               {{"subject", o.subject},
                                {"subject_name", r.subject_name},
                                {"cases", o.cases},
                                {"seed", o.seed},
                                {"shard", {{"index", o.shard_index}, {"count", o.shard_count}}},
                                {"dtype", o.only_type ? std::string(name(*o.only_type)) : std::string("mixed")},
                                {"max_work", o.max_work},
                                {"variants", o.variants},
                                {"fp8", o.fp8},
                                {"form", o.form.empty() ? std::string("dense") : o.form},
                                {"backward", o.backward}}},
                              {"jobs", o.jobs},
                              {"cases", total},
                              {"violations", r.violations()},
                              {"seconds", r.seconds},
                              {"cases_per_second", r.seconds > 0 ? static_cast<double>(total) / r.seconds : 0.0},
                              {"shards", shards},
                              {"histogram_edges", campaign_edges},
                              {"histogram_bins", campaign_detail::bin_labels()},
                              {"by_type", by},
                              {"by_feature", by_feature},
                              {"by_gradient", by_gradient}};
  std::ofstream f(path);
  if (!f) throw input_error("--json", "cannot write '" + path + "'");
  f << doc.dump(2) << "\n";
  if (!f) throw input_error("--json", "write to '" + path + "' failed");
}

campaign_result read_campaign_json(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw input_error(path, "cannot read the file");
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    throw input_error(path, std::string("not JSON: ") + e.what());
  }
  if (!doc.is_object() || doc.value("kind", std::string()) != "attncheck campaign")
    throw input_error(path, "not a campaign result (no \"kind\": \"attncheck campaign\")");
  campaign_result r;
  const char* field = "config";
  try {
    const auto& c = doc.at("config");
    campaign_options& o = r.options;
    field = "config.subject", o.subject = c.at("subject"), r.subject_name = c.at("subject_name");
    field = "config.cases", o.cases = c.at("cases");
    field = "config.seed", o.seed = c.at("seed");
    field = "config.shard", o.shard_index = c.at("shard").at("index"), o.shard_count = c.at("shard").at("count");
    field = "config.dtype";
    const std::string t = c.at("dtype");
    if (t != "mixed") {
      o.only_type = parse_dtype(t);
      if (!o.only_type) throw std::runtime_error("'" + t + "'");
    }
    field = "config.max_work", o.max_work = c.at("max_work");
    field = "config.variants", o.variants = c.value("variants", false);     // absent: a result from before --variants
    field = "config.fp8", o.fp8 = c.value("fp8", false);                    // absent: a result from before --fp8
    field = "config.form", o.form = c.value("form", std::string("dense"));  // absent: a result from before --form
    if (o.form == "dense") o.form.clear();
    field = "config.backward", o.backward = c.value("backward", false);  // absent: a result from before --backward
    field = "attncheck.version", r.version = doc.at("attncheck").at("version");
    field = "jobs", o.jobs = doc.at("jobs");
    field = "seconds", r.seconds = doc.at("seconds");
    field = "histogram_edges";
    if (doc.at("histogram_edges").get<std::vector<double>>() != std::vector<double>(campaign_edges.begin(), campaign_edges.end()))
      throw std::runtime_error("not this attncheck's edges");
    field = "shards";
    for (const auto& sh : doc.at("shards")) r.shards.push_back({sh.at("index"), sh.at("cases"), sh.at("seconds")});
    field = "by_type";
    for (const auto& [t2, j] : doc.at("by_type").items()) r.by_type[t2] = stats_from(j);
    field = "by_feature";
    if (doc.contains("by_feature"))
      for (const auto& [f, j] : doc.at("by_feature").items()) r.by_feature[f] = stats_from(j);
    field = "by_gradient";
    if (doc.contains("by_gradient"))
      for (const auto& [g, j] : doc.at("by_gradient").items()) r.by_gradient[g] = stats_from(j);
  } catch (const std::exception& e) {
    throw input_error(path, std::string("field ") + field + ": " + e.what());
  }
  if (r.options.shard_count < 1 || r.options.shard_count > max_shards || r.options.shard_index < 0 ||
      r.options.shard_index >= r.options.shard_count)
    throw input_error(path, "field config.shard: not i/N with 0 <= i < N <= " + std::to_string(max_shards));
  return r;
}

}  // namespace attncheck
