// The bundled kernel's paged KV cache behind the subject ABI's cache_* entry points.
#pragma once

#include <string>

#include "attncheck/subject.h"
#include "attnimpl/attention.hpp"

namespace attncheck::builtin {

attnimpl::dtype to_impl(attncheck_dtype t);
attnimpl::config config_for(const attncheck_problem* p);
/// Tile sizes every later call uses (0 = the kernel's production default).
void set_tiles(std::int64_t q_tile, std::int64_t k_tile, std::int64_t split_keys);
void write_err(char* err, std::size_t len, const std::string& msg);

/// Sets the cache_* entry points, the cache feature and the cache claim when
/// the bundled kernel has a cache; leaves d alone otherwise.
void install_cache(attncheck_subject& d);

}  // namespace attncheck::builtin
