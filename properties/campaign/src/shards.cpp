// Shards of a campaign: --shard i/N and the merge of every shard of a run
// into the result of the unsharded run.
#include <algorithm>
#include <map>

#include "campaign_internal.hpp"

namespace attncheck {

// Cases of this shard: k = shard_index + shard_count * p for p in [0, shard_cases).
std::int64_t campaign_detail::shard_cases(const campaign_options& opt) {
  return (opt.cases - opt.shard_index + opt.shard_count - 1) / opt.shard_count;
}

using campaign_detail::shard_cases;

void parse_shard(const std::string& text, campaign_options& opt) {
  const std::string limit = "'" + text + "' is not i/N with 0 <= i < N <= " + std::to_string(max_shards);
  const auto slash = text.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == text.size() || text.size() > 12)
    throw input_error("--shard", limit);
  const auto number = [&](const std::string& t) {
    if (t.find_first_not_of("0123456789") != std::string::npos) throw input_error("--shard", limit);
    return std::stoll(t);
  };
  const long long i = number(text.substr(0, slash)), n = number(text.substr(slash + 1));
  if (n < 1 || n > max_shards || i >= n) throw input_error("--shard", limit);
  opt.shard_index = static_cast<int>(i), opt.shard_count = static_cast<int>(n);
}

campaign_result merge_campaigns(const std::vector<campaign_result>& parts, const std::vector<std::string>& names) {
  if (parts.empty()) throw input_error("FILE", "no campaign results to merge");
  const campaign_result& a = parts.front();
  const auto& ao = a.options;
  std::map<int, std::string> seen;  // shard index -> the file holding it
  campaign_result m;
  m.subject_name = a.subject_name, m.version = a.version;
  m.options = ao;
  m.options.shard_index = 0, m.options.shard_count = 1;
  for (std::size_t f = 0; f < parts.size(); ++f) {
    const campaign_result& p = parts[f];
    const auto& po = p.options;
    const std::string& file = names[f];
    const auto differs = [&](const char* what, const std::string& here, const std::string& there) {
      if (here != there)
        throw input_error(file, std::string(what) + " " + here + " differs from " + there + " in '" + names.front() +
                                    "': not a shard of the same run");
    };
    differs("subject", po.subject + " (" + p.subject_name + ")", ao.subject + " (" + a.subject_name + ")");
    differs("cases", std::to_string(po.cases), std::to_string(ao.cases));
    differs("seed", std::to_string(po.seed), std::to_string(ao.seed));
    differs("dtype", po.only_type ? std::string(name(*po.only_type)) : "mixed",
            ao.only_type ? std::string(name(*ao.only_type)) : "mixed");
    differs("max_work", std::to_string(po.max_work), std::to_string(ao.max_work));
    differs("variants", po.variants ? "on" : "off", ao.variants ? "on" : "off");
    differs("form", po.form.empty() ? "dense" : po.form, ao.form.empty() ? "dense" : ao.form);
    differs("backward", po.backward ? "on" : "off", ao.backward ? "on" : "off");
    differs("shard count", std::to_string(po.shard_count), std::to_string(ao.shard_count));
    differs("attncheck version", p.version, a.version);
    // A merged file (count 1) is the whole run: its one shard is 0.
    const int index = po.shard_count == 1 ? 0 : po.shard_index;
    if (const auto it = seen.find(index); it != seen.end())
      throw input_error(file, "shard " + std::to_string(index) + "/" + std::to_string(po.shard_count) + " is also in '" +
                                  it->second + "': each shard once");
    seen[index] = file;
    if (po.shard_count > 1 && (p.shards.size() != 1 || p.shards.front().index != po.shard_index))
      throw input_error(file, "field shards: does not name the file's own shard " + std::to_string(po.shard_index));
    // Shard i of N ran exactly its ceil((cases - i) / N) cases; a merged file, all of them.
    if (const std::int64_t want = shard_cases(po); p.cases() != want)
      throw input_error(file, "holds " + std::to_string(p.cases()) + " cases, shard " + std::to_string(po.shard_index) + "/" +
                                  std::to_string(po.shard_count) + " of " + std::to_string(po.cases) + " has " +
                                  std::to_string(want));
    for (const auto& [t, st] : p.by_type) m.by_type[t].add(st);
    for (const auto& [f, st] : p.by_feature) m.by_feature[f].add(st);
    for (const auto& [g, st] : p.by_gradient) m.by_gradient[g].add(st);
    m.seconds += p.seconds;
    m.options.jobs = std::max(m.options.jobs, po.jobs);
    for (const auto& sh : p.shards) m.shards.push_back(sh);
  }
  std::string missing;
  int n_missing = 0;
  for (int i = 0; i < ao.shard_count; ++i)
    if (!seen.count(i)) {
      if (++n_missing <= 20) missing += (missing.empty() ? "" : ", ") + std::to_string(i);
    }
  if (n_missing)
    throw input_error("FILE", std::to_string(n_missing) + " of " + std::to_string(ao.shard_count) + " shards missing: " +
                                  missing + (n_missing > 20 ? ", ..." : "") + " (of the run of " + std::to_string(ao.cases) +
                                  " cases, seed " + std::to_string(ao.seed) + ", subject " + ao.subject + ")");
  std::sort(m.shards.begin(), m.shards.end(), [](const campaign_shard& x, const campaign_shard& y) { return x.index < y.index; });
  // Each shard ran exactly its cases: shard i of N holds ceil((cases - i) / N).
  std::int64_t want = 0, have = m.cases();
  campaign_options each = ao;
  for (int i = 0; i < ao.shard_count; ++i) each.shard_index = i, want += shard_cases(each);
  if (have != want)
    throw input_error("FILE", "the shards hold " + std::to_string(have) + " cases, the run has " + std::to_string(want));
  return m;
}

}  // namespace attncheck
