// Versioned case files: a case with every tensor bit pattern, exact round trip.
//
// Format (JSON, one field per line as written; tests/cases/ has examples):
//   "format": "attncheck-case", "version": 1          required, checked first
//   "line": the one-line form                          informational, not read back
//   "law", "subject", "note": strings                  optional (left out when empty)
//   "b","hq","hkv","lq","lk","d","dv": integers        required
//   "dtype": "f32" | "f16" | "bf16"                    required
//   "scale": number (nearest f32)                      optional: default 1/sqrt(D)
//   "causal": bool                                     optional: default false
//   "key_len": [n per batch]                           optional: no padding
//   "mask_shape": [4 ints], "mask": "0101..."          optional, together; row-major, 1 = allowed
//   "values","layout","poison": names, "seed": uint64  optional recipe (defaults as in attn_case)
//   "q","k","v": {"shape":[4],"stride":[4],"offset":n,"bits":"hex"}   required
// "bits" is the whole storage, 8 hex digits per f32 element and 4 per f16/bf16
// (either case), so -0, subnormals, infinities and NaN payloads survive.
// Unknown fields, duplicate keys and nesting deeper than 8 are rejected.
#pragma once

#include <string>
#include <string_view>

#include "attncheck/case.hpp"

namespace attncheck {

/// Current format version; the reader rejects any other.
inline constexpr int case_file_version = 1;

/// A case plus why it was saved (empty fields are left out of the file).
struct case_record {
  attn_case c;
  std::string law;      ///< the law it broke, e.g. "causal.no_leakage"
  std::string subject;  ///< the subject it broke
  std::string note;     ///< free text: the verdict line when it was saved
};

/// Serializes a validated case (tensors included) to the file format.
std::string format_case_file(const case_record& r);

/// Parses and validates a case file. Throws input_error with one clear line
/// (field and limit) on anything malformed: bad JSON, wrong or missing
/// version, missing or unknown fields, wrong tensor length, bad bit strings.
case_record parse_case_file(std::string_view text, const case_limits& limits = {});

/// Reads a file from disk (size capped by limits.max_bytes) and parses it.
case_record read_case_file(const std::string& path, const case_limits& limits = {});
/// Writes atomically (temp file + rename); throws input_error on I/O failure.
void write_case_file(const std::string& path, const case_record& r);

}  // namespace attncheck
