// Mutation points: deliberate bugs, each a one-line alternative next to the
// correct code (`if (ATTNIMPL_MUTANT(id)) ...`), so the verification suite
// can prove it catches them (ci/mutation, docs/mutation.md).
//
// In the production library ATTNIMPL_MUTANT(id) is the constant `false`: the
// alternatives compile away and the code is the same as without them. Only
// the separate target attnimpl_mutation defines ATTNIMPL_MUTATION; there the
// mutant is chosen at run time by name (select(); the mutation plugin sets it
// from its instance's mutant= option at every entry point).
#pragma once

// Every mutant of the kernel, with its expected laws and smallest shape.
#include "attnimpl/mutants.hpp"

#ifdef ATTNIMPL_MUTATION

namespace attnimpl::mutation {

enum class id : int {
  none = 0,
#define ATTNIMPL_MUTANT_ENUM(name, laws, shape) name,
  ATTNIMPL_MUTANTS(ATTNIMPL_MUTANT_ENUM)
#undef ATTNIMPL_MUTANT_ENUM
};

/// The mutant in effect (id::none until select() says otherwise).
extern id active;

/// Selects a mutant by name ("none" or "" for none); false for an unknown name.
bool select(const char* name);

/// Null-terminated list of every mutant's name, in list order.
const char* const* names();

}  // namespace attnimpl::mutation

#define ATTNIMPL_MUTANT(name) (::attnimpl::mutation::active == ::attnimpl::mutation::id::name)

#else

#define ATTNIMPL_MUTANT(name) false

#endif
