// The contract's features, one entry each (docs/architecture.md, "Where to
// add a feature"): the causal mask, key padding, the boolean mask, LSE,
// threads, the cache, the six score variants of contract 1.1, the input forms
// of contract 1.2, fp8 storage and the backward. Every layer that lists features reads this
// table: the one-line form's writer and reader, validation, the host's
// refusals, the laws' stats and variant loops, the console's declaration and
// --stats, and the Python package's names and keywords.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "attncheck/case.hpp"

namespace attncheck {

/// What a feature is to the contract.
enum class feature_kind : std::uint8_t {
  mask,        ///< visibility from contract 1.0: causal, key padding, the boolean mask
  output,      ///< what a call returns or how it runs: LSE, threads, the cache entry points
  variant,     ///< a contract 1.1 score variant (docs/spec.md "Variants")
  input_form,  ///< a contract 1.2 input form (docs/spec.md "Paged KV", "Ragged batches")
  backward,    ///< the backward pass and what it adds
  storage,     ///< how the inputs are stored: fp8 with descales (docs/spec.md "fp8 storage")
};

/// One contract feature, with everything each layer needs of it.
struct contract_feature {
  /// Its name: the Python declaration's feature, the stats' "variant NAME", the console's variant list.
  std::string name;
  feature_kind kind = feature_kind::mask;
  /// Where the subject declares it (properties/abi/include/attncheck/subject.h):
  /// word 1, attncheck_instance.features (ATTNCHECK_FEATURE_*), word 3, features_v3 (ATTNCHECK_FEATURE3_*),
  /// or word 4, features_v4 (ATTNCHECK_FEATURE4_*).
  int abi_word = 1;
  std::uint32_t bit = 0;
  /// In words, as the console's declaration header names it ("paged K/V").
  std::string label;
  /// The host's refusal when a case uses it and the subject does not declare it ("no softcap").
  std::string cannot_take;
  /// The one-line form's keys it owns, in line order; empty when it has none.
  std::vector<std::string> keys;
  /// Non-empty: the keys after the first are given only with the first, and the reader says
  /// "given without " this text (bias_type and bias_values need "bias=BxHxIxJ").
  std::string keys_need_first;

  /// True when the case uses it; null for a feature that is no part of a case (LSE, threads, the cache, backward).
  bool (*present)(const attn_case&) = nullptr;
  /// Switches it off: the same case without it.
  void (*clear)(attn_case&) = nullptr;
  /// Appends its fields (",key=value" or ",flag") to a one-line form when present.
  void (*write)(const attn_case&, std::string&) = nullptr;
  /// Reads one of its keys into the case: the value after '=', or flag true for a bare key. Throws input_error.
  void (*read)(std::string_view key, std::string_view value, bool flag, attn_case&, const case_limits&) = nullptr;
  /// Checks its fields (ranges, lengths, shapes); throws input_error naming the field. Null: nothing of its own.
  void (*check)(const attn_case&, bool tensors_required, const case_limits&) = nullptr;

  /// A variant: the share of the variant cases that draw it (docs/distribution.md); the
  /// gate's --stats floor is half of the expected share of all cases of the laws that draw variants.
  double share = 0;
  /// False when no law judges it yet: the console says so beside the declaration.
  bool judged = true;
  /// True when a Python declaration names it among its features; false when the
  /// declaration takes it otherwise (the cache and the backward through their own keys) or not at all.
  bool python_declarable = true;
  /// The keywords the Python callable receives it as (docs/python.md).
  std::vector<std::string> python_keywords;
};

/// Every contract feature, in the one-line form's order.
std::span<const contract_feature> contract_features();
/// The feature of this name, or null.
const contract_feature* find_feature(std::string_view name);
/// The feature with this ABI word and bit, or null.
const contract_feature* find_feature(int abi_word, std::uint32_t bit);
/// The feature owning this one-line key, or null.
const contract_feature* feature_of_key(std::string_view key);
/// The word 3 bits of the score variants the case uses.
std::uint32_t variant_bits(const attn_case& c);

/// Adds an entry to the table. The table in features.cpp is the contract's
/// own list; this entry point exists for tests that prove every consumer
/// reads the table (tests/laws/features_test.cpp). Call it before any
/// thread reads the table and before the first consumer runs: it may move the
/// entries, and some consumers cache what they derive from the table.
void register_contract_feature(contract_feature f);

}  // namespace attncheck
