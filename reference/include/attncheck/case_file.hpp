// Versioned case files: a case with every tensor bit pattern, exact round trip.
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
