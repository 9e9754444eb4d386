#include "attncheck/failure_report.hpp"

#include <filesystem>
#include <sstream>

namespace attncheck {

const char* failure_kind_name(failure_kind k) {
  switch (k) {
    case failure_kind::law: return "law";
    case failure_kind::crash: return "crash";
    case failure_kind::hang: return "hang";
    case failure_kind::subject_error: return "subject_error";
    case failure_kind::harness: return "harness";
    case failure_kind::timeout: return "timeout";
  }
  return "law";
}

failure_kind failure_kind_of(const std::string& name) {
  for (auto k :
       {failure_kind::crash, failure_kind::hang, failure_kind::subject_error, failure_kind::harness, failure_kind::timeout})
    if (name == failure_kind_name(k)) return k;
  return failure_kind::law;
}

std::string print_failure(const failure_report& r) {
  std::ostringstream o;
  o << r.verdict << " " << r.law << (r.tag.empty() ? "" : " " + r.tag) << "\n";
  const auto line = [&o](const char* label, const std::string& value) {
    if (!value.empty()) o << "  " << label << value << "\n";
  };
  if (!r.subject_name.empty() || !r.subject_spec.empty())
    o << "  subject:  " << r.subject_name << " (" << r.subject_spec << ")\n";
  line("case:     ", r.case_line);
  line("cases:    ", r.cases);
  line("run:      ", r.run);
  line("file:     ", r.file);
  line("why:      ", r.message);
  line("worst:    ", r.worst);
  line("judged:   ", r.judged);
  line("saved:    ", r.saved_file);
  line("replay:   ", r.replay);
  line("not saved: ", r.not_saved);
  if (!r.reproduce.empty()) o << "  rapidcheck: RC_PARAMS=\"reproduce=" << r.reproduce << "\"\n";
  return o.str();
}

std::string absolute_spec(const std::string& spec) {
  namespace fs = std::filesystem;
  const std::string python = "python:";
  const std::size_t at = spec.rfind(python, 0) == 0 ? python.size() : 0;  // the path part starts here
  const std::string where = spec.substr(at, spec.find(':', at) - at);
  std::error_code ec;
  if (!fs::is_regular_file(where, ec)) return spec;  // a registered kind or a Python module: builtin, naive, python:pkg.mod:fn
  const auto path = fs::absolute(where, ec);
  return ec ? spec : spec.substr(0, at) + path.lexically_normal().string() + spec.substr(at + where.size());
}

std::string replay_command(const std::string& saved_file, const std::string& subject_spec) {
  // The attncheck next to the running binary (the gate itself, or a fuzz
  // harness in the same build), absolute so that the line works from any folder.
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  std::filesystem::path tool = ec ? std::filesystem::path("attncheck") : self.parent_path() / "attncheck";
  if (!ec && self.filename() != "attncheck") {
    // A harness or test binary: look for attncheck in the build root above it.
    for (auto dir = self.parent_path(); !dir.empty() && dir != dir.root_path(); dir = dir.parent_path())
      if (std::filesystem::exists(dir / "attncheck") && !std::filesystem::is_directory(dir / "attncheck")) {
        tool = dir / "attncheck";
        break;
      }
  }
  const std::filesystem::path file = std::filesystem::absolute(saved_file, ec);
  const std::string spec = absolute_spec(subject_spec);
  return tool.string() + " repro " + (ec ? saved_file : file.lexically_normal().string()) +
         (spec == "builtin" ? "" : " --subject '" + spec + "'");
}

}  // namespace attncheck
