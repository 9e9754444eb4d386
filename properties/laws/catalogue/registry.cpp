// all_laws(): every law group's laws, in the order of ATTNCHECK_LAW_GROUPS.
#include "registry.hpp"

namespace attncheck {

namespace {

std::vector<law> make_laws() {
  std::vector<law> v;
  const auto append = [&v](std::vector<law> group) {
    for (auto& l : group) v.push_back(std::move(l));
  };
#define ATTNCHECK_APPEND_LAW_GROUP(group) append(laws::group##_laws());
  ATTNCHECK_LAW_GROUPS(ATTNCHECK_APPEND_LAW_GROUP)
#undef ATTNCHECK_APPEND_LAW_GROUP
  return v;
}

}  // namespace

const std::vector<law>& all_laws() {
  static const std::vector<law> laws = make_laws();
  return laws;
}

const law* find_law(const std::string& name) {
  for (const auto& l : all_laws())
    if (l.name == name) return &l;
  return nullptr;
}

}  // namespace attncheck
