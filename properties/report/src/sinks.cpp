// The sinks run_gates hands each subject's result to: the console, the
// result files its configuration names, the HTML report of the run.
#include <ostream>

#include "attncheck/report.hpp"
#include "attncheck/report_html.hpp"

namespace attncheck {

void console_sink::take(const gate_result& g, std::size_t index) {
  if (index > 0) out_ << "\n";
  print_gate(g, out_, how_);
}

void result_files_sink::take(const gate_result& g, std::size_t) {
  if (!g.run.junit.empty()) write_junit(g.run.junit, g);
  if (!g.run.json.empty()) write_json(g.run.json, g);
}

void html::gate_html_sink::finish(const std::vector<gate_result>& results) {
  write_gate_html(path_, results);
  out_ << "report: " << path_ << "\n";
}

}  // namespace attncheck
