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

std::string replay_command(const std::string& saved_file, const std::string& subject_spec) {
  // The attncheck next to the running binary (the gate itself, or a fuzz
  // harness in the same build), relative to the working directory when shorter.
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
  const auto rel = std::filesystem::relative(tool, std::filesystem::current_path(), ec);
  if (!ec && !rel.empty() && rel.string().size() < tool.string().size()) tool = rel;
  std::string t = tool.string();
  if (t.find('/') == std::string::npos) t = "./" + t;
  return t + " repro " + saved_file + (subject_spec == "builtin" ? "" : " --subject '" + subject_spec + "'");
}

}  // namespace attncheck
