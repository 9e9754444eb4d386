// "Did you mean": the nearest of a list of known words to a misspelt one, for
// the error lines of the command line (flags, law names, subject kinds).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace attncheck {

/// " (did you mean 'x'?)" for the candidate nearest to word, when it is
/// within two edits (one for words of four letters or fewer) and the only
/// candidate that near; else "".
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace attncheck
