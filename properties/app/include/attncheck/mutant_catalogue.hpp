// The bundled kernel's mutants as the suite sees them: each with the laws
// that must kill it and the smallest shape its bug class shows on. The list
// itself is impl/include/attnimpl/mutants.hpp (one list: the kernel's
// mutation points and `attncheck mutation` both read it).
#pragma once

#include <string>
#include <vector>

namespace attncheck {

struct mutant_spec {
  std::string name;
  std::vector<std::string> laws;  ///< full law names, e.g. "causal.future_keys_never_change_past_outputs"
  std::string min_shape;          ///< e.g. "Hq=6, Hkv=2" (T: k_tile, S: split_keys)
};

/// Every mutant in list order. Throws std::logic_error naming the mutant when
/// an expected law is not a registered law (tested, so it cannot ship).
const std::vector<mutant_spec>& mutant_specs();

/// A law's short name in the mutation tables: its group, except for the three
/// independence laws (batch, masked_slots, padding), fully_masked and the backward
/// laws (backward_ and the first word of the law: backward_gradients, backward_key, ...).
std::string law_alias(const std::string& law);

}  // namespace attncheck
