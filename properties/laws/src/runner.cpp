#include "attncheck/runner.hpp"

#include "attncheck/features.hpp"

#include <rapidcheck.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <unordered_map>
#include <vector>

namespace rc::detail {
// Exported by librapidcheck (src/detail/ReproduceParsing.h, not installed by Debian).
std::string reproduceMapToString(const std::unordered_map<std::string, Reproduce>& reproduceMap);
std::unordered_map<std::string, Reproduce> stringToReproduceMap(const std::string& str);
}  // namespace rc::detail

namespace attncheck {

namespace {

// A decline under --strict-declines: a failure of the law, as the subject's.
law_outcome strictly_declined(const attn_case& c, const case_declined& d) {
  law_outcome o;
  o.fail("the subject declined " + to_line(c) + " (--strict-declines): " + d.reason, failure_kind::subject_error);
  return o;
}

// True when every decline was the host's, for a case outside the declared limits.
bool only_limits(const std::map<std::string, std::int64_t>& declines) {
  for (const auto& [why, n] : declines)
    if (!is_limit_decline(why)) return false;
  return !declines.empty();
}

}  // namespace

law_outcome replay(const law& l, const subject& s, const attn_case& c, bool strict_declines) {
  try {
    // The outcome of a replay is reported: its worst elements carry their position (element_where::at).
    return l.check(s, c);
  } catch (const case_declined& d) {
    if (d.by_limit) return law_outcome::skip("the case is outside the subject's declared limits: " + d.reason);
    return strict_declines ? strictly_declined(c, d) : law_outcome::skip("the subject declined this case: " + d.reason);
  } catch (const std::exception& e) {
    law_outcome o;
    o.fail(std::string("harness error: ") + e.what(), failure_kind::harness);
    return o;
  }
}

int law_cases(const law& l, int cases) {
  return std::max(1, static_cast<int>(std::ceil(static_cast<double>(cases) * l.case_share)));
}

law_report run_law(const law& l, const subject& s, const run_options& opt) {
  law_report r;
  r.law = l.name;
  const auto start = std::chrono::steady_clock::now();
  if (auto why = l.applicable(s); !why.empty()) {
    r.v = verdict::skip;
    r.skip_reason = why;
    return r;
  }
  bool failed_once = false;
  r.min_judged = l.min_judged;
  if (opt.on_phase) opt.on_phase(law_phase::checking);
  std::map<std::string, int> why_counts;
  gen_options gopt = opt.gen;
  gopt.budget = std::make_shared<work_budget>();
  gopt.budget->limit = gopt.law_work;
  gopt.variants = l.variants;
  gopt.fp8 = l.fp8;
  if (l.max_work > 0)
    gopt.max_work = std::min(gopt.max_work, l.max_work), gopt.small_work = std::min(gopt.small_work, l.max_work);
  const auto gen = any_case(s, gopt);
  auto property = [&] {
    attn_case c = *gen;
    const std::int64_t drawn = case_work(c);  // law::charged_as_drawn
    if (l.charged_as_drawn) {
      const attn_case as_drawn = c;  // a header: materialize() draws the tensors below
      l.prepare(c, s);
      if (case_work(c) > std::max(drawn, gopt.max_work)) c = as_drawn;
    } else {
      l.prepare(c, s);
    }
    law_outcome out;
    try {
      materialize(c);
      if (opt.on_case) opt.on_case(c);
      out = l.check(s, c);
      // Every row it compared is one the subject declares unspecified (an empty row):
      // outside what the subject promises, like a case outside its declared limits.
      if (out.v != verdict::fail && out.compared == 0 && out.excused > 0)
        throw case_declined(std::string(limit_key_prefix) + "conventions: every row the law compares is an unspecified empty row",
                            true);
    } catch (const case_declined& d) {
      if (!opt.strict_declines || d.by_limit) {
        // Counted and replaced: never a failure, and never half a relation
        // judged. A case outside the declared limits is no decline of the
        // subject's, so --strict-declines counts it too. Charged to the law's
        // work like a case run, so a subject that declines much cannot
        // stretch the law past its budget.
        if (!failed_once) {
          ++r.declines[d.key()];
          gopt.budget->spent += std::max<std::int64_t>(0, case_work(c) - gopt.small_work);
          if (opt.on_progress) opt.on_progress(r);
        }
        RC_DISCARD(d.what());
      }
      out = strictly_declined(c, d);
    } catch (const std::exception& e) {
      out.fail(std::string("harness error on ") + to_line(c) + ": " + e.what(), failure_kind::harness);
    }
    if (!failed_once) {
      ++r.cases;
      r.stats.add(c, s);
      for (const contract_feature& f : contract_features())
        if (f.kind == feature_kind::variant && (out.variants_judged & f.bit)) ++r.stats.counts["judged " + f.name];
      for (std::size_t k = 0; k < std::size(fp8_inputs); ++k)
        if (out.descales_judged & (1u << k)) ++r.stats.counts[std::string("judged descale ") + fp8_inputs[k].name];
      const std::int64_t charged = l.charged_as_drawn ? std::min(drawn, case_work(c)) : case_work(c);
      gopt.budget->spent += std::max<std::int64_t>(0, charged - gopt.small_work);
      ++r.ratio_histogram[ratio_bin(out.max_ratio)];
      r.shares[static_cast<std::size_t>(c.type) % r.shares.size()].add(out.shares());
      if (out.prob() != prob_verdict::na) {
        ++r.prob_cases;
        r.prob_max_ratio = std::max(r.prob_max_ratio, out.prob_max_ratio);
        if (r.prob != prob_verdict::fail) r.prob = out.prob();
        if (out.prob() == prob_verdict::fail && r.prob_failure.empty())
          r.prob_failure = out.prob_failure, r.prob_failure_case = to_line(c);
      }
      if (out.judged())
        ++r.judged;
      else
        ++why_counts[out.vacuous.empty() ? std::string("compared no element") : out.vacuous];
      if (out.max_ratio > r.max_ratio || r.max_ratio_case.empty()) {
        if (out.max_ratio >= r.max_ratio) {
          r.max_ratio = out.max_ratio;
          r.max_ratio_case = to_line(c);
        }
      }
    } else {
      ++r.shrink_steps;
    }
    if (out.v == verdict::fail) {
      if (!failed_once && opt.on_phase) opt.on_phase(law_phase::shrinking);
      failed_once = true;
      gopt.budget->frozen = true;
      // The last failing call is the last accepted shrink: the minimal case.
      r.counterexample = c;
      r.failure = out;
      if (opt.on_progress) opt.on_progress(r);
      RC_FAIL(out.message);
    }
    if (opt.on_progress) opt.on_progress(r);
  };
  rc::detail::TestParams params;
  params.seed = opt.seed;
  params.maxSuccess = law_cases(l, opt.cases);
  params.maxSize = opt.max_size;
  params.maxDiscardRatio = declines_per_case;  // the property discards only declined cases
  rc::detail::TestMetadata meta;
  meta.id = l.name;
  meta.description = l.summary;
  std::unordered_map<std::string, rc::detail::Reproduce> repro;
  if (!opt.reproduce.empty()) repro = rc::detail::stringToReproduceMap(opt.reproduce);
  struct quiet_listener : rc::detail::TestListener {
    void onTestCaseFinished(const rc::detail::CaseDescription&) override {}
    void onShrinkTried(const rc::detail::CaseDescription&, bool) override {}
    void onTestFinished(const rc::detail::TestMetadata&, const rc::detail::TestResult&) override {}
  } listener;
  const auto result = rc::detail::checkTestable(property, meta, params, listener, repro);
  if (result.template is<rc::detail::FailureResult>()) {
    const auto& f = result.template get<rc::detail::FailureResult>();
    r.v = verdict::fail;
    std::unordered_map<std::string, rc::detail::Reproduce> m{{l.name, f.reproduce}};
    r.reproduce = rc::detail::reproduceMapToString(m);
    if (r.counterexample) {
      // Re-run the minimal case once so the report reflects exactly it; the
      // elements it compares are kept for the heat map of the report.
      element_log log;
      r.failure = replay(l, s, *r.counterexample, opt.strict_declines);
      r.heat = heat_map_of(log, r.failure.worst);
      if (r.failure.v != verdict::fail) r.failure.fail("flaky: the shrunk case passed on replay (" + f.description + ")");
      r.max_ratio = std::max(r.max_ratio, r.failure.max_ratio);
    }
  } else if (result.template is<rc::detail::GaveUpResult>() && r.cases == 0 && only_limits(r.declines)) {
    // Every draw fell outside the subject's declared limits (a GQA law on a
    // subject without GQA): the law's domain is not the subject's.
    r.v = verdict::skip;
    r.skip_reason = "every case it draws is outside the subject's declared limits: " + declines_text(r.declines);
  } else if (result.template is<rc::detail::GaveUpResult>() && !r.declines.empty()) {
    // The subject declined more than declines_per_case draws per case: what
    // it did take is judged, but not enough of the law's domain to pass.
    r.v = verdict::unjudged;
    r.unjudged_why = "the subject declined too many draws (more than " + std::to_string(declines_per_case) + " per case; " +
                     std::to_string(r.cases) + " cases run): " + declines_text(r.declines);
  } else if (result.template is<rc::detail::GaveUpResult>()) {
    r.v = verdict::fail;
    r.failure.fail("generator gave up: " + result.template get<rc::detail::GaveUpResult>().description, failure_kind::harness);
  } else if (result.template is<rc::detail::Error>()) {
    r.v = verdict::fail;
    r.failure.fail("rapidcheck error: " + result.template get<rc::detail::Error>().description, failure_kind::harness);
  }
  int most = 0;
  for (const auto& [why, n] : why_counts)
    if (n > most) most = n, r.unjudged_why = why;
  if (r.v == verdict::pass && r.cases > 0 && r.judged < l.min_judged * r.cases) {
    r.v = verdict::unjudged;
    if (!r.declines.empty()) r.unjudged_why += "; besides, " + declines_text(r.declines);
  }
  // Non-vacuity per variant: a variant carried by enough cases must have been
  // judged (its effect proved past the bound) in at least variant_floor of them.
  if (l.variant_floor > 0 && r.v == verdict::pass)
    for (const contract_feature& f : contract_features()) {
      if (f.kind != feature_kind::variant) continue;
      const std::string& what = f.name;
      const auto count = [&r](const std::string& k) { return r.stats.counts.count(k) ? r.stats.counts.at(k) : 0; };
      const std::int64_t with = count(std::string("variant ") + what), judged = count(std::string("judged ") + what);
      if (with >= min_variant_cases && static_cast<double>(judged) < l.variant_floor * static_cast<double>(with)) {
        r.v = verdict::unjudged;
        r.unjudged_why = std::string("variant ") + what + " judged in " + std::to_string(judged) + " of the " +
                         std::to_string(with) + " cases carrying it (floor " +
                         std::to_string(static_cast<int>(100 * l.variant_floor)) + "%)";
        break;
      }
    }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

std::string declines_text(const std::map<std::string, std::int64_t>& declines) {
  std::vector<std::pair<std::int64_t, std::string>> by;
  std::int64_t n = 0;
  for (const auto& [why, k] : declines) by.emplace_back(-k, why), n += k;
  if (n == 0) return {};
  std::sort(by.begin(), by.end());
  std::string t = std::to_string(n) + " declined: ";
  for (std::size_t i = 0; i < by.size(); ++i) t += (i ? ", " : "") + by[i].second + " (" + std::to_string(-by[i].first) + ")";
  return t;
}

std::string replaced_declines_note(const law_report& r) {
  if (r.declines.empty() || r.v == verdict::unjudged) return {};
  return declines_text(r.declines) + " (replaced by other draws)";
}

failure_report failure_report_of(const law_report& r, const subject& s, const std::string& saved_file) {
  return failure_report_of(r, s.name(), s.spec(), saved_file);
}

failure_report failure_report_of(const law_report& r, const std::string& subject_name, const std::string& subject_spec,
                                 const std::string& saved_file) {
  failure_report f;
  f.kind = r.failure.kind;
  if (f.kind == failure_kind::timeout) f.verdict = "TIMEOUT";  // the gate ran out of time: no verdict on the subject
  f.law = r.law;
  f.subject_name = subject_name, f.subject_spec = subject_spec;
  if (r.counterexample) f.case_line = to_line(*r.counterexample);
  f.cases = std::to_string(r.cases) + " run, " + std::to_string(r.shrink_steps) + " shrink steps";
  f.message = r.failure.message;
  if (!r.failure.worst.where.empty()) f.worst = r.failure.worst.describe();
  if (!saved_file.empty()) {
    f.saved_file = saved_file;
    f.replay = replay_command(saved_file, subject_spec);
  }
  f.reproduce = r.reproduce;
  return f;
}

std::string failure_screen(const law_report& r, const subject& s, const std::string& saved_file) {
  return print_failure(failure_report_of(r, s, saved_file));
}

run_options run_options_of(const run_config& c) {
  run_options ro;
  ro.cases = c.cases;
  ro.seed = c.seed;
  ro.max_size = c.max_size;
  ro.gen.max_work = c.max_work;
  ro.gen.small_work = c.small_work;
  ro.gen.law_work = c.law_work;
  ro.reproduce = c.reproduce;
  ro.strict_declines = c.strict_declines;
  return ro;
}

}  // namespace attncheck
