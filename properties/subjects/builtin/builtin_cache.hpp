// The bundled kernel's paged KV cache behind the subject ABI's cache_* entry points.
#pragma once

#include <string>

#include "attncheck/subject.h"
#include "attnimpl/attention.hpp"

namespace attncheck::builtin {

/// One instance of the builtin subject: its own tiles and its descriptor
/// (desc.state points back here).
struct instance {
  attnimpl::config tiles{};  ///< 0: the kernel's production default
  std::string name;
  attncheck_instance desc{};
};

attnimpl::dtype to_impl(attncheck_dtype t);
attnimpl::config config_for(const instance* in, const attncheck_problem* p);
/// The contract 1.1 variants of a version 3 problem (none where the host's
/// problem is too short to hold the pointer, or it is NULL).
attnimpl::variants variants_of(const attncheck_problem* p);
void write_err(char* err, std::size_t len, const std::string& msg);
/// Parses "q_tile=N,k_tile=N,split_keys=N" or "tiles=tiny"; false and why on a bad item.
bool parse_options(const char* options, attnimpl::config& tiles, std::string& why);
/// Fills in.desc for the instance's tiles (name, features, claims, bound numbers, hints, entry points).
void describe(instance& in, const char* name);

/// Sets the cache_* entry points, the cache feature and the cache claim.
void install_cache(attncheck_instance& d);

}  // namespace attncheck::builtin
