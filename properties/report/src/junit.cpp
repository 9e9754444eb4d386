// The gate's JUnit XML.
#include <fstream>
#include <sstream>

#include "attncheck/report_html.hpp"
#include "attncheck/version.hpp"

#include <nlohmann/json.hpp>

#include "attncheck/report.hpp"

namespace attncheck {
namespace gate_detail {

namespace {

// XML text and attribute values: the HTML reports' escaping (& < > " ' and
// control characters) is valid XML too.
std::string xml_escape(std::string_view s) { return html::escape(s); }

}  // namespace

}  // namespace gate_detail

using namespace gate_detail;

void write_junit(const std::string& path, const gate_result& r) {
  std::ostringstream x;
  // A law cut short by its own time limit is an error (the gate's problem), not a failure.
  // The probabilistic verdict is a property of its own (probabilistic_verdict), never a failure.
  int failures = 0, skipped = 0, errors = 0;
  for (const auto& l : r.reports)
    failures += (l.v == verdict::fail && !timed_out(l)) || l.v == verdict::unjudged ||
                (r.run.prob_fails_gate && l.v == verdict::pass && l.prob == prob_verdict::fail),
        skipped += l.v == verdict::skip, errors += timed_out(l);
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x << "<testsuites name=\"attncheck\" tests=\"" << r.reports.size() << "\" failures=\"" << failures << "\" errors=\"" << errors
    << "\" skipped=\"" << skipped << "\" time=\"" << r.seconds << "\">\n";
  x << "  <testsuite name=\"attncheck-gate." << xml_escape(r.subject_name) << "\" tests=\"" << r.reports.size()
    << "\" failures=\"" << failures << "\" errors=\"" << errors << "\" skipped=\"" << skipped << "\" time=\"" << r.seconds
    << "\">\n";
  std::string nb;
  for (const auto& [lk, n] : r.declared.nb_at)
    nb += (nb.empty() ? "" : ", ") + std::to_string(n) + " at Lk=" + std::to_string(lk);
  x << "    <properties><property name=\"attncheck_version\" value=\"" << version_string
    << "\"/><property name=\"contract_version\" value=\"" << contract_version
    << "\"/><property name=\"oracle\" value=\"auto_tier, " << oracle_precision_id << " (" << oracle_precision_bits
    << "-bit MPFR)\"/><property name=\"made_by\" value=\"" << xml_escape(provenance_line())
    << "\"/><property name=\"seed\" value=\"" << r.run.seed << "\"/><property name=\"run\" value=\""
    << xml_escape(run_string(r.run)) << "\"/><property name=\"subject\" value=\"" << xml_escape(r.subject_name)
    << "\"/><property name=\"abi\" value=\"" << r.abi << "\"/><property name=\"compute_unit_roundoff\" value=\""
    << number_text(r.declared.u, "%.17g") << "\"/><property name=\"exp_ulps\" value=\""
    << number_text(r.declared.exp_ulps, "%.17g") << "\"/><property name=\"key_blocks\" value=\"" << nb
    << (r.declared.profile.empty() ? "" : "\"/><property name=\"profile\" value=\"" + xml_escape(r.declared.profile))
    << (r.declared.conventions.empty() ? "" : "\"/><property name=\"conventions\" value=\"" + xml_escape(r.declared.conventions))
    << (r.declared.limits.empty() ? "" : "\"/><property name=\"limits\" value=\"" + xml_escape(r.declared.limits))
    << "\"/><property name=\"probabilistic_confidence\" value=\"" << xml_escape(probabilistic_statement())
    << "\"/></properties>\n";
  for (std::size_t i = 0; i < r.reports.size(); ++i) {
    const auto& l = r.reports[i];
    const auto dot = l.law.find('.');
    x << "    <testcase classname=\"" << xml_escape(l.law.substr(0, dot)) << "\" name=\"" << xml_escape(l.law.substr(dot + 1))
      << "\" time=\"" << l.seconds << "\" assertions=\"" << l.cases << "\">\n";
    x << "      <properties><property name=\"probabilistic_verdict\" value=\"" << prob_verdict_id(l.prob)
      << "\"/></properties>\n";
    // A FAIL(prob) is a failure only under --prob-fails-gate (and when the sound verdict has none); else it is told in system-out.
    if (l.prob == prob_verdict::fail && r.run.prob_fails_gate && l.v == verdict::pass)
      x << "      <failure message=\"" << xml_escape(l.prob_failure.substr(0, 500)) << "\" type=\"probabilistic\">"
        << xml_escape(l.prob_failure_case) << "</failure>\n";
    else if (l.prob == prob_verdict::fail)
      x << "      <system-out>FAIL(prob), reported, not gating: " << xml_escape(l.prob_failure.substr(0, 500)) << " on "
        << xml_escape(l.prob_failure_case) << "</system-out>\n";
    if (l.v == verdict::skip) x << "      <skipped message=\"" << xml_escape(l.skip_reason) << "\"/>\n";
    if (const std::string note = replaced_declines_note(l); !note.empty())
      x << "      <system-out>" << xml_escape(note) << "</system-out>\n";
    if (l.v == verdict::unjudged)
      x << "      <failure message=\"judged " << l.judged << " of " << l.cases << " cases"
        << (l.declines.empty() ? std::string() : " (" + declines_text(l.declines).substr(0, 200) + ")") << ", below the floor of "
        << number_text(100 * l.min_judged, "%.0f") << "%\" type=\"unjudged\">" << xml_escape(l.unjudged_why) << "</failure>\n";
    if (timed_out(l))
      x << "      <error message=\"" << xml_escape(l.failure.message.substr(0, 500)) << "\" type=\"timeout\">"
        << xml_escape(l.counterexample ? to_line(*l.counterexample) : std::string()) << "</error>\n";
    else if (l.v == verdict::fail) {
      x << "      <failure message=\"" << xml_escape(l.failure.message.substr(0, 500)) << "\" type=\""
        << failure_kind_name(l.failure.kind) << "\">" << xml_escape(l.counterexample ? to_line(*l.counterexample) : std::string())
        << "\n"
        << xml_escape(l.failure.worst.where.empty() ? "" : l.failure.worst.describe()) << "</failure>\n";
    }
    x << "      <system-out>judged " << l.judged << "/" << l.cases << "; max observed/bound " << l.max_ratio << " on "
      << xml_escape(l.max_ratio_case) << "</system-out>\n";
    x << "    </testcase>\n";
  }
  x << "  </testsuite>\n</testsuites>\n";
  std::ofstream f(path);
  if (!f) throw input_error("--junit", "cannot write '" + path + "'");
  f << x.str();
  if (!f) throw input_error("--junit", "write to '" + path + "' failed");
}

}  // namespace attncheck
