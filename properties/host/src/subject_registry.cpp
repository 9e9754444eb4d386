#include "attncheck/subject_registry.hpp"

#include <mutex>

namespace attncheck {

namespace {

struct registry {
  std::mutex m;
  std::vector<subject_kind> kinds;
};

registry& the_registry() {
  static registry r;
  return r;
}

}  // namespace

void register_subject_kind(subject_kind kind) {
  registry& r = the_registry();
  const std::lock_guard<std::mutex> lock(r.m);
  for (auto& k : r.kinds)
    if (k.name == kind.name) {
      k = std::move(kind);
      return;
    }
  r.kinds.push_back(std::move(kind));
}

std::vector<subject_kind> subject_kinds() {
  registry& r = the_registry();
  const std::lock_guard<std::mutex> lock(r.m);
  return r.kinds;
}

}  // namespace attncheck
