// The Python bridge plugin (libattncheck_python.so): a plugin that embeds
// CPython and makes an instance of a Python subject, of ABI version 3 when
// the subject declares a contract 1.1 variant, a contract 1.2 input form, a
// backward or a version 3 claim, and version 2 otherwise (both
// entry points return the same instance; the host accepts either version). The host loads it
// for `--subject python:MODULE:CALLABLE[:options]` and passes
// "module=MODULE,callable=CALLABLE[,options]". Everything after that is what
// happens to a C plugin: the same declaration checks, the same isolation
// (the interpreter starts in the gate's parent, each law runs in a forked
// child), the same guard bands around the buffers the views point into.
#include <dlfcn.h>
#include <pybind11/embed.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "feature_table.hpp"
#include "py_subject.hpp"

namespace py = pybind11;

// The feature table for attncheck._bridge and attncheck's declare() inside the
// embedded interpreter, where attncheck._core need not load.
PYBIND11_EMBEDDED_MODULE(attncheck_features, m) { m.def("contract_features", &attncheck::python::contract_feature_dicts); }

namespace {

// The folder holding the attncheck package: python/ next to this library
// (the build tree and the installed tree both put it there).
std::string package_dir() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&package_dir), &info) || !info.dli_fname) return {};
  return (std::filesystem::path(info.dli_fname).parent_path() / "python").string();
}

// Starts the interpreter once per process and releases the GIL: every entry
// point takes it, in the parent and in each forked child alike.
void ensure_interpreter() {
  if (Py_IsInitialized()) return;
  // Extension modules (numpy, torch) expect libpython's symbols in the global
  // namespace; this library was loaded RTLD_LOCAL, so promote libpython.
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&Py_IsInitialized), &info) && info.dli_fname)
    dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
  // No Python signal handlers: the host owns SIGINT, and a hang must stay
  // killable by the gate's timeout.
  py::initialize_interpreter(false);
  {
    py::module_ sys = py::module_::import("sys");
    py::list path = sys.attr("path");
    // The working directory first (what `python -m` does), then the package.
    path.insert(0, std::filesystem::current_path().string());
    const std::string pkg = package_dir();
    if (!pkg.empty()) path.append(pkg);
  }
  PyEval_SaveThread();
}

void report(char* err, std::size_t len, const std::string& what) {
  if (err && len) std::snprintf(err, len, "%s", what.c_str());
}

}  // namespace

namespace {

attncheck_instance* make_subject(const char* options, char* err, std::size_t err_len) {
  std::string module, callable;
  std::vector<std::pair<std::string, std::string>> rest;
  const std::string all = options ? options : "";
  for (std::size_t start = 0; start < all.size();) {
    std::size_t end = all.find(',', start);
    if (end == std::string::npos) end = all.size();
    const std::string item = all.substr(start, end - start);
    start = end + 1;
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      report(err, err_len, "option '" + item + "' is not key=value");
      return nullptr;
    }
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "module")
      module = value;
    else if (key == "callable")
      callable = value;
    else
      rest.emplace_back(key, value);
  }
  if (module.empty() || callable.empty()) {
    report(err, err_len, "the Python bridge needs module=... and callable=... (python:MODULE:CALLABLE)");
    return nullptr;
  }
  try {
    ensure_interpreter();
  } catch (const std::exception& e) {
    report(err, err_len, std::string("cannot start the Python interpreter: ") + e.what());
    return nullptr;
  }
  py::gil_scoped_acquire gil;
  try {
    py::dict opts;
    for (const auto& [k, v] : rest) opts[py::str(k)] = py::str(v);
    py::object s = py::module_::import("attncheck._bridge").attr("load")(module, callable, opts);
    return attncheck::python::make_instance(s);
  } catch (py::error_already_set& e) {
    report(err, err_len, attncheck::python::describe(e));
  } catch (const std::exception& e) {
    report(err, err_len, e.what());
  }
  return nullptr;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) attncheck_instance* attncheck_subject_v3(const char* options, char* err,
                                                                                           std::size_t err_len) {
  return make_subject(options, err, err_len);
}

extern "C" __attribute__((visibility("default"))) attncheck_instance* attncheck_subject_v2(const char* options, char* err,
                                                                                           std::size_t err_len) {
  return make_subject(options, err, err_len);
}
