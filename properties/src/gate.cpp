#include "attncheck/gate.hpp"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "attncheck/case_file.hpp"

namespace attncheck {

namespace {

bool selected(const std::string& law, const std::vector<std::string>& only) {
  if (only.empty()) return true;
  for (const auto& o : only)
    if (law == o || law.rfind(o + ".", 0) == 0 || (!o.empty() && o.back() == '.' && law.rfind(o, 0) == 0)) return true;
  return false;
}

std::string verdict_name(verdict v) { return v == verdict::pass ? "pass" : v == verdict::fail ? "FAIL" : "skipped"; }

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    switch (ch) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20 && ch != '\n' && ch != '\t') o += ' ';
        else o += ch;
    }
  }
  return o;
}

std::string ratio_text(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", r);
  return buf;
}

}  // namespace

int gate_result::failed() const {
  int n = 0;
  for (const auto& r : reports) n += r.v == verdict::fail;
  return n;
}

gate_result run_gate(const gate_options& opt, std::ostream& out) {
  gate_result g;
  const auto start = std::chrono::steady_clock::now();
  const auto subj = subject::load(opt.subject);
  for (const auto& name : opt.only)
    if (!find_law(name)) {
      bool prefix = false;
      for (const auto& l : all_laws()) prefix = prefix || selected(l.name, {name});
      if (!prefix) throw input_error("--only", "'" + name + "' names no law or group (see `attncheck laws`)");
    }
  out << "attncheck gate: subject " << subj->name() << " (" << opt.subject << "), seed " << opt.run.seed << ", "
      << opt.run.cases << " cases per law\n";
  for (const auto& l : all_laws()) {
    if (!selected(l.name, opt.only)) continue;
    if (opt.progress) std::cerr << "  running " << l.name << " ..." << std::flush;
    law_report r = run_law(l, *subj, opt.run);
    if (opt.progress) std::cerr << "\r\033[K" << std::flush;
    if (r.v == verdict::fail) {
      std::string saved;
      if (r.counterexample && !opt.out_dir.empty()) {
        std::filesystem::create_directories(opt.out_dir);
        char name[64];
        std::snprintf(name, sizeof name, "-%016llx.json", static_cast<unsigned long long>(fingerprint(*r.counterexample)));
        saved = (std::filesystem::path(opt.out_dir) / (l.name + name)).string();
        case_record rec{*r.counterexample, l.name, subj->name(), r.failure.message.substr(0, 2000)};
        write_case_file(saved, rec);
        g.saved.push_back(saved);
      }
      out << failure_screen(r, *subj, saved);
    }
    g.reports.push_back(std::move(r));
  }
  g.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // The table.
  std::size_t w = 4;
  for (const auto& r : g.reports) w = std::max(w, r.law.size());
  out << "\n" << std::left << std::setw(static_cast<int>(w)) << "law" << "  " << std::right << std::setw(6) << "cases"
      << "  " << std::setw(8) << "skipped" << "  " << std::setw(10) << "max obs/bd" << "  " << std::setw(8) << "verdict"
      << "  " << std::setw(7) << "seconds" << "\n";
  int passed = 0, failed = 0, skipped = 0;
  for (const auto& r : g.reports) {
    passed += r.v == verdict::pass, failed += r.v == verdict::fail, skipped += r.v == verdict::skip;
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.2f", r.seconds);
    out << std::left << std::setw(static_cast<int>(w)) << r.law << "  " << std::right << std::setw(6) << r.cases << "  "
        << std::setw(8) << (r.v == verdict::skip ? "all" : "0") << "  " << std::setw(10) << ratio_text(r.max_ratio) << "  "
        << std::setw(8) << verdict_name(r.v) << "  " << std::setw(7) << secs << "\n";
    if (r.v == verdict::skip) out << "    skipped: " << r.skip_reason << "\n";
  }
  char total[64];
  std::snprintf(total, sizeof total, "%.1f", g.seconds);
  out << "\ngate: " << passed << " passed, " << failed << " failed, " << skipped << " skipped in " << total << " s";
  out << (failed ? "  -> FAIL" : "  -> PASS") << "\n";
  if (!opt.junit.empty()) write_junit(opt.junit, g, subj->name(), opt.run.seed);
  return g;
}

void write_junit(const std::string& path, const gate_result& r, const std::string& subject_name, std::uint64_t seed) {
  std::ostringstream x;
  int failures = 0, skipped = 0;
  for (const auto& l : r.reports) failures += l.v == verdict::fail, skipped += l.v == verdict::skip;
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x << "<testsuites name=\"attncheck\" tests=\"" << r.reports.size() << "\" failures=\"" << failures << "\" skipped=\"" << skipped
    << "\" time=\"" << r.seconds << "\">\n";
  x << "  <testsuite name=\"attncheck-gate." << xml_escape(subject_name) << "\" tests=\"" << r.reports.size() << "\" failures=\""
    << failures << "\" skipped=\"" << skipped << "\" time=\"" << r.seconds << "\">\n";
  x << "    <properties><property name=\"seed\" value=\"" << seed << "\"/><property name=\"subject\" value=\""
    << xml_escape(subject_name) << "\"/></properties>\n";
  for (std::size_t i = 0; i < r.reports.size(); ++i) {
    const auto& l = r.reports[i];
    const auto dot = l.law.find('.');
    x << "    <testcase classname=\"" << xml_escape(l.law.substr(0, dot)) << "\" name=\"" << xml_escape(l.law.substr(dot + 1))
      << "\" time=\"" << l.seconds << "\" assertions=\"" << l.cases << "\">\n";
    if (l.v == verdict::skip) x << "      <skipped message=\"" << xml_escape(l.skip_reason) << "\"/>\n";
    if (l.v == verdict::fail) {
      x << "      <failure message=\"" << xml_escape(l.failure.message.substr(0, 500)) << "\" type=\"law\">"
        << xml_escape(l.counterexample ? to_line(*l.counterexample) : std::string()) << "\n"
        << xml_escape(l.failure.worst.where.empty() ? "" : l.failure.worst.describe()) << "</failure>\n";
    }
    x << "      <system-out>max observed/bound " << l.max_ratio << " on " << xml_escape(l.max_ratio_case) << "</system-out>\n";
    x << "    </testcase>\n";
  }
  x << "  </testsuite>\n</testsuites>\n";
  std::ofstream f(path);
  if (!f) throw input_error("--junit", "cannot write '" + path + "'");
  f << x.str();
  if (!f) throw input_error("--junit", "write to '" + path + "' failed");
}

int repro_case_file(const std::string& file, const std::string& subject_spec, const std::string& law_override, std::ostream& out) {
  const case_record rec = read_case_file(file);
  const std::string law_name = law_override.empty() ? rec.law : law_override;
  if (law_name.empty()) throw input_error("law", file + " names no law; pass --law NAME (see `attncheck laws`)");
  const law* l = find_law(law_name);
  if (!l) throw input_error("law", "'" + law_name + "' is not a law (see `attncheck laws`)");
  const auto subj = subject::load(subject_spec);
  if (auto why = l->applicable(*subj); !why.empty()) {
    out << "SKIP " << law_name << ": " << why << "\n";
    return 0;
  }
  if (auto why = subj->cannot_take(rec.c); !why.empty()) {
    out << "SKIP " << law_name << ": subject cannot take this case (" << why << ")\n";
    return 0;
  }
  const law_outcome o = replay(*l, *subj, rec.c);
  out << (o.v == verdict::fail ? "FAIL " : "PASS ") << law_name << "\n";
  out << "  subject:  " << subj->name() << " (" << subject_spec << ")\n";
  out << "  case:     " << to_line(rec.c) << "\n";
  out << "  file:     " << file << "\n";
  if (o.v == verdict::fail) out << "  why:      " << o.message << "\n";
  if (!o.worst.where.empty()) out << "  worst:    " << o.worst.describe() << "\n";
  return o.v == verdict::fail ? 1 : 0;
}

}  // namespace attncheck
