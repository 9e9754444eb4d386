// Linked as an object into the in-tree programs that load bundled subjects
// by name (tests, fuzz harnesses): registers them before main.
#include "attncheck/bundled_subjects.hpp"

namespace {
[[maybe_unused]] const bool registered = (attncheck::register_bundled_subjects(), true);
}  // namespace
