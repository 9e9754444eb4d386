#include "attncheck/mutant_catalogue.hpp"

#include <sstream>
#include <stdexcept>
#include <utility>

#include "attncheck/laws.hpp"
#include "attnimpl/mutants.hpp"

namespace attncheck {

std::string law_alias(const std::string& law) {
  if (law.rfind("independence.", 0) == 0) {
    const std::string rest = law.substr(13);
    return rest.rfind("batch", 0) == 0 ? "batch" : rest.rfind("masked", 0) == 0 ? "masked_slots" : "padding";
  }
  if (law == "masked.fully_masked_rows_are_zero") return "fully_masked";
  // The contract 1.1 groups hold several laws: each its own short name.
  static const std::pair<const char*, const char*> variant_aliases[] = {
      {"window.outside_keys_never_matter", "window"},
      {"window.wide_window_equals_plain", "window_plain"},
      {"sinks.sink_rescales_plain_output", "sinks"},
      {"sinks.common_shift_changes_nothing", "sink_shift"},
      {"softcap.weights_within_capped_range", "softcap"},
      {"softcap.far_cap_equals_none", "softcap_far"},
      {"bias.alibi_equals_explicit_bias", "alibi"},
      {"bias.row_constant_changes_nothing", "bias_row"},
      {"bias.minus_inf_equals_mask", "bias_mask"},
      {"bias.broadcast_equals_materialized", "bias_broadcast"},
      // The input forms of contract 1.2: the first law of each group keeps the group's name.
      {"paged.placement_changes_nothing", "paged_placement"},
      {"paged.shared_prefix_equals_private_copies", "paged_shared"},
      {"ragged.zero_length_sequences_are_inert", "ragged_empty"},
      // fp8 storage of contract 1.3.
      {"descale.power_of_two_moves_between_value_and_descale", "descale"},
      {"descale.per_head_descale_moves_only_its_head", "descale_head"},
      {"descale.unit_descale_equals_none", "descale_unit"},
      {"softmax.mass_kept_on_long_peaked_rows", "mass"},
  };
  for (const auto& [full, alias] : variant_aliases)
    if (law == full) return alias;
  // backward.<first word>_...: backward_gradients, backward_key, backward_value, backward_linear, backward_masked.
  if (law.rfind("backward.", 0) == 0) return "backward_" + law.substr(9, law.find('_', 9) - 9);
  return law.substr(0, law.find('.'));
}

namespace {

std::vector<mutant_spec> make_specs() {
  struct raw {
    const char* name;
    const char* laws;
    const char* shape;
  };
  static const raw list[] = {
#define ATTNCHECK_MUTANT_ROW(name, laws, shape) {#name, laws, shape},
      ATTNIMPL_MUTANTS(ATTNCHECK_MUTANT_ROW)
#undef ATTNCHECK_MUTANT_ROW
  };
  std::vector<mutant_spec> v;
  for (const raw& r : list) {
    mutant_spec m{r.name, {}, r.shape};
    std::istringstream words(r.laws);
    for (std::string w; words >> w;) {
      const law* found = nullptr;
      for (const auto& l : all_laws())
        if (law_alias(l.name) == w) found = &l;
      if (!found) throw std::logic_error("mutant " + m.name + " expects law '" + w + "', which is not a registered law");
      m.laws.push_back(found->name);
    }
    v.push_back(std::move(m));
  }
  return v;
}

}  // namespace

const std::vector<mutant_spec>& mutant_specs() {
  static const std::vector<mutant_spec> v = make_specs();
  return v;
}

}  // namespace attncheck
