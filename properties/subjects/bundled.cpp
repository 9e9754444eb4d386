// Fills the host's subject registry with the subjects attncheck ships
// (bundled_subjects.hpp): the bundled kernel, the naive kernel and Python
// callables through the bridge plugin.
#include <dlfcn.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>

#include "attncheck/bundled_subjects.hpp"
#include "attncheck/case.hpp"
#include "attncheck/environment.hpp"
#include "attncheck/subject_host.hpp"
#include "attncheck/subject_registry.hpp"

namespace attncheck {

namespace {

// The Python bridge plugin (properties/python/src/bridge.cpp): ATTNCHECK_PYTHON_BRIDGE,
// else ../lib/attncheck/ (installed), else libattncheck_python.so next to the
// running binary or in a folder above it (test binaries live below the build
// root). The installed place comes first: an install tree may sit below a build.
std::string python_bridge_path() {
  constexpr const char* file = "libattncheck_python.so";
  if (const std::string& env = environment("ATTNCHECK_PYTHON_BRIDGE"); !env.empty()) return env;
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  if (const auto installed = self.parent_path().parent_path() / "lib" / "attncheck" / file; std::filesystem::exists(installed))
    return installed.string();
  for (auto dir = self.parent_path(); !dir.empty(); dir = dir.parent_path()) {
    if (std::filesystem::exists(dir / file)) return (dir / file).string();
    if (dir == dir.root_path()) break;
  }
  return {};
}

// python:MODULE:CALLABLE[:key=value,...] (the options after a ':', as every
// subject kind takes them; '?' is kept as an older spelling) as the bridge's
// option string "module=MODULE,callable=CALLABLE[,key=value,...]". A module
// or callable name holds no ':'.
std::string python_bridge_options(const std::string& spec) {
  std::string rest = spec.substr(std::strlen("python:")), options;
  if (const auto q = rest.find('?'); q != std::string::npos) {
    options = rest.substr(q + 1), rest = rest.substr(0, q);
  } else if (const auto first = rest.find(':'); first != std::string::npos) {
    if (const auto second = rest.find(':', first + 1); second != std::string::npos)
      options = rest.substr(second + 1), rest = rest.substr(0, second);
  }
  const auto colon = rest.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == rest.size() || rest.find(':', colon + 1) != std::string::npos)
    throw input_error("subject", "'" + spec + "': expected python:MODULE:CALLABLE[:key=value,...] (docs/python.md)");
  const std::string module = rest.substr(0, colon), callable = rest.substr(colon + 1);
  if ((module + callable).find_first_of(",=") != std::string::npos)
    throw input_error("subject", "'" + spec + "': a module or callable name cannot hold ',' or '='");
  return "module=" + module + ",callable=" + callable + (options.empty() ? "" : "," + options);
}

std::shared_ptr<subject> load_python(const std::string& spec) {
  const std::string bridge_options = python_bridge_options(spec);
  const std::string bridge = python_bridge_path();
  if (bridge.empty())
    throw input_error("subject",
                      "'" + spec +
                          "': this build has no Python bridge (libattncheck_python.so is built with "
                          "ATTNCHECK_PYTHON=ON, the default outside sanitizer builds; or set ATTNCHECK_PYTHON_BRIDGE)");
  // Never unloaded: the interpreter it starts lives as long as the process.
  void* h = dlopen(bridge.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!h) {
    const char* e = dlerror();
    throw input_error("subject", "cannot load the Python bridge '" + bridge + "': " + (e ? e : "unknown error"));
  }
  auto v2 = reinterpret_cast<attncheck_subject_entry_v2>(dlsym(h, ATTNCHECK_SUBJECT_ENTRY_V2));
  if (!v2) throw input_error("subject", bridge + " exports no " ATTNCHECK_SUBJECT_ENTRY_V2);
  char err[ATTNCHECK_ERR_CAPACITY] = {0};
  auto* inst = v2(bridge_options.c_str(), err, sizeof err);
  err[sizeof err - 1] = 0;
  if (!inst) throw input_error("subject", "'" + spec + "': " + (err[0] ? err : "the Python bridge gave no reason"));
  return subject::adopt(inst, spec);
}

}  // namespace

void register_bundled_subjects() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_subject_kind({"builtin", "builtin[:options]", false, [](const std::string& spec, const std::string& options) {
                             return subject::make_v2(builtin_instance, options, spec, "builtin");
                           }});
    register_subject_kind({"naive", "naive", false, [](const std::string& spec, const std::string& options) {
                             if (!options.empty()) throw input_error("subject", "'" + spec + "': naive takes no options");
                             return subject::make_v2(naive_instance_v3, options, spec, "naive");
                           }});
    register_subject_kind({"python", "python:MODULE:CALLABLE", true,
                           [](const std::string& spec, const std::string&) { return load_python(spec); }});
  });
}

}  // namespace attncheck
