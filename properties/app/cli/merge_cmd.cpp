// attncheck merge: one report of many result files, the shards of one
// campaign (attncheck campaign --shard i/N --json) or gate runs (attncheck
// gate --json, e.g. ci/false-alarms' one per kernel and seed).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "attncheck/campaign.hpp"
#include "cli_state.hpp"
#include "commands.hpp"

namespace attncheck::cli {

namespace {

std::vector<std::string> merge_files;
std::string merge_json;
std::uint64_t merge_seeds = 0;  // gate results: every subject must hold seeds 1..merge_seeds (0: not checked)

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw input_error(path, "cannot read the file");
  try {
    return nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    throw input_error(path, std::string("not JSON: ") + e.what());
  }
}

bool is_campaign(const nlohmann::json& j) { return j.is_object() && j.value("kind", std::string()) == "attncheck campaign"; }
bool is_gate(const nlohmann::json& j) {
  return j.is_object() && j.contains("laws") && j["laws"].is_array() && j.contains("subject") && j.contains("attncheck");
}

// One failing (not pass, not skipped) run of a law.
struct law_failure {
  std::uint64_t seed = 0;
  std::string verdict, kind, message, counterexample, file;
};

// One law summed over the gate runs of one subject.
struct law_sum {
  int runs = 0;
  std::map<std::string, int> verdicts;  ///< verdict id -> runs
  std::int64_t cases = 0, judged = 0;
  double max_ratio = 0;
  bool non_finite = false;  ///< some run's largest ratio was inf or NaN (null in its JSON)
  double seconds = 0;
  std::vector<law_failure> failures;
  int failed() const {
    int n = 0;
    for (const auto& [v, k] : verdicts) n += v == "pass" || v == "skipped" ? 0 : k;
    return n;
  }
};

struct subject_sum {
  std::set<std::uint64_t> seeds;
  std::vector<std::string> order;  ///< laws in the order they first appear
  std::map<std::string, law_sum> laws;
};

// Seeds as ranges: "1-20", "3, 5, 9-11".
std::string seed_ranges(const std::set<std::uint64_t>& seeds) {
  std::string out;
  for (auto it = seeds.begin(); it != seeds.end();) {
    auto end = it;
    while (std::next(end) != seeds.end() && *std::next(end) == *end + 1) ++end;
    out += (out.empty() ? "" : ", ") + std::to_string(*it) + (end != it ? "-" + std::to_string(*end) : "");
    it = std::next(end);
  }
  return out;
}

// The merged verdict of a law: FAIL (or another failing verdict, upper case) if a run failed, else pass, else skipped.
std::string merged_verdict(const law_sum& l) {
  if (l.verdicts.count("fail")) return "FAIL";
  for (const auto& [v, k] : l.verdicts)
    if (v != "pass" && v != "skipped") {
      std::string up = v;
      for (auto& ch : up) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      return up;
    }
  return l.verdicts.count("pass") ? "pass" : "skipped";
}

int merge_gates(const std::vector<nlohmann::json>& docs) {
  std::map<std::string, subject_sum> by;
  std::map<std::pair<std::string, std::uint64_t>, std::string> runs;  // (subject and declaration, seed) -> file
  for (std::size_t f = 0; f < docs.size(); ++f) {
    const auto& d = docs[f];
    const std::string& file = merge_files[f];
    std::string field = "subject";
    try {
      const std::string subject = d.at("subject");
      field = "seed";
      const std::uint64_t seed = d.at("seed");
      const std::string key = subject + "\n" + d.value("declared", nlohmann::json()).dump();
      if (const auto it = runs.find({key, seed}); it != runs.end())
        throw input_error(file, "the gate run of subject " + subject + " at seed " + std::to_string(seed) + " is also in '" +
                                    it->second + "': each run once");
      runs[{key, seed}] = file;
      auto& s = by[subject];
      s.seeds.insert(seed);
      std::size_t i = 0;
      for (const auto& l : d.at("laws")) {
        field = "laws[" + std::to_string(i++) + "]";
        const std::string law = l.at("name");
        if (!s.laws.count(law)) s.order.push_back(law);
        auto& sum = s.laws[law];
        const std::string v = l.at("verdict");
        ++sum.runs;
        ++sum.verdicts[v];
        sum.cases += l.at("cases").get<std::int64_t>();
        sum.judged += l.at("judged").get<std::int64_t>();
        sum.seconds += l.at("seconds").get<double>();
        const auto& r = l.at("max_ratio");
        if (r.is_null())
          sum.non_finite = true;
        else
          sum.max_ratio = std::max(sum.max_ratio, r.get<double>());
        if (v != "pass" && v != "skipped")
          sum.failures.push_back({seed, v, l.value("kind", std::string()),
                                  l.value("message", l.value("unjudged_why", std::string())),
                                  l.value("counterexample", std::string()), file});
      }
    } catch (const input_error&) {
      throw;
    } catch (const std::exception& e) {
      throw input_error(file, "field " + field + ": " + e.what());
    }
  }
  if (merge_seeds)
    for (const auto& [subject, s] : by) {
      std::string missing;
      std::uint64_t n = 0;
      for (std::uint64_t seed = 1; seed <= merge_seeds; ++seed)
        if (!s.seeds.count(seed) && ++n <= 20) missing += (missing.empty() ? "" : ", ") + std::to_string(seed);
      if (n)
        throw input_error("--seeds", "subject " + subject + ": " + std::to_string(n) + " of seeds 1-" +
                                         std::to_string(merge_seeds) + " missing: " + missing + (n > 20 ? ", ..." : ""));
      if (*s.seeds.rbegin() > merge_seeds)
        throw input_error("--seeds", "subject " + subject + ": seed " + std::to_string(*s.seeds.rbegin()) + " is outside 1-" +
                                         std::to_string(merge_seeds));
    }
  std::cout << "attncheck merge: " << docs.size() << (docs.size() == 1 ? " gate result of " : " gate results of ") << by.size()
            << " subject" << (by.size() == 1 ? "" : "s") << "\n";
  int failed_laws = 0, total_runs = 0, total_failed = 0;
  nlohmann::json out_subjects = nlohmann::json::array();
  for (const auto& [subject, s] : by) {
    std::size_t w = 4;
    for (const auto& law : s.order) w = std::max(w, law.size());
    std::cout << "\nsubject " << subject << ": " << s.seeds.size() << (s.seeds.size() == 1 ? " run, seed " : " runs, seeds ")
              << seed_ranges(s.seeds) << "\n"
              << std::left << std::setw(static_cast<int>(w)) << "law" << std::right << "  " << std::setw(5) << "runs"
              << "  " << std::setw(6) << "failed"
              << "  " << std::setw(15) << "judged/run"
              << "  " << std::setw(10) << "max obs/bd"
              << "  " << std::setw(8) << "verdict"
              << "  " << std::setw(8) << "seconds"
              << "\n";
    nlohmann::json out_laws = nlohmann::json::array();
    for (const auto& law : s.order) {
      const law_sum& l = s.laws.at(law);
      const std::string v = merged_verdict(l);
      char ratio[32], secs[32];
      std::snprintf(ratio, sizeof ratio, "%.3g", l.max_ratio);
      std::snprintf(secs, sizeof secs, "%.2f", l.seconds);
      const std::string judged = v == "skipped" ? "-" : std::to_string(l.judged) + "/" + std::to_string(l.cases);
      std::cout << std::left << std::setw(static_cast<int>(w)) << law << std::right << "  " << std::setw(5) << l.runs << "  "
                << std::setw(6) << l.failed() << "  " << std::setw(15) << judged << "  " << std::setw(10)
                << (l.non_finite ? std::string("non-finite") : std::string(ratio)) << "  " << std::setw(8) << v << "  "
                << std::setw(8) << secs << "\n";
      for (const auto& x : l.failures)
        std::cout << "    seed " << x.seed << ": " << x.verdict << (x.kind.empty() ? "" : " (" + x.kind + ")") << ": "
                  << x.message.substr(0, 300) << (x.counterexample.empty() ? "" : "; counterexample " + x.counterexample) << " ["
                  << x.file << "]\n";
      failed_laws += l.failed() > 0;
      total_runs += l.runs, total_failed += l.failed();
      nlohmann::json fails = nlohmann::json::array();
      for (const auto& x : l.failures)
        fails.push_back({{"seed", x.seed},
                         {"verdict", x.verdict},
                         {"kind", x.kind},
                         {"message", x.message},
                         {"counterexample", x.counterexample},
                         {"file", x.file}});
      out_laws.push_back({{"name", law},
                          {"runs", l.runs},
                          {"failed", l.failed()},
                          {"verdicts", l.verdicts},
                          {"verdict", v},
                          {"cases", l.cases},
                          {"judged", l.judged},
                          {"max_ratio", l.non_finite ? nlohmann::json(nullptr) : nlohmann::json(l.max_ratio)},
                          {"seconds", l.seconds},
                          {"failures", fails}});
    }
    out_subjects.push_back(
        {{"subject", subject}, {"seeds", std::vector<std::uint64_t>(s.seeds.begin(), s.seeds.end())}, {"laws", out_laws}});
  }
  std::cout << "\nmerge: " << total_runs << " law runs, " << total_failed << " not passed (failed, unjudged or other) in "
            << failed_laws << " law" << (failed_laws == 1 ? "" : "s") << " of " << by.size() << " subject"
            << (by.size() == 1 ? "" : "s") << (total_failed ? "  -> FAIL" : "  -> PASS") << "\n";
  if (!merge_json.empty()) {
    const nlohmann::json doc = {{"kind", "attncheck gate merge"},
                                {"files", merge_files},
                                {"runs", total_runs},
                                {"failed", total_failed},
                                {"subjects", out_subjects}};
    std::ofstream f(merge_json);
    if (!f || !(f << doc.dump(2) << "\n")) throw input_error("--json", "cannot write '" + merge_json + "'");
    std::cout << "results: " << merge_json << "\n";
  }
  return total_failed ? 1 : 0;
}

int run_merge_cmd() {
  std::vector<nlohmann::json> docs;
  for (const auto& f : merge_files) docs.push_back(read_json(f));
  const bool campaign = is_campaign(docs.front()), gate = is_gate(docs.front());
  if (!campaign && !gate)
    throw input_error(merge_files.front(),
                      "neither a campaign result (attncheck campaign --json) nor a gate result "
                      "(attncheck gate --json)");
  for (std::size_t f = 1; f < docs.size(); ++f)
    if (campaign ? !is_campaign(docs[f]) : !is_gate(docs[f]))
      throw input_error(merge_files[f], std::string("not a ") + (campaign ? "campaign" : "gate") + " result like '" +
                                            merge_files.front() + "': merge one kind at a time");
  if (gate) return merge_gates(docs);
  if (merge_seeds) throw input_error("--seeds", "applies to gate results only (a campaign's shards are checked whole)");
  std::vector<campaign_result> parts;
  for (const auto& f : merge_files) parts.push_back(read_campaign_json(f));
  const campaign_result m = merge_campaigns(parts, merge_files);
  print_campaign(m, std::cout);
  return finish_campaign(m, merge_json);
}

}  // namespace

void add_merge(CLI::App& app) {
  auto* m = app.add_subcommand("merge",
                               "Merge result JSONs: the shards of one campaign into the unsharded run, or gate runs into "
                               "one per-law table per subject; exit 1 if the merged result has a violation or failure");
  m->add_option("FILE", merge_files,
                "campaign JSONs (attncheck campaign --shard i/N --json), every shard of one run once; or gate JSONs "
                "(attncheck gate --json)")
      ->required();
  m->add_option("--seeds", merge_seeds,
                "gate results: every subject must hold the runs of seeds 1..N, each once (the missing are named, exit 2)")
      ->check(number_in(std::uint64_t{1}, std::uint64_t{1'000'000}));
  m->add_option("--json", merge_json, "write the merged result here as JSON (a campaign result, or the per-law tables)");
  register_runner(m, run_merge_cmd);
}

}  // namespace attncheck::cli
