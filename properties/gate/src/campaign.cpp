#include "attncheck/campaign.hpp"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iterator>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <thread>
#include <atomic>
#include <sys/mman.h>
#include <vector>

#include "attncheck/backward_fudge.hpp"
#include "attncheck/backward_inputs.hpp"
#include "attncheck/backward_oracle.hpp"
#include "attncheck/case_file.hpp"
#include "attncheck/check.hpp"
#include "attncheck/generators.hpp"
#include "attncheck/input_forms.hpp"
#include "attncheck/isolate.hpp"
#include "attncheck/laws.hpp"
#include "attncheck/result_json.hpp"
#include "attncheck/version.hpp"
#include "gate_internal.hpp"

namespace attncheck {

namespace {

// Is (ra, ia) ranked before (rb, ib) among the worst? The larger ratio
// first, NaN last, ties: the lower case index.
bool ranks_before(double ra, std::int64_t ia, double rb, std::int64_t ib) {
  if (std::isnan(ra) != std::isnan(rb)) return std::isnan(rb);
  if (!std::isnan(ra) && ra != rb) return ra > rb;
  return ia < ib;
}

// Keeps the campaign_stats::worst_kept highest ranked (ranks_before), highest first.
void keep_worst(campaign_stats& s, double ratio, std::int64_t index, const std::string& what) {
  std::size_t at = 0;
  while (at < s.worst.size() && !ranks_before(ratio, index, s.worst[at].first, s.worst_index[at])) ++at;
  if (at >= campaign_stats::worst_kept) return;
  s.worst.insert(s.worst.begin() + static_cast<std::ptrdiff_t>(at), {ratio, what});
  s.worst_index.insert(s.worst_index.begin() + static_cast<std::ptrdiff_t>(at), index);
  if (s.worst.size() > campaign_stats::worst_kept) s.worst.pop_back(), s.worst_index.pop_back();
}

// A shard's stats as JSON through the result codec's fields (exact numbers:
// a ratio is a number, or "inf", "-inf", "nan"); the kept lists by hand.
constexpr auto stats_fields = [](auto& s, auto&& f) {
  f("cases", s.cases), f("elements", s.elements), f("violations", s.violations), f("violating_cases", s.violating_cases);
  f("unjudged_elements", s.unjudged_elements), f("fast_tier_cases", s.fast_tier_cases), f("histogram", s.histogram);
  f("max_ratio", s.max_ratio), f("max_ratio_index", s.max_ratio_index), f("max_ratio_case", s.max_ratio_case);
  f("first_violation", s.first_violation);
};

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

// Cases of this shard: k = shard_index + shard_count * p for p in [0, shard_cases).
std::int64_t shard_cases(const campaign_options& opt) {
  return (opt.cases - opt.shard_index + opt.shard_count - 1) / opt.shard_count;
}

// Positions first..last-1 of this shard's cases (case k = shard_index +
// shard_count * position); case k is drawn with seed opt.seed + k and size
// k % 100, so its draw does not depend on the shard it runs in.
// The oracle is auto_tier: its fast binary64 tier where that tier's own error
// is at most 2^-20 of the bound on every element, mpfr50 otherwise
// (docs/oracle.md, "Tiers"); fast_tier_cases counts the cases the fast tier judged.
struct slice_stats {
  std::map<std::string, campaign_stats> by_type, by_feature, by_gradient;
};

// One case's judging: every element's observed/bound into the case's stats
// (and, for backward, its gradient's), the worst element and the first failure.
struct case_tally {
  campaign_stats st;
  comparison worst;
  bool violated = false;
  bool ran = true;  ///< false when the subject failed to run
  explicit case_tally(dtype t) {
    st.cases = 1;
    worst.overflow_threshold = overflow_threshold(t);
  }
  // `where()` names the element (built only when the element may become the
  // worst or fails); `also`, `also_worst`: a part of the case (a gradient)
  // that tallies the element too; `overflow`: the element's own type's
  // overflow threshold where it is not the case's (0: the case's).
  template <class Where>
  void element(const Where& where, double expected, double got, double bound, campaign_stats* also = nullptr,
               comparison* also_worst = nullptr, double overflow = 0) {
    campaign_stats* both[2] = {&st, also};
    // The common case, decided as comparison::element decides it, without
    // building the element's name: finite values within a finite bound that
    // cannot displace the worst element (merge() keeps the worst on a tie).
    if (std::isfinite(expected) && std::isfinite(got) && std::isfinite(bound) && bound >= 0) {
      const double err = std::fabs(got - expected);
      const double ratio = err == 0 ? 0.0 : (bound == 0 ? std::numeric_limits<double>::infinity() : err / bound);
      const auto stays = [&](const comparison* w) { return !w || (!w->worst.where.empty() && ratio <= w->max_ratio); };
      if (err <= bound && stays(&worst) && stays(also_worst)) {
        for (campaign_stats* x : both)
          if (x) ++x->elements, ++x->histogram[ratio_bin(ratio)], x->max_ratio = std::max(x->max_ratio, ratio);
        ++worst.compared;
        if (also_worst) ++also_worst->compared;
        return;
      }
    }
    comparison e;
    e.overflow_threshold = overflow > 0 ? overflow : worst.overflow_threshold;
    e.element(where(), expected, got, bound);
    if (std::isnan(expected)) return;
    if (e.pass && e.compared == 0) {  // NaN or +inf bound: outside the bound's domain, nothing judged
      for (campaign_stats* x : both)
        if (x) ++x->unjudged_elements;
      return;
    }
    for (campaign_stats* x : both)
      if (x) {
        ++x->elements;
        ++x->histogram[e.pass ? ratio_bin(e.max_ratio) : campaign_edges.size() + 1];
        if (!e.pass) ++x->violations;
        x->max_ratio = std::max(x->max_ratio, e.max_ratio);
      }
    if (!e.pass) violated = true;
    worst.merge(e);
    if (also_worst) also_worst->merge(e);
  }
  void subject_failed(const std::string& why) {
    violated = true;
    ran = false;
    ++st.violations;
    worst.fail(why, failure_kind::subject_error);
  }
};

// Forward: O and LSE of the case (in its form) against the oracle of the dense problem.
void judge_forward(const subject& s, const attn_case& c, case_tally& t) {
  const auto out = s.attend(c);
  attn_case dense = c;  // the oracle answers the dense problem the form hands over
  dense.form = input_form{};
  const oracle_result ref = reference(dense, oracle_options_for(s, dense, oracle_precision::auto_tier));
  if (ref.tier == oracle_tier::fast_binary64) ++t.st.fast_tier_cases;
  if (!out.ok()) {
    t.subject_failed(out.status ? "subject returned " + out.error : "subject wrote outside its output: " + out.guard_report);
    return;
  }
  for (std::int64_t b = 0; b < c.b; ++b)
    for (std::int64_t i = 0; i < c.lq; ++i)
      for (std::int64_t h = 0; h < c.hq && c.row_in_problem(b, i); ++h) {
        for (std::int64_t e = 0; e < c.dv; ++e) {
          const auto x = ref.o_index(b, i, h, e);
          t.element([&] { return o_where(b, i, h, e); }, ref.o[x], out.o.at(b, i, h, e), ref.o_bound[x]);
        }
        if (!out.lse.empty())
          t.element([&] { return lse_where(b, h, i); }, ref.lse[ref.lse_index(b, h, i)],
                    out.lse[static_cast<std::size_t>((b * c.hq + h) * c.lq + i)], ref.lse_bound[ref.lse_index(b, h, i)]);
      }
}

// The law whose cases and verdict a backward campaign repeats at scale
// (with --variants, the variant law: its cases carry the declared variants).
constexpr const char* backward_law = "backward.gradients_within_bound_of_oracle";
constexpr const char* backward_variant_law = "backward.variant_gradients_within_bound_of_oracle";

// Backward: dQ, dK and dV against the backward oracle within the backward
// bound, the subject handed the oracle's O (storage type) and LSE (f32), as
// the law hands them; then the fudge-factor rules on the same gradients.
void judge_backward(const subject& s, const attn_case& c, case_tally& t, std::map<std::string, campaign_stats>& grads) {
  const tensor d_o = draw_grad_output(c, c.grad.value_or(grad_kind::normal));
  const backward_result r = reference_backward(c, d_o, backward_bound_for(s, c));
  const auto out = s.backward(c, handed_inputs(c, r.o, r.lse, d_o));
  if (!out.ok()) {
    t.subject_failed(out.status ? "subject returned " + out.error : "subject wrote outside its output: " + out.guard_report);
    return;
  }
  // Each gradient, dense row-major as the oracle's, judged element by element.
  struct one_gradient {
    const char* name;
    const tensor& got;
    const std::vector<double>& exact;
    const std::vector<double>& bound;
    const dims4& shape;
  };
  // d(sink) (Hq entries, f32 whatever the storage type) as a fourth, with sinks.
  tensor d_sinks = make_tensor(
      dtype::f32, dims4{std::max<std::int64_t>(1, static_cast<std::int64_t>(out.d_sinks.size())), 1, 1, 1}, layout_kind::bshd);
  for (std::size_t h = 0; h < out.d_sinks.size(); ++h) d_sinks.set(static_cast<std::int64_t>(h), 0, 0, 0, out.d_sinks[h]);
  const dims4 sink_shape{c.hq, 1, 1, 1};
  const one_gradient all[4] = {{"dQ", out.dq, r.dq, r.dq_bound, r.dq_shape},
                               {"dK", out.dk, r.dk, r.dk_bound, r.dk_shape},
                               {"dV", out.dv, r.dv, r.dv_bound, r.dv_shape},
                               {"dSink", d_sinks, r.d_sinks, r.d_sinks_bound, sink_shape}};
  gradient_values got;
  std::vector<double> got_sinks;
  std::vector<double>* got_of[4] = {&got.dq, &got.dk, &got.dv, &got_sinks};
  bool every_judged = true;
  for (int k = 0; k < (r.d_sinks.empty() ? 3 : 4); ++k) {
    const one_gradient& g = all[k];
    campaign_stats& gs = grads[g.name];
    comparison gw;
    gw.overflow_threshold = t.worst.overflow_threshold;
    gs.cases = 1;
    std::vector<double>& values = *got_of[k];
    values.reserve(g.exact.size());
    for (std::int64_t x0 = 0; x0 < g.shape[0]; ++x0)
      for (std::int64_t x1 = 0; x1 < g.shape[1]; ++x1)
        for (std::int64_t x2 = 0; x2 < g.shape[2]; ++x2)
          for (std::int64_t x3 = 0; x3 < g.shape[3]; ++x3) {
            const std::size_t x = backward_result::index(g.shape, x0, x1, x2, x3);
            const double v = g.got.at(x0, x1, x2, x3);
            values.push_back(v);
            every_judged = every_judged && std::isfinite(g.bound[x]);
            const auto where = [&] { return element_where(k == 3 ? sink_where(x0) : gradient_where(k, x0, x1, x2, x3)); };
            t.element(where, g.exact[x], v, g.bound[x], &gs, &gw, k == 3 ? overflow_threshold(dtype::f32) : 0.0);
          }
    gs.max_ratio_case = to_line(c) + "  " + gw.worst.describe();
    if (gs.violations) {
      gs.violating_cases = 1;
      gs.first_violation = to_line(c) + "  " + gw.failure;
      gs.violating.push_back({0, gs.first_violation.substr(0, 2000)});  // index set by the caller
    }
  }
  // The fudge-factor rules, on the cases whose every element the bound judges
  // (their same-precision reference covers contract 1.0 cases only).
  if (!every_judged || c.variants.any()) return;
  const gradient_values ref = same_precision_backward(c, d_o);
  t.st.fudge_cases = 1;
  t.st.bound_accepts = t.violated ? 0 : 1;
  t.st.pytorch_accepts = pytorch_rule_accepts(got.dq, ref.dq, r.dq) && pytorch_rule_accepts(got.dk, ref.dk, r.dk) &&
                         pytorch_rule_accepts(got.dv, ref.dv, r.dv);
  t.st.flash_accepts = flash_rule_accepts(got.dq, ref.dq, r.dq) && flash_rule_accepts(got.dk, ref.dk, r.dk) &&
                       flash_rule_accepts(got.dv, ref.dv, r.dv);
}

// Positions first..last-1 of this shard's cases (case k = shard_index +
// shard_count * position); case k is drawn with seed opt.seed + k and size
// k % 100, so its draw does not depend on the shard it runs in.
// The forward oracle is auto_tier: its fast binary64 tier where that tier's own error
// is at most 2^-20 of the bound on every element, mpfr50 otherwise
// (docs/oracle.md, "Tiers"); fast_tier_cases counts the cases the fast tier judged.
// The backward oracle is mpfr50 on every case.
slice_stats run_slice(const subject& s, const campaign_options& opt, std::int64_t first, std::int64_t last, std::int64_t* done) {
  slice_stats by;
  gen_options g;
  g.max_work = opt.max_work;
  g.variants = opt.variants;  // as the differential law's generator: capped at variant_max_work
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
    if (bw)
      judge_backward(s, c, t, grads);
    else
      judge_forward(s, c, t);
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
                        {c, bw ? bw->name.c_str() : "differential.output_within_bound_of_oracle",
                         gate_detail::absolute_spec(opt.subject), worst.failure.substr(0, 2000)});
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
  }
  return by;
}

std::string percent(std::int64_t n, std::int64_t of) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f%%", of ? 100.0 * static_cast<double>(n) / static_cast<double>(of) : 0.0);
  return buf;
}

}  // namespace

std::vector<std::string> features_of(const attn_case& c) {
  const score_variants& w = c.variants;
  std::vector<std::string> v;
  if (w.has_window()) v.push_back("window");
  if (w.has_chunk()) v.push_back("chunk");
  if (w.has_softcap()) v.push_back("softcap");
  if (w.has_sinks()) v.push_back("sinks");
  if (w.has_alibi()) v.push_back("alibi");
  if (w.has_bias()) v.push_back("bias");
  if (v.empty()) v.push_back("none");
  return v;
}

void campaign_stats::add(const campaign_stats& o) {
  if (o.cases == 0) return;
  const bool was_empty = cases == 0;
  cases += o.cases, elements += o.elements, violations += o.violations, violating_cases += o.violating_cases;
  unjudged_elements += o.unjudged_elements;
  fudge_cases += o.fudge_cases, bound_accepts += o.bound_accepts;
  pytorch_accepts += o.pytorch_accepts, flash_accepts += o.flash_accepts;
  for (std::size_t i = 0; i < histogram.size(); ++i) histogram[i] += o.histogram[i];
  // The case behind the largest ratio: the larger, ties the earlier case.
  if (was_empty || o.max_ratio > max_ratio || (o.max_ratio == max_ratio && o.max_ratio_index < max_ratio_index))
    max_ratio = o.max_ratio, max_ratio_case = o.max_ratio_case, max_ratio_index = o.max_ratio_index;
  fast_tier_cases += o.fast_tier_cases;
  for (std::size_t i = 0; i < o.worst.size(); ++i) keep_worst(*this, o.worst[i].first, o.worst_index[i], o.worst[i].second);
  // The kept violations: the lowest indices of both, in case order.
  std::vector<campaign_violation> both;
  std::merge(violating.begin(), violating.end(), o.violating.begin(), o.violating.end(), std::back_inserter(both),
             [](const campaign_violation& x, const campaign_violation& y) { return x.index < y.index; });
  if (both.size() > violations_kept) both.resize(violations_kept);
  const bool o_first = !o.violating.empty() && (violating.empty() || o.violating.front().index < violating.front().index);
  if (o_first) first_violation = o.first_violation;
  violating = std::move(both);
}

std::int64_t campaign_result::violations() const {
  std::int64_t n = 0;
  for (const auto& [t, s] : by_type) n += s.violations;
  return n;
}

std::int64_t campaign_result::cases() const {
  std::int64_t n = 0;
  for (const auto& [t, s] : by_type) n += s.cases;
  return n;
}

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

namespace {

// --backward: the elements by gradient, and the fudge-factor rules beside the
// bound on the same cases.
void print_backward_tables(const campaign_result& r, std::ostream& out) {
  out << "\nby gradient (every dtype):\n";
  char row[200];
  std::snprintf(row, sizeof row, "  %-8s %14s %12s %10s %12s  %s\n", "gradient", "elements", "unjudged", "violations",
                "max obs/bd", "case of the largest observed/bound");
  out << row;
  for (const char* g : campaign_gradients) {
    const auto it = r.by_gradient.find(g);
    if (std::string_view(g) == "dSink" && it == r.by_gradient.end()) continue;  // no case had sinks
    const campaign_stats empty;
    const campaign_stats& st = it == r.by_gradient.end() ? empty : it->second;
    std::snprintf(row, sizeof row, "  %-8s %14lld %12lld %10lld %12.4g  ", g, static_cast<long long>(st.elements),
                  static_cast<long long>(st.unjudged_elements), static_cast<long long>(st.violations), st.max_ratio);
    out << row << (st.cases ? st.max_ratio_case : std::string("-")) << "\n";
  }
  if (r.options.variants) {
    out << "\nno fudge-factor comparison with --variants: its same-precision reference covers contract 1.0 only\n";
    return;
  }
  out << "\nthe fudge-factor rules on the same cases (docs/campaign.md, \"Backward\"): of the cases whose every gradient\n"
         "element the bound judges, how many each accepts (a case is accepted when its dQ, dK and dV all are);\n"
         "PyTorch: |x - exact| <= 180 (atol + rtol |exact|) from a same-precision reference's error,\n"
         "FlashAttention: max |x - exact| <= 2 max |reference - exact|\n";
  std::snprintf(row, sizeof row, "  %-6s %12s %22s %22s %22s\n", "dtype", "cases", "bound accepts", "PyTorch 180x accepts",
                "FlashAttn 2x accepts");
  out << row;
  for (const auto& by_type : r.by_type) {
    const std::string& t = by_type.first;
    const campaign_stats& st = by_type.second;  // not a structured binding: the lambda captures it
    const auto cell = [&](std::int64_t n) {
      char c[40];
      std::snprintf(c, sizeof c, "%lld (%.2f%%)", static_cast<long long>(n),
                    st.fudge_cases ? 100.0 * static_cast<double>(n) / static_cast<double>(st.fudge_cases) : 0.0);
      return std::string(c);
    };
    std::snprintf(row, sizeof row, "  %-6s %12lld %22s %22s %22s\n", t.c_str(), static_cast<long long>(st.fudge_cases),
                  cell(st.bound_accepts).c_str(), cell(st.pytorch_accepts).c_str(), cell(st.flash_accepts).c_str());
    out << row;
  }
}

}  // namespace

void print_campaign(const campaign_result& r, std::ostream& out) {
  const campaign_options& opt = r.options;
  const std::int64_t total = r.cases();
  std::int64_t total_fast = 0;
  for (const auto& [t, st] : r.by_type) total_fast += st.fast_tier_cases;
  out << "attncheck campaign: subject " << r.subject_name << " (" << opt.subject << "), " << total << " cases";
  if (opt.shard_count > 1)
    out << " (shard " << opt.shard_index << "/" << opt.shard_count << " of " << opt.cases << ": cases k with k % "
        << opt.shard_count << " = " << opt.shard_index << ")";
  out << ", seed " << opt.seed;
  if (opt.variants) out << ", variants";
  if (!opt.form.empty()) out << ", form " << opt.form;
  if (opt.backward) out << ", backward";
  if (r.shards.size() > 1)
    out << ", " << r.shards.size() << " shards merged";
  else
    out << ", jobs " << opt.jobs;
  out << "\n";
  if (opt.backward)
    out << "oracle: the backward oracle (mpfr50) on every case, cases drawn as "
        << (opt.variants ? backward_variant_law : backward_law) << " draws them ("
        << (opt.variants ? "the declared variants, d(sink) judged as dSink" : "contract 1.0") << ", B*Hq*Lq*Lk*(D+Dv) <= 3000)\n";
  else
    out << "oracle: auto_tier: fast binary64 tier judged " << total_fast << " of " << total << " cases ("
        << percent(total_fast, total) << "), mpfr50 the rest\n";
  char rate[96];
  std::snprintf(rate, sizeof rate, "%.1f s%s, %.0f cases/s", r.seconds, r.shards.size() > 1 ? " (the shards' sum)" : "",
                r.seconds > 0 ? static_cast<double>(total) / r.seconds : 0.0);
  out << "time: " << rate << "\n";
  for (const auto& [t, st] : r.by_type) {
    out << "\n[" << t << "] " << st.cases << " cases, " << st.elements
        << (opt.backward ? (opt.variants ? " elements (dQ, dK, dV, dSink)" : " elements (dQ, dK, dV)") : " elements (O and LSE)")
        << " judged, violations " << st.violations << " in " << st.violating_cases << " cases; " << st.unjudged_elements
        << " elements outside the bound's domain (NaN or +inf bound: not judged)\n";
    if (!opt.backward)
      out << "  judged by the fast oracle tier: " << st.fast_tier_cases << " cases (" << percent(st.fast_tier_cases, st.cases)
          << ")\n";
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
  if (opt.backward) print_backward_tables(r, out);
  if (opt.variants) {
    // Per feature: the same cases by contract 1.1 variant (a case with
    // several counts under each); "none" is a case without one.
    out << "\nby feature (--variants; a case with several variants counts under each):\n";
    char head[160];
    std::snprintf(head, sizeof head, "  %-8s %10s %14s %10s %12s  %s\n", "feature", "cases", "elements", "violations",
                  "max obs/bd", "case of the largest observed/bound");
    out << head;
    for (const char* f : campaign_features) {
      const auto it = r.by_feature.find(f);
      const campaign_stats empty;
      const campaign_stats& st = it == r.by_feature.end() ? empty : it->second;
      char row[160];
      std::snprintf(row, sizeof row, "  %-8s %10lld %14lld %10lld %12.4g  ", f, static_cast<long long>(st.cases),
                    static_cast<long long>(st.elements), static_cast<long long>(st.violations), st.max_ratio);
      out << row << (st.cases ? st.max_ratio_case : std::string("-")) << "\n";
    }
    const auto none = r.by_feature.find("none");
    const std::int64_t with_variant = total - (none == r.by_feature.end() ? 0 : none->second.cases);
    out << "  cases with a variant: " << with_variant << " of " << total << " (" << percent(with_variant, total) << ")";
    if (with_variant == 0) out << "; the subject declares no variant (ABI v3 features) or the run drew none";
    out << "\n";
    for (const char* f : campaign_features)
      if (const auto it = r.by_feature.find(f); it != r.by_feature.end() && !it->second.first_violation.empty())
        out << "  first violation with " << f << ": " << it->second.first_violation << "\n";
  }
  out << "\ncampaign: " << r.violations() << " violations" << (r.violations() ? "  -> FAIL" : "  -> PASS") << "\n";
}

namespace {

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
                                {"form", o.form.empty() ? std::string("dense") : o.form},
                                {"backward", o.backward}}},
                              {"jobs", o.jobs},
                              {"cases", total},
                              {"violations", r.violations()},
                              {"seconds", r.seconds},
                              {"cases_per_second", r.seconds > 0 ? static_cast<double>(total) / r.seconds : 0.0},
                              {"shards", shards},
                              {"histogram_edges", campaign_edges},
                              {"histogram_bins", bin_labels()},
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
  for (int i = 0; i < ao.shard_count; ++i) want += (ao.cases - i + ao.shard_count - 1) / ao.shard_count;
  if (have != want)
    throw input_error("FILE", "the shards hold " + std::to_string(have) + " cases, the run has " + std::to_string(want));
  return m;
}

}  // namespace attncheck
