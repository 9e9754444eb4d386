// The kinds of subject a spec may name, besides a plugin path: a prefix and
// the factory that makes an instance of it. The host knows no subject by
// name; whoever links the subjects fills this (the attncheck command, the
// tests and the Python module call register_bundled_subjects(),
// properties/subjects/include/attncheck/bundled_subjects.hpp).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace attncheck {

class subject;

struct subject_kind {
  /// What a spec starts with: "builtin" takes "builtin" and "builtin:opts".
  std::string name;
  /// How the host's "cannot load" message names this kind ("builtin[:options]"); empty: not named there.
  std::string hint;
  /// true: the factory parses the whole spec after "name:" itself (its own grammar,
  /// e.g. python:MODULE:CALLABLE[:key=value,...]); false: it gets the spec's options.
  bool whole_spec = false;
  /// Makes an independent instance; throws input_error naming "subject" when it cannot.
  std::function<std::shared_ptr<subject>(const std::string& spec, const std::string& options)> make;
};

/// Adds a kind, or replaces the kind of the same name.
void register_subject_kind(subject_kind kind);

/// The registered kinds, in registration order.
std::vector<subject_kind> subject_kinds();

}  // namespace attncheck
