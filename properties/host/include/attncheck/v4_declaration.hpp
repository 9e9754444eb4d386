// A subject's stage-wise precision profile and conventions, as the host reads
// them (docs/abi.md "Stage-wise precision profile", "Conventions"): checked at
// load and handed to the bound and the comparisons.
#pragma once

#include <cstdint>
#include <string>

#include "attncheck/oracle.hpp"
#include "attncheck/subject.h"
#include "attncheck/subject_host.hpp"

namespace attncheck {

/// What a profile declares: the stages' units, and the exp accuracy in ulps
/// (the instance's unless the profile overrides it).
struct declared_profile {
  stage_profile profile{};
  double exp_ulps = 0;
};

/// Reads a version 4 instance's profile (NULL: the default, every stage at
/// compute_unit_roundoff, and exp_ulps as given). Throws input_error naming
/// the field "subject.profile.FIELD" and its limit for anything out of range,
/// and for the parts this attncheck does not judge yet (fp8 P, a per-row
/// factor), never loading a declaration it cannot honour.
declared_profile read_profile(const attncheck_profile* p, double exp_ulps, const std::string& spec);

/// The stages that differ from u, for the gate's header and reports ("products
/// exact, scale after the dot, P 2^-8 (row sum before the cast)"); empty for
/// the default profile.
std::string profile_text(const stage_profile& s, double u);

/// What the conventions declare: the empty rows' values, and masked slots
/// skipped (the contract's) or weighted by zero.
struct declared_conventions {
  empty_row_convention empty_rows{};
  bool masked_weighted_by_zero = false;
  std::uint32_t flush = 0;  ///< ATTNCHECK_FLUSH_INPUTS | _INTERMEDIATES | _OUTPUTS
};

/// Reads a version 4 instance's conventions (NULL: the contract's). Throws
/// input_error naming "subject.conventions.FIELD" for a value out of range and
/// for the parts not judged yet (unspecified empty rows).
declared_conventions read_conventions(const attncheck_conventions* c, const std::string& spec);

/// The declared conventions in words ("empty rows: O NaN, LSE +inf; masked
/// slots weighted by zero; subnormals flushed (intermediates, outputs)");
/// empty for the contract's.
std::string conventions_text(const declared_conventions& d);

}  // namespace attncheck
