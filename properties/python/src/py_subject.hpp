// A Python subject behind the C ABI: an attncheck_instance whose entry points
// call an attncheck._bridge.Subject (properties/python/attncheck/_bridge.py). Shared by
// the bridge plugin (the gate's `--subject python:...`) and the attncheck
// Python module (attncheck.gate on a callable), so both see one convention.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "attncheck/subject.h"

namespace attncheck::python {

/// Makes an instance of `subject` (an attncheck._bridge.Subject): ABI version 3
/// when it declares a contract 1.1 variant (window, chunk, softcap, sinks,
/// ALiBi, bias), a contract 1.2 input form (paged, ragged), a backward or a
/// version 3 claim, else version 2. The caller holds the GIL; every entry point
/// takes it itself, so the instance may be called from any thread (or forked
/// child) that does not hold it.
/// Throws std::runtime_error when the declaration does not convert.
attncheck_instance* make_instance(pybind11::object subject);

/// One line for a verdict: the Python exception's type, message and the
/// subject's innermost frame (attncheck._bridge.describe_exception).
std::string describe(pybind11::error_already_set& e);

}  // namespace attncheck::python
