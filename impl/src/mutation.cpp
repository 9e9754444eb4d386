// The run-time switch of the mutation build (see mutation.hpp); empty in the
// production library.
#include "mutation.hpp"

#ifdef ATTNIMPL_MUTATION

#include <cstring>

namespace attnimpl::mutation {

namespace {

const char* const all_names[] = {
#define ATTNIMPL_MUTANT_NAME(name, laws, shape) #name,
    ATTNIMPL_MUTANTS(ATTNIMPL_MUTANT_NAME)
#undef ATTNIMPL_MUTANT_NAME
        nullptr};

}  // namespace

id active = id::none;

bool select(const char* name) {
  if (!name || !*name || std::strcmp(name, "none") == 0) {
    active = id::none;
    return true;
  }
  for (int i = 0; all_names[i]; ++i)
    if (std::strcmp(name, all_names[i]) == 0) {
      active = static_cast<id>(i + 1);
      return true;
    }
  return false;
}

const char* const* names() { return all_names; }

}  // namespace attnimpl::mutation

#endif
