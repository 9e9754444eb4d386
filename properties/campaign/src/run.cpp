// Running a campaign: the cases of this shard in slices, in this process or
// in forked workers, with progress lines; then its report.
#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <ostream>
#include <thread>
#include <vector>

#include "attncheck/failure_report.hpp"
#include "attncheck/case_file.hpp"
#include "attncheck/gate.hpp"
#include "attncheck/generators.hpp"
#include "attncheck/input_forms.hpp"
#include "attncheck/isolate.hpp"
#include "attncheck/laws.hpp"
#include "campaign_internal.hpp"

namespace attncheck {

using namespace campaign_detail;

namespace {

// The stats of a slice of cases: by dtype, by feature, by gradient.
struct slice_stats {
  std::map<std::string, campaign_stats> by_type, by_feature, by_gradient;
};

// Positions first..last-1 of this shard's cases (case k = shard_index +
// shard_count * position); case k is drawn with seed opt.seed + k and size
// k % 100, so its draw does not depend on the shard it runs in. Each case
// is judged by judge_forward or judge_backward (their oracles: forward.cpp,
// backward.cpp).
slice_stats run_slice(const subject& s, const campaign_options& opt, std::int64_t first, std::int64_t last, std::int64_t* done) {
  slice_stats by;
  gen_options g;
  g.max_work = opt.max_work;
  g.variants = opt.variants;  // as the differential law's generator: capped at variant_max_work
  g.fp8 = opt.fp8;
  const law* bw = opt.backward ? find_law(opt.variants ? backward_variant_law : backward_law) : nullptr;
  if (bw && bw->max_work > 0) g.max_work = std::min(g.max_work, bw->max_work);  // as the runner caps the law's cases
  const auto gen = any_case(s, g);
  int saved = 0;
  for (std::int64_t p = first; p < last; ++p) {
    if (done) __atomic_store_n(done, p - first, __ATOMIC_RELAXED);
    const std::int64_t k = opt.shard_index + opt.shard_count * p;
    attn_case c = gen(rc::Random(opt.seed + static_cast<std::uint64_t>(k)), static_cast<int>(k % 100)).value();
    if (opt.only_type) c.type = *opt.only_type;
    if (!opt.form.empty()) draw_input_form(c, s, opt.form);
    if (bw) bw->prepare(c, s);  // the backward law's: its work, its variants (contract 1.0 without), a dO recipe
    materialize(c);
    // This case's stats, added to its dtype's and to each of its features' (and gradients').
    case_tally t(c.type);
    std::map<std::string, campaign_stats> grads;
    try {
      if (bw)
        judge_backward(s, c, t, grads);
      else
        judge_forward(s, c, t);
    } catch (const case_declined&) {  // a version 4 subject's decline: counted, never judged
      campaign_stats declined;
      declined.declined = 1;
      by.by_type[std::string(name(c.type))].add(declined);
      continue;
    }
    campaign_stats& st = t.st;
    const comparison& worst = t.worst;
    if (t.ran) keep_worst(st, worst.max_ratio, k, to_line(c) + "  " + worst.worst.describe());
    st.max_ratio = worst.max_ratio;
    st.max_ratio_case = to_line(c) + "  " + worst.worst.describe();
    st.max_ratio_index = k;
    if (t.violated) {
      ++st.violating_cases;
      st.first_violation = to_line(c) + "  " + worst.failure;
      st.violating.push_back({k, to_line(c) + "  " + worst.failure.substr(0, 2000)});
      if (!opt.out_dir.empty() && saved < 20) {
        std::filesystem::create_directories(opt.out_dir);
        char file[64];
        std::snprintf(file, sizeof file, "campaign-%016llx.json", static_cast<unsigned long long>(fingerprint(c)));
        // The subject's spec (a plugin's path absolute): `attncheck repro FILE` replays it as is.
        write_case_file((std::filesystem::path(opt.out_dir) / file).string(),
                        {c, bw ? bw->name.c_str() : "differential.output_within_bound_of_oracle", absolute_spec(opt.subject),
                         worst.failure.substr(0, 2000)});
        ++saved;
      }
    }
    for (auto& [gradient, gs] : grads) {
      gs.max_ratio_index = k;
      for (auto& v : gs.violating) v.index = k;
      if (t.ran) keep_worst(gs, gs.max_ratio, k, gs.max_ratio_case);
      by.by_gradient[gradient].add(gs);
    }
    by.by_type[std::string(name(c.type))].add(st);
    for (const std::string& f : features_of(c)) by.by_feature[f].add(st);
    // fp8 cases, by each fp8 input type they hold ("fp8 e4m3", "fp8 e5m2": print_campaign's rows).
    for (dtype t : {dtype::e4m3, dtype::e5m2})
      if (c.quant.holds(t)) by.by_feature["fp8 " + std::string(name(t))].add(st);
  }
  return by;
}

}  // namespace

campaign_result run_campaign(const campaign_options& opt, std::ostream& out) {
  if (opt.cases < 1) throw input_error("--cases", "must be >= 1");
  if (opt.jobs < 1 || opt.jobs > 64) throw input_error("--jobs", "must be in [1, 64]");
  if (opt.shard_count < 1 || opt.shard_count > max_shards || opt.shard_index < 0 || opt.shard_index >= opt.shard_count)
    throw input_error("--shard", "must be i/N with 0 <= i < N <= " + std::to_string(max_shards));
  if (opt.shard_count > opt.cases)
    throw input_error("--shard", "N = " + std::to_string(opt.shard_count) + " must be at most --cases (" +
                                     std::to_string(opt.cases) + "): every shard runs at least one case");
  if (!opt.form.empty() && opt.form != "paged" && opt.form != "ragged")
    throw input_error("--form", "'" + opt.form + "' is not one of paged, ragged");
  if (opt.backward && !opt.form.empty())
    throw input_error("--backward", "not with --form: the backward oracle judges the dense form only");
  const auto s = subject::load(opt.subject);
  if (opt.fp8 && fp8_types_of(*s).empty())
    throw input_error("--fp8", "subject " + s->name() + " does not declare fp8 inputs (ABI v4 FEATURE4_FP8 with e4m3 or e5m2)");
  if (opt.fp8 && (opt.backward || !opt.form.empty()))
    throw input_error("--fp8", "not with --backward or --form: fp8 inputs are judged in the dense forward only");
  if (opt.backward && !s->has_backward())
    throw input_error("--backward", "subject " + s->name() + " does not declare backward (ABI v3 FEATURE3_BACKWARD)");
  if (opt.backward && opt.variants && !s->has_backward_variants())
    throw input_error("--variants", "with --backward: subject " + s->name() +
                                        "'s backward takes no variants (ABI v3 FEATURE3_BACKWARD_VARIANTS)");
  if (!opt.form.empty()) {
    attn_case probe;  // the subject must declare the form: a clear error before any worker starts
    draw_input_form(probe, *s, opt.form);
  }
  campaign_result r;
  const std::int64_t todo = shard_cases(opt);
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
                  static_cast<long long>(todo), 100.0 * static_cast<double>(n) / static_cast<double>(todo), rate,
                  rate > 0 ? static_cast<double>(todo - n) / rate : 0.0);
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
    slice_stats sl = run_slice(*s, opt, 0, todo, &counts[0]);
    r.by_type = std::move(sl.by_type), r.by_feature = std::move(sl.by_feature), r.by_gradient = std::move(sl.by_gradient);
  } else {
    // Forked workers, each a contiguous slice of this shard's cases;
    // summaries come back as JSON. They are forked and polled from this one
    // thread (run_isolated_all), which also prints the progress: a fork next
    // to a running thread can copy a lock that thread holds (the
    // allocator's, under ASan) and hang the child forever.
    std::vector<std::function<std::string()>> slices;
    for (int w = 0; w < opt.jobs; ++w) {
      const std::int64_t first = todo * w / opt.jobs, last = todo * (w + 1) / opt.jobs;
      slices.emplace_back([&, w, first, last] {
        nlohmann::json j = {{"by_type", nlohmann::json::object()},
                            {"by_feature", nlohmann::json::object()},
                            {"by_gradient", nlohmann::json::object()}};
        const slice_stats sl = run_slice(*s, opt, first, last, &counts[w]);
        for (const auto& [t, st] : sl.by_type) j["by_type"][t] = to_json(st);
        for (const auto& [f, st] : sl.by_feature) j["by_feature"][f] = to_json(st);
        for (const auto& [g, st] : sl.by_gradient) j["by_gradient"][g] = to_json(st);
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
      for (const auto& [t, j] : summary.at("by_type").items()) r.by_type[t].add(stats_from(j));
      for (const auto& [f, j] : summary.at("by_feature").items()) r.by_feature[f].add(stats_from(j));
      for (const auto& [g, j] : summary.at("by_gradient").items()) r.by_gradient[g].add(stats_from(j));
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.subject_name = s->name();
  r.options = opt;
  r.options.progress = nullptr;
  r.shards = {{opt.shard_index, r.cases(), r.seconds}};
  print_campaign(r, out);
  return r;
}

}  // namespace attncheck
