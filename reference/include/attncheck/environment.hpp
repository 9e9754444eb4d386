// The environment variables attncheck reads, in one table: the only place
// any part of the suite (tests and fuzzers included) reads the environment.
// Each documented variable is read once, at the first call of environment(),
// and never again; an undocumented name is a programming error.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace attncheck {

struct environment_variable {
  const char* name;
  const char* what;  ///< one line, as docs/cli.md "Environment" lists it
};

/// Every variable attncheck reads, with what it does.
const std::vector<environment_variable>& environment_variables();

/// The value of a documented variable as it was at the first call ("" when
/// unset or empty). Throws std::logic_error for a name not in the table.
const std::string& environment(std::string_view name);

/// "key=value,key=value" as pairs, in order; empty fields are skipped. A
/// field without '=' or with an empty key throws input_error naming `field`.
std::vector<std::pair<std::string, std::string>> parse_key_values(std::string_view text, const std::string& field);

}  // namespace attncheck
