// The console: the gate's header, failure screens, the law table and the
// case distribution, rendered from a gate_result.
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <ostream>

#include "attncheck/features.hpp"
#include "attncheck/report.hpp"

namespace attncheck {

using gate_detail::number_text;

namespace {

std::string judged_text(const law_report& r) {
  if (r.v == verdict::skip) return "-";
  return std::to_string(r.judged) + "/" + std::to_string(r.cases);
}

// The differential law compares every element with the oracle: its screen
// says most about a bug that breaks several laws.
constexpr const char* most_informative_law = "differential.output_within_bound_of_oracle";

// At most n characters of a one-line text, cut at a space, never inside a number.
std::string clipped(const std::string& text, std::size_t n) {
  std::string t = text.substr(0, text.find('\n'));
  if (t.size() <= n) return t;
  std::size_t cut = t.rfind(' ', n);
  if (cut == std::string::npos || cut < n / 2) cut = n;
  return t.substr(0, cut) + " ...";
}

// The table's "max obs/bd" cell: the worst ratio, or for a failure that no
// ratio above 1 explains (bits that differ, a crash, an error) what failed.
std::string ratio_cell(const law_report& r) {
  if (r.v != verdict::fail || r.max_ratio > 1) return number_text(r.max_ratio, "%.3g");
  if (r.failure.kind != failure_kind::law) return failure_kind_name(r.failure.kind);
  if (r.failure.message.find("bits differ") != std::string::npos) return "bits";
  return r.failure.message.find("NaN") != std::string::npos ? "NaN" : "see why";
}

}  // namespace

void print_failures(const gate_result& g, std::ostream& out, const console_options& how) {
  // A timeout is the gate's problem, not a bug of the subject: its own full screen, never grouped.
  std::vector<std::size_t> failing;
  for (std::size_t k = 0; k < g.reports.size(); ++k)
    if (g.reports[k].v == verdict::fail && !timed_out(g.reports[k])) failing.push_back(k);
  // compact: the screen under a summary, which the header and the replay
  // command already frame: no subject line (the header names it), no saved
  // line (the replay command names the file), no worst line that repeats why.
  const auto screen = [&](std::size_t k, bool compact) {
    failure_report f = failure_report_of(g.reports[k], g.subject_name, g.subject_spec, g.saved_at[k]);
    if (!how.verbose) f.reproduce.clear();  // in the saved file, the JSON and --verbose
    if (compact) {
      f.subject_name.clear(), f.subject_spec.clear();
      if (!f.replay.empty()) f.saved_file.clear();
      if (!f.worst.empty() && f.message.find(f.worst) != std::string::npos) f.worst.clear();
      if (!f.case_line.empty()) f.case_line += " (" + f.cases + ")", f.cases.clear();
    }
    out << print_failure(f);
  };
  for (std::size_t k = 0; k < g.reports.size(); ++k)
    if (timed_out(g.reports[k])) screen(k, false);
  if (how.verbose || failing.size() <= 1) {
    for (std::size_t k : failing) screen(k, false);
    return;
  }
  std::size_t lead = failing.front();
  for (std::size_t k : failing)
    if (g.reports[k].law == most_informative_law) lead = k;
  const auto case_of = [&](std::size_t k) {
    return g.reports[k].counterexample ? to_line(*g.reports[k].counterexample) : std::string();
  };
  bool one_case = !case_of(lead).empty();
  for (std::size_t k : failing) one_case = one_case && case_of(k) == case_of(lead);
  std::size_t saved = 0;
  for (std::size_t k : failing) saved += !g.saved_at[k].empty();
  out << failing.size() << " laws fail" << (one_case ? " on " + case_of(lead) : " (each on its own shrunk case)");
  if (saved) out << ", " << saved << " case files saved under " << g.run.out_dir;
  out << "; the screen of " << g.reports[lead].law << ", then one line per other law (--verbose: every screen)\n";
  screen(lead, true);
  for (std::size_t k : failing) {
    if (k == lead) continue;
    const law_report& r = g.reports[k];
    const std::string where = one_case || case_of(k).empty() ? "" : " on " + case_of(k);
    out << "  also FAIL " << r.law << where << ": " << clipped(r.failure.message, 60) << "\n";
  }
}

void print_gate(const gate_result& g, std::ostream& out, const console_options& how) {
  const run_config& opt = g.run;
  out << "attncheck gate: subject " << g.subject_name << " (" << g.subject_spec << "), seed " << opt.seed << ", " << opt.cases
      << " cases per law" << (opt.strict ? ", strict" : "") << (opt.strict_declines ? ", strict declines" : "") << "\n";
  if (const std::string run = run_string(opt); !run.empty()) out << "  run: " << run << "\n";
  print_declaration(g, out);
  // The probabilistic bound's terms, where a law reached a probabilistic verdict (or --verbose).
  bool prob_used = how.verbose;
  for (const auto& r : g.reports) prob_used = prob_used || r.prob != prob_verdict::na;
  if (prob_used)
    out << "  " << probabilistic_statement()
        << (opt.prob_fails_gate ? "; a FAIL(prob) fails the gate (--prob-fails-gate)\n"
                                : "; reported, never gating (--prob-fails-gate to gate on it)\n");
  if (opt.isolate)
    out << "  watchdog: a call into the subject is hung after max(" << number_text(opt.watchdog.floor_s) << " s, "
        << number_text(opt.watchdog.factor) << " x its expected time); each law has " << number_text(opt.law_timeout)
        << " s (--watchdog-floor, --watchdog-factor, --law-timeout)\n";
  print_failures(g, out, how);
  // The table.
  std::size_t w = 4;
  for (const auto& r : g.reports) w = std::max(w, r.law.size());
  out << "\n"
      << std::left << std::setw(static_cast<int>(w)) << "law"
      << "  " << std::right << std::setw(11) << "judged/run"
      << "  " << std::setw(10) << "max obs/bd"
      << "  " << std::setw(8) << "verdict"
      << "  " << std::setw(7) << "seconds";
  out << "  " << std::setw(10) << "prob"
      << "\n";
  int passed = 0, failed = 0, skipped = 0, unjudged = 0, timeouts = 0;
  std::int64_t declined = 0, outside_limits = 0;  // cases the subject declined, and the host for it (its limits), over every law
  // Laws of a feature the subject does not declare (the contract 1.1
  // variants, backward) fold into one line under the table, by group.
  std::vector<std::string> undeclared;
  int n_undeclared = 0;
  for (const auto& r : g.reports) {
    passed += r.v == verdict::pass, failed += r.v == verdict::fail && !timed_out(r), skipped += r.v == verdict::skip;
    timeouts += timed_out(r);
    unjudged += r.v == verdict::unjudged;
    if (r.v == verdict::skip && r.skip_reason.rfind("subject does not declare", 0) == 0) {
      const std::string group = r.law.substr(0, r.law.find('.')) + ".*";
      if (std::find(undeclared.begin(), undeclared.end(), group) == undeclared.end()) undeclared.push_back(group);
      ++n_undeclared;
      continue;
    }
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.2f", r.seconds);
    out << std::left << std::setw(static_cast<int>(w)) << r.law << "  " << std::right << std::setw(11) << judged_text(r) << "  "
        << std::setw(10) << ratio_cell(r) << "  " << std::setw(8) << (timed_out(r) ? "TIMEOUT" : verdict_name(r.v)) << "  "
        << std::setw(7) << secs;
    out << "  " << std::setw(10) << prob_verdict_name(r.prob);
    if (r.v == verdict::skip) out << "  (" << r.skip_reason << ")";
    out << "\n";
    if (r.prob == prob_verdict::fail)
      out << "    FAIL(prob): " << r.prob_failure.substr(0, 400) << "\n      on " << r.prob_failure_case << "\n";
    if (r.v == verdict::unjudged && r.judged < r.min_judged * r.cases)
      out << "    judged " << r.judged << " of " << r.cases << " cases, below the law's floor of "
          << number_text(100 * r.min_judged, "%.0f") << "%; most common reason: " << r.unjudged_why << "\n";
    else if (r.v == verdict::unjudged)  // a variant's judged share fell below its floor, or the subject declined too much
      out << "    " << r.unjudged_why << "\n";
    if (const std::string note = replaced_declines_note(r); !note.empty()) out << "    " << note << "\n";
    for (const auto& [why, n] : r.declines) (is_limit_decline(why) ? outside_limits : declined) += n;
  }
  if (n_undeclared) {
    out << "skipped, a feature the subject does not declare: ";
    for (std::size_t k = 0; k < undeclared.size(); ++k) out << (k ? ", " : "") << undeclared[k];
    out << " (" << n_undeclared << " laws)\n";
  }
  char total[64];
  std::snprintf(total, sizeof total, "%.1f", g.seconds);
  out << "\ngate: " << passed << " passed, " << failed << " failed, ";
  if (timeouts) out << timeouts << " timed out, ";
  out << unjudged << " unjudged, " << skipped << " skipped";
  if (declined) out << ", " << declined << " cases declined by the subject" << (opt.strict_declines ? "" : " (replaced)");
  if (outside_limits) out << ", " << outside_limits << " cases outside its declared limits (replaced)";
  out << " in " << total << " s";
  const int prob_failed = g.prob_failed();
  if (prob_failed)
    out << ", " << prob_failed << " FAIL(prob)" << (opt.prob_fails_gate ? "" : " (probabilistic: reported, not gating)");
  const bool fails = failed || unjudged || (opt.prob_fails_gate && prob_failed);
  // A failure wins over a timeout; a timeout never passes.
  out << (fails ? "  -> FAIL" : timeouts ? "  -> TIMEOUT (a law ran out of time: a gate problem, exit 4)" : "  -> PASS") << "\n";
  if (!opt.stats) print_judged_shares(g, false, out);  // --stats prints them per law too
  if (opt.stats) print_stats(g, out);
}

void print_judged_shares(const gate_result& g, bool per_law, std::ostream& out) {
  const auto line = [&out](const std::string& who, std::size_t t, const judged_shares& sh) {
    if (sh.total() == 0) return;
    const auto pct = [&sh](std::int64_t x) {
      return number_text(100.0 * static_cast<double>(x) / static_cast<double>(sh.total()), "%.1f");
    };
    out << "  " << std::left << std::setw(48) << who << std::right << std::setw(5) << name(static_cast<dtype>(t)) << "  sound "
        << std::setw(5) << pct(sh.sound) << "%  prob " << std::setw(5) << pct(sh.prob) << "%  unjudged " << std::setw(5)
        << pct(sh.unjudged) << "%  of " << sh.total() << " (finite sound bound " << pct(sh.sound_finite) << "%)\n";
  };
  std::array<judged_shares, 3> all{};
  for (const auto& r : g.reports)
    for (std::size_t t = 0; t < all.size(); ++t) all[t].add(r.shares[t]);
  out << "\nelements judged, by bound (docs/bound.md: sound where useful, else prob):\n";
  for (std::size_t t = 0; t < all.size(); ++t) line("all laws", t, all[t]);
  if (per_law)
    for (const auto& r : g.reports)
      for (std::size_t t = 0; t < all.size(); ++t) line(r.law, t, r.shares[t]);
}

void print_stats(const gate_result& g, std::ostream& out) {
  print_judged_shares(g, true, out);
  // The shape floors are the forward laws' case space: the backward group
  // cuts its cases to a small work cap, so its cases are counted apart.
  case_stats all;
  std::int64_t backward_cases = 0;
  for (const auto& r : g.reports) {
    const law* l = find_law(r.law);
    if (l && l->backward)
      backward_cases += r.stats.n;
    else
      all.merge(r.stats);
  }
  out << "\ndistribution of the " << all.n << " cases run (all laws";
  if (backward_cases) out << " but the backward group's " << backward_cases << ", cut to its small work cap";
  out << "; docs/distribution.md):\n";
  // The contract 1.1 variants: over the cases of the laws that draw them,
  // each variant and each pair the subject declares.
  case_stats with_variants;
  for (const auto& r : g.reports)
    if (const law* l = find_law(r.law); l && l->variants) with_variants.merge(r.stats);
  const auto declared_variants = [&g](const std::string& key) {
    // "variant NAME" or "variants NAME+NAME": declared when each named variant is.
    std::string names = key.substr(key.find(' ') + 1);
    for (std::size_t at = 0; at <= names.size();) {
      const std::size_t end = std::min(names.find('+', at), names.size());
      const contract_feature* f = find_feature(names.substr(at, end - at));
      if (!f || !(g.declared.features_v3 & f->bit)) return false;
      at = end + 1;
    }
    return true;
  };
  bool variant_header = false;
  for (const auto& f : distribution_floors()) {
    if (f.variant && !declared_variants(f.key)) continue;
    if (f.variant && !variant_header) {
      out << "contract 1.1 variants, over the " << with_variants.n << " cases of the laws that draw them:\n";
      variant_header = true;
    }
    const double share = (f.variant ? with_variants : all).share(f.key);
    const bool low = share < f.floor;
    out << "  " << std::left << std::setw(20) << f.key << std::right << std::setw(7) << number_text(100 * share, "%.1f")
        << "%   floor " << std::setw(4) << number_text(100 * f.floor, f.floor < 0.01 ? "%.1f" : "%.0f") << "%"
        << (f.needs_all ? " (subjects taking every dtype and mask)" : "") << (low ? "   BELOW" : "") << "   " << f.what << "\n";
  }
  // Contract 1.2's input forms: over the paged and the ragged cases (only the
  // laws that draw a form hand one out), for a subject declaring the form.
  // One line of a share over n cases (the forms', fp8's) against its floor.
  const auto floor_line = [&](const form_floor& f, std::int64_t n) {
    const auto k = all.counts.count(f.key) ? all.counts.at(f.key) : 0;
    const double share = n ? static_cast<double>(k) / static_cast<double>(n) : 0;
    out << "  " << std::left << std::setw(28) << f.key << std::right << std::setw(7) << number_text(100 * share, "%.1f")
        << "%   floor " << std::setw(4) << number_text(100 * f.floor, f.floor < 0.01 ? "%.1f" : "%.0f") << "%"
        << (share < f.floor ? "   BELOW" : "") << "   " << f.what << "\n";
  };
  for (const contract_feature& x : contract_features()) {
    if (x.kind != feature_kind::input_form || !(g.declared.features_v3 & x.bit)) continue;
    const char* form = x.name.c_str();
    const auto n = all.counts.count(form) ? all.counts.at(form) : 0;
    out << "contract 1.2 " << form << " form, over the " << n << " " << form << " cases of the laws that draw it:\n";
    for (const auto& f : form_floors())
      if (std::string(f.over) == form) floor_line(f, n);
  }
  // Contract 1.3's fp8 inputs: over the fp8 cases of the laws that draw them,
  // for a subject declaring them, when such a law ran; a type's row only for a type it takes.
  const auto fp8_cases = all.counts.count("fp8") ? all.counts.at("fp8") : 0;
  if ((g.declared.features_v4 & ATTNCHECK_FEATURE4_FP8) && fp8_cases > 0) {  // none when no law that draws fp8 ran
    const auto n = fp8_cases;
    out << "contract 1.3 fp8 inputs, over the " << n << " fp8 cases of the laws that draw them:\n";
    for (const auto& f : form_floors()) {
      if (std::string(f.over) != "fp8") continue;
      const std::string key = f.key;
      if ((key == "fp8 e4m3" && !(g.dtypes & (1u << ATTNCHECK_E4M3))) ||
          (key == "fp8 e5m2" && !(g.dtypes & (1u << ATTNCHECK_E5M2))))
        continue;
      floor_line(f, n);
    }
    // Non-vacuity per descale (docs/spec.md "fp8 storage"): of the cases whose
    // input carries one, those where reading it with a descale of 1 moves the oracle past the bounds.
    for (const auto& r : g.reports) {
      const auto count = [&r](const std::string& k) { return r.stats.counts.count(k) ? r.stats.counts.at(k) : 0; };
      if (r.law != "differential.output_within_bound_of_oracle" || count("fp8") == 0) continue;  // the law that counts them
      out << "descales judged by " << r.law << " (a descale of 1 moves the oracle's output past the bound):\n";
      for (const char* input : {"Q", "K", "V"}) {
        const std::int64_t with = count(std::string("descale ") + input), judged = count(std::string("judged descale ") + input);
        const double share = with ? static_cast<double>(judged) / static_cast<double>(with) : 0;
        out << "  " << input << "'s descale" << std::setw(7) << number_text(100 * share, "%.1f") << "%   " << judged << " of "
            << with << " cases carrying one\n";
      }
    }
  }
  // Non-vacuity per variant (docs/spec.md "Variants"): of the cases carrying
  // a variant, those whose oracle proves switching it off moves the output.
  for (const auto& r : g.reports) {
    const law* l = find_law(r.law);
    if (!l || l->variant_floor <= 0 || r.v == verdict::skip) continue;
    out << "variants judged by " << r.law << " (switching one off moves the oracle's output past the bound):\n";
    for (const contract_feature& x : contract_features()) {
      if (x.kind != feature_kind::variant) continue;
      const char* what = x.name.c_str();
      const auto count = [&r](const std::string& k) { return r.stats.counts.count(k) ? r.stats.counts.at(k) : 0; };
      const std::int64_t with = count(std::string("variant ") + what), judged = count(std::string("judged ") + what);
      const double share = with ? static_cast<double>(judged) / static_cast<double>(with) : 0;
      out << "  " << std::left << std::setw(20) << what << std::right << std::setw(7) << number_text(100 * share, "%.1f")
          << "%   floor " << std::setw(4) << number_text(100 * l->variant_floor, "%.0f") << "%   " << judged << " of " << with
          << " cases carrying it" << (with >= min_variant_cases && share < l->variant_floor ? "   BELOW" : "") << "\n";
    }
  }
}

// The groups of the laws that draw the contract 1.1 variants, in gate order.
static std::string variant_law_groups() {
  std::string text;
  std::string last;
  for (const auto& l : all_laws()) {
    if (!l.variants) continue;
    const std::string group = l.name.substr(0, l.name.find('.'));
    if (group == last) continue;
    text += (text.empty() ? "" : ", ") + group;
    last = group;
  }
  return text;
}

void print_declaration(const gate_result& g, std::ostream& out) {
  const declared_numbers& d = g.declared;
  out << "  declared: ABI v" << g.abi << ", u = 2^" << number_text(std::log2(d.u), "%.4g")
      << (d.profile.empty() ? "" : " (profile: " + d.profile + ")") << ", exp " << number_text(d.exp_ulps) << " ulps, "
      << (d.conventions.empty() ? "" : d.conventions + ", ") << (d.limits.empty() ? "" : "limits: " + d.limits + ", ")
      << "key blocks nb";
  for (const auto& [lk, nb] : d.nb_at) out << " " << nb << " at Lk=" << lk << (lk == d.nb_at.back().first ? "" : ",");
  const auto& h = g.hints;
  out << "; size hints" << (g.default_hints ? " (none declared; common production sizes)" : "") << ":";
  if (h.q_tile) out << " q_tile " << h.q_tile;
  if (h.k_tile) out << " k_tile " << h.k_tile;
  if (h.split_keys) out << " split_keys " << h.split_keys;
  std::string lengths, dims;
  for (int i = 0; i < ATTNCHECK_SIZE_HINT_SLOTS && h.lengths[i]; ++i)
    lengths += (lengths.empty() ? "" : ",") + std::to_string(h.lengths[i]);
  for (int i = 0; i < ATTNCHECK_SIZE_HINT_SLOTS && h.head_dims[i]; ++i)
    dims += (dims.empty() ? "" : ",") + std::to_string(h.head_dims[i]);
  if (!lengths.empty()) out << " lengths " << lengths;
  if (!dims.empty()) out << " head dims " << dims;
  out << "\n";
  // ABI v3: the variants the laws hand out, the input forms, and what this version declares but does not judge yet.
  std::string on, off, form;
  const auto add = [](std::string& list, const std::string& what) { list += (list.empty() ? "" : ", ") + what; };
  for (const contract_feature& f : contract_features()) {
    if (f.abi_word != 3 || !(d.features_v3 & f.bit)) continue;
    if (!f.judged)
      add(off, f.label);
    else if (f.kind == feature_kind::variant)
      add(on, f.label);
    else if (f.kind == feature_kind::input_form)
      add(form, f.label);
  }
  if (!on.empty())
    out << "  variants (contract 1.1): " << on
        << ((d.features_v3 & ATTNCHECK_FEATURE3_SOFTCAP) ? ", tanh " + number_text(d.tanh_ulps) + " ulps" : std::string())
        << "; drawn by the laws that take variants (" << variant_law_groups() << ")\n";
  if (d.features_v3 & ATTNCHECK_FEATURE3_BACKWARD)
    out << "  backward: dQ, dK, dV judged by the backward laws (backward.*) on contract 1.0 cases"
        << ((d.features_v3 & ATTNCHECK_FEATURE3_BACKWARD_VARIANTS) && !on.empty()
                ? "; under its variants (" + on + ", d(sink)) by backward.variant_gradients_within_bound_of_oracle"
            : !on.empty() ? "; its variants have no backward (FEATURE3_BACKWARD_VARIANTS not declared)"
                          : std::string())
        << "\n";
  if (!form.empty())
    out << "  input forms (contract 1.2): " << form
        << "; judged by the paged, page_table and ragged laws (the other laws hand out the dense form)\n";
  if (d.features_v4 & ATTNCHECK_FEATURE4_FP8) {
    std::string types;
    for (dtype t : {dtype::e4m3, dtype::e5m2})
      if (g.dtypes & (1u << static_cast<unsigned>(t))) add(types, std::string(name(t)));
    out << "  fp8 inputs (contract 1.3): " << types
        << " with tensor and head descales; drawn by the differential law and judged by the descale laws\n";
  }
  if (!off.empty()) out << "  declared, NOT JUDGED by this version of attncheck: " << off << "\n";
}

}  // namespace attncheck
