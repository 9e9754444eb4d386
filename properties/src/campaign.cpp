#include "attncheck/campaign.hpp"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <ostream>
#include <thread>
#include <atomic>
#include <sys/mman.h>
#include <vector>

#include "attncheck/case_file.hpp"
#include "attncheck/check.hpp"
#include "attncheck/generators.hpp"
#include "attncheck/isolate.hpp"

namespace attncheck {

namespace {

// Keeps the campaign_stats::worst_kept largest, largest first (stable: ties keep the earlier).
void keep_worst(std::vector<std::pair<double, std::string>>& worst, double ratio, const std::string& what) {
  auto at = std::find_if(worst.begin(), worst.end(), [ratio](const auto& w) { return ratio > w.first || std::isnan(w.first); });
  if (std::isnan(ratio)) at = worst.end();
  if (at == worst.end() && worst.size() >= campaign_stats::worst_kept) return;
  worst.insert(at, {ratio, what});
  if (worst.size() > campaign_stats::worst_kept) worst.pop_back();
}

nlohmann::json to_json(const campaign_stats& s) {
  nlohmann::json worst = nlohmann::json::array();
  for (const auto& [ratio, what] : s.worst) worst.push_back({std::bit_cast<std::uint64_t>(ratio), what});
  return {{"cases", s.cases},
          {"elements", s.elements},
          {"violations", s.violations},
          {"violating_cases", s.violating_cases},
          {"unjudged_elements", s.unjudged_elements},
          {"histogram", s.histogram},
          {"max_ratio", std::bit_cast<std::uint64_t>(s.max_ratio)},
          {"max_ratio_case", s.max_ratio_case},
          {"first_violation", s.first_violation},
          {"fast_tier_cases", s.fast_tier_cases},
          {"worst", worst}};
}

campaign_stats stats_from(const nlohmann::json& j) {
  campaign_stats s;
  s.cases = j.at("cases"), s.elements = j.at("elements"), s.violations = j.at("violations");
  s.violating_cases = j.at("violating_cases");
  s.unjudged_elements = j.at("unjudged_elements");
  s.histogram = j.at("histogram").get<decltype(s.histogram)>();
  s.max_ratio = std::bit_cast<double>(j.at("max_ratio").get<std::uint64_t>());
  s.max_ratio_case = j.at("max_ratio_case"), s.first_violation = j.at("first_violation");
  s.fast_tier_cases = j.at("fast_tier_cases");
  for (const auto& w : j.at("worst"))
    s.worst.emplace_back(std::bit_cast<double>(w.at(0).get<std::uint64_t>()), w.at(1).get<std::string>());
  return s;
}

// Cases judged by the oracle's fast tier (auto_tier), per dtype.
using tier_counts = std::map<std::string, std::int64_t>;

// Cases first..last-1 of the campaign; case k is drawn with seed opt.seed + k.
// The oracle is auto_tier: its fast binary64 tier where that tier's own error
// is at most 2^-20 of the bound on every element, mpfr50 otherwise
// (docs/oracle.md, "Tiers"); fast counts the cases the fast tier judged.
std::map<std::string, campaign_stats> run_slice(const subject& s, const campaign_options& opt, std::int64_t first,
                                                std::int64_t last, tier_counts& fast, std::int64_t* done) {
  std::map<std::string, campaign_stats> by;
  gen_options g;
  g.max_work = opt.max_work;
  const auto gen = any_case(s, g);
  int saved = 0;
  for (std::int64_t k = first; k < last; ++k) {
    if (done) __atomic_store_n(done, k - first, __ATOMIC_RELAXED);
    attn_case c = gen(rc::Random(opt.seed + static_cast<std::uint64_t>(k)), static_cast<int>(k % 100)).value();
    if (opt.only_type) c.type = *opt.only_type;
    materialize(c);
    const auto out = s.attend(c);
    const oracle_result ref = reference(c, oracle_options_for(s, c, oracle_precision::auto_tier));
    auto& st = by[std::string(name(c.type))];
    ++st.cases;
    if (ref.tier == oracle_tier::fast_binary64) ++fast[std::string(name(c.type))];
    comparison worst;  // per element: every ratio goes into the histogram
    worst.overflow_threshold = overflow_threshold(c.type);
    bool violated = false;
    auto one = [&](const std::string& where, double expected, double got, double bound) {
      comparison e;
      e.overflow_threshold = worst.overflow_threshold;
      e.element(where, expected, got, bound);
      if (std::isnan(expected)) return;
      if (e.pass && e.compared == 0) {  // NaN or +inf bound: outside the bound's domain, nothing judged
        ++st.unjudged_elements;
        return;
      }
      ++st.elements;
      ++st.histogram[e.pass ? ratio_bin(e.max_ratio) : campaign_edges.size() + 1];
      if (!e.pass) ++st.violations, violated = true;
      worst.merge(e);
    };
    if (!out.ok()) {
      violated = true;
      ++st.violations;
      worst.fail(out.status ? "subject returned " + out.error : "subject wrote outside its output: " + out.guard_report,
                 failure_kind::subject_error);
    } else {
      for (std::int64_t b = 0; b < c.b; ++b)
        for (std::int64_t i = 0; i < c.lq; ++i)
          for (std::int64_t h = 0; h < c.hq; ++h) {
            for (std::int64_t e = 0; e < c.dv; ++e) {
              const auto x = ref.o_index(b, i, h, e);
              one(o_where(b, i, h, e), ref.o[x], out.o.at(b, i, h, e), ref.o_bound[x]);
            }
            if (!out.lse.empty())
              one(lse_where(b, h, i), ref.lse[ref.lse_index(b, h, i)],
                  out.lse[static_cast<std::size_t>((b * c.hq + h) * c.lq + i)], ref.lse_bound[ref.lse_index(b, h, i)]);
          }
    }
    if (out.ok()) keep_worst(st.worst, worst.max_ratio, to_line(c) + "  " + worst.worst.describe());
    if (worst.max_ratio > st.max_ratio || st.max_ratio_case.empty()) {
      st.max_ratio = std::max(st.max_ratio, worst.max_ratio);
      st.max_ratio_case = to_line(c) + "  " + worst.worst.describe();
    }
    if (violated) {
      ++st.violating_cases;
      if (st.first_violation.empty()) st.first_violation = to_line(c) + "  " + worst.failure;
      if (!opt.out_dir.empty() && saved < 20) {
        std::filesystem::create_directories(opt.out_dir);
        char file[64];
        std::snprintf(file, sizeof file, "campaign-%016llx.json", static_cast<unsigned long long>(fingerprint(c)));
        write_case_file((std::filesystem::path(opt.out_dir) / file).string(),
                        {c, "differential.output_within_bound_of_oracle", s.name(), worst.failure.substr(0, 2000)});
        ++saved;
      }
    }
  }
  return by;
}

std::string percent(std::int64_t n, std::int64_t of) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f%%", of ? 100.0 * static_cast<double>(n) / static_cast<double>(of) : 0.0);
  return buf;
}

}  // namespace

void campaign_stats::add(const campaign_stats& o) {
  cases += o.cases, elements += o.elements, violations += o.violations, violating_cases += o.violating_cases;
  unjudged_elements += o.unjudged_elements;
  for (std::size_t i = 0; i < histogram.size(); ++i) histogram[i] += o.histogram[i];
  if (o.max_ratio > max_ratio || max_ratio_case.empty()) max_ratio = o.max_ratio, max_ratio_case = o.max_ratio_case;
  if (first_violation.empty()) first_violation = o.first_violation;
  fast_tier_cases += o.fast_tier_cases;
  for (const auto& [ratio, what] : o.worst) keep_worst(worst, ratio, what);
}

std::int64_t campaign_result::violations() const {
  std::int64_t n = 0;
  for (const auto& [t, s] : by_type) n += s.violations;
  return n;
}

campaign_result run_campaign(const campaign_options& opt, std::ostream& out) {
  if (opt.cases < 1) throw input_error("--cases", "must be >= 1");
  if (opt.jobs < 1 || opt.jobs > 64) throw input_error("--jobs", "must be in [1, 64]");
  const auto s = subject::load(opt.subject);
  campaign_result r;
  tier_counts fast;
  const auto start = std::chrono::steady_clock::now();
  // Progress: each worker publishes its count of finished cases in shared
  // memory; done/total, rate and ETA go to `progress` (every second in place
  // on a terminal, a plain line every progress_seconds otherwise).
  const int workers = opt.jobs;
  void* mem = mmap(nullptr, sizeof(std::int64_t) * static_cast<std::size_t>(workers), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) throw std::runtime_error("mmap failed");
  auto* counts = static_cast<std::int64_t*>(mem);
  for (int w = 0; w < workers; ++w) counts[w] = 0;
  // One progress line: done/total, rate, ETA (in place on a terminal).
  auto last_line = start;
  auto print_progress = [&](bool force) {
    const auto now = std::chrono::steady_clock::now();
    if (!force && std::chrono::duration<double>(now - last_line).count() < (opt.progress_tty ? 1.0 : opt.progress_seconds))
      return;
    last_line = now;
    std::int64_t n = 0;
    for (int w = 0; w < workers; ++w) n += __atomic_load_n(&counts[w], __ATOMIC_RELAXED);
    const double secs = std::chrono::duration<double>(now - start).count();
    const double rate = secs > 0 ? static_cast<double>(n) / secs : 0;
    char line[160];
    std::snprintf(line, sizeof line, "campaign: %lld/%lld cases (%.1f%%), %.0f cases/s, ETA %.0f s", static_cast<long long>(n),
                  static_cast<long long>(opt.cases), 100.0 * static_cast<double>(n) / static_cast<double>(opt.cases), rate,
                  rate > 0 ? static_cast<double>(opt.cases - n) / rate : 0.0);
    *opt.progress << (opt.progress_tty ? "\r\033[K" : "") << line << (opt.progress_tty ? "" : "\n") << std::flush;
  };
  struct unmap {
    void* mem;
    std::size_t bytes;
    ~unmap() { munmap(mem, bytes); }
  } unmap_counts{mem, sizeof(std::int64_t) * static_cast<std::size_t>(workers)};
  if (opt.jobs == 1) {
    // In process: a thread prints the progress lines while this one works.
    std::atomic<bool> finished{false};
    std::thread reporter;
    if (opt.progress)
      reporter = std::thread([&] {
        while (!finished.load()) {
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
          if (!finished.load()) print_progress(false);
        }
        if (opt.progress_tty) *opt.progress << "\r\033[K" << std::flush;
      });
    struct stop_reporter {
      std::atomic<bool>& finished;
      std::thread& t;
      ~stop_reporter() {
        finished = true;
        if (t.joinable()) t.join();
      }
    } stop{finished, reporter};
    r.by_type = run_slice(*s, opt, 0, opt.cases, fast, &counts[0]);
  } else {
    // Forked workers, each a contiguous slice; summaries come back as JSON.
    // They are forked and polled from this one thread (run_isolated_all),
    // which also prints the progress: a fork next to a running thread can
    // copy a lock that thread holds (the allocator's, under ASan) and hang
    // the child forever.
    std::vector<std::function<std::string()>> slices;
    for (int w = 0; w < opt.jobs; ++w) {
      const std::int64_t first = opt.cases * w / opt.jobs, last = opt.cases * (w + 1) / opt.jobs;
      slices.emplace_back([&, w, first, last] {
        nlohmann::json j;
        tier_counts slice_fast;
        for (const auto& [t, st] : run_slice(*s, opt, first, last, slice_fast, &counts[w])) {
          j[t] = to_json(st);
          j[t]["fast_tier_cases"] = slice_fast[t];
        }
        return j.dump();
      });
    }
    const auto outcomes = run_isolated_all(slices, 1e7, opt.jobs, [&](const std::vector<std::size_t>&, std::size_t) {
      if (opt.progress) print_progress(false);
    });
    if (opt.progress && opt.progress_tty) *opt.progress << "\r\033[K" << std::flush;
    for (const auto& co : outcomes) {
      if (!co.completed) throw std::runtime_error("a campaign worker was " + co.describe());
      const auto summary = nlohmann::json::parse(co.payload);  // named: items() refers into it
      for (const auto& [t, j] : summary.items()) {
        r.by_type[t].add(stats_from(j));
        fast[t] += j.value("fast_tier_cases", std::int64_t{0});
      }
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.subject_name = s->name();
  for (auto& [t, st] : r.by_type) st.fast_tier_cases = fast[t];
  std::int64_t total = 0, total_fast = 0;
  for (const auto& [t, st] : r.by_type) total += st.cases, total_fast += fast[t];
  out << "attncheck campaign: subject " << s->name() << " (" << opt.subject << "), " << total << " cases, seed " << opt.seed
      << ", jobs " << opt.jobs << "\n";
  out << "oracle: auto_tier: fast binary64 tier judged " << total_fast << " of " << total << " cases ("
      << percent(total_fast, total) << "), mpfr50 the rest\n";
  char rate[64];
  std::snprintf(rate, sizeof rate, "%.1f s, %.0f cases/s", r.seconds, static_cast<double>(total) / r.seconds);
  out << "time: " << rate << "\n";
  for (const auto& [t, st] : r.by_type) {
    out << "\n[" << t << "] " << st.cases << " cases, " << st.elements << " elements (O and LSE) judged, violations "
        << st.violations << " in " << st.violating_cases << " cases; " << st.unjudged_elements
        << " elements outside the bound's domain (NaN or +inf bound: not judged)\n";
    out << "  judged by the fast oracle tier: " << fast[t] << " cases (" << percent(fast[t], st.cases) << ")\n";
    out << "  observed/bound histogram (per element):\n";
    out << "    " << std::setw(14) << "= 0"
        << "  " << std::setw(12) << st.histogram[0] << "  " << percent(st.histogram[0], st.elements) << "\n";
    double lo = 0;
    for (std::size_t i = 0; i < campaign_edges.size(); ++i) {
      char label[40];
      std::snprintf(label, sizeof label, "(%g, %g%s", lo, campaign_edges[i], i + 1 == campaign_edges.size() ? "]" : ")");
      out << "    " << std::setw(14) << label << "  " << std::setw(12) << st.histogram[i + 1] << "  "
          << percent(st.histogram[i + 1], st.elements) << "\n";
      lo = campaign_edges[i];
    }
    out << "    " << std::setw(14) << "> 1"
        << "  " << std::setw(12) << st.histogram.back() << "  " << percent(st.histogram.back(), st.elements) << "\n";
    char m[32];
    std::snprintf(m, sizeof m, "%.4g", st.max_ratio);
    out << "  largest observed/bound " << m << ": " << st.max_ratio_case << "\n";
    if (!st.first_violation.empty()) out << "  first violation: " << st.first_violation << "\n";
  }
  out << "\ncampaign: " << r.violations() << " violations" << (r.violations() ? "  -> FAIL" : "  -> PASS") << "\n";
  return r;
}

}  // namespace attncheck
