// A version 4 instance's stage-wise precision profile and conventions
// (docs/abi.md "Stage-wise precision profile", "Conventions"): checked at load,
// field by field, and translated into the oracle's stage_profile (whose terms
// docs/bound.md derives, "Stage-wise profiles") and the empty rows' values the
// comparisons expect.
#include "attncheck/v4_declaration.hpp"

#include <cmath>
#include <cstdio>
#include <string>

#include "attncheck/dtype.hpp"

namespace attncheck {

namespace {

std::string power_text(double u) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "2^%d", std::ilogb(u));
  return std::exp2(std::ilogb(u)) == u ? std::string(buf) : std::to_string(u);
}

// A unit field: 0 inherits u; else within the instance's limits for u.
double unit_field(double x, const char* field, const std::string& spec, bool exact_allowed = false) {
  if (x == 0) return 0;
  if (exact_allowed && x == ATTNCHECK_EXACT) return ATTNCHECK_EXACT;
  if (!(x >= ATTNCHECK_MIN_UNIT_ROUNDOFF && x <= ATTNCHECK_MAX_UNIT_ROUNDOFF))
    throw input_error(std::string("subject.profile.") + field,
                      spec + " declares " + field + " = " + std::to_string(x) + "; it must be 0 (the compute unit)" +
                          (exact_allowed ? ", ATTNCHECK_EXACT" : "") + " or lie in [" + power_text(ATTNCHECK_MIN_UNIT_ROUNDOFF) +
                          ", " + power_text(ATTNCHECK_MAX_UNIT_ROUNDOFF) + "]");
  return x;
}

[[noreturn]] void refuse(const char* field, const std::string& spec, const std::string& why) {
  throw input_error(std::string("subject.profile.") + field, spec + ": " + why);
}

}  // namespace

declared_profile read_profile(const attncheck_profile* p, double exp_ulps, const std::string& spec) {
  declared_profile out;
  out.exp_ulps = exp_ulps;
  if (!p) return out;
  if (p->struct_size < sizeof(attncheck_profile))
    refuse("struct_size", spec,
           "the profile's struct_size " + std::to_string(p->struct_size) + " is under its first version's size " +
               std::to_string(sizeof(attncheck_profile)));
  stage_profile& s = out.profile;
  const double product = unit_field(p->qk_product_u, "qk_product_u", spec, true);
  s.exact_products = product == ATTNCHECK_EXACT;
  s.qk_product_u = s.exact_products ? 0 : product;
  s.qk_accum_u = unit_field(p->qk_accum_u, "qk_accum_u", spec);
  s.rescale_u = unit_field(p->rescale_u, "rescale_u", spec);
  s.pv_accum_u = unit_field(p->pv_accum_u, "pv_accum_u", spec);
  s.lse_u = unit_field(p->lse_u, "lse_u", spec);
  if (p->scale_mode > ATTNCHECK_SCALE_LOG2E_FOLDED)
    refuse("scale_mode", spec, "scale_mode " + std::to_string(p->scale_mode) + " is none of ATTNCHECK_SCALE_* (0 to 5)");
  s.scale = static_cast<scale_mode>(p->scale_mode);
  if (p->exp_ulps == ATTNCHECK_EXACT)
    out.exp_ulps = 0.5;
  else if (p->exp_ulps != 0) {
    if (!(p->exp_ulps > 0 && p->exp_ulps <= ATTNCHECK_MAX_EXP_ULPS))
      refuse("exp_ulps", spec,
             "exp_ulps = " + std::to_string(p->exp_ulps) + " must be 0 (inherit), ATTNCHECK_EXACT or lie in (0, " +
                 std::to_string(static_cast<long long>(ATTNCHECK_MAX_EXP_ULPS)) + "]");
    out.exp_ulps = p->exp_ulps;
  }
  // P's format: its unit, smallest subnormal and largest exponent.
  dtype p_type = dtype::f32;
  switch (p->p_format) {
    case ATTNCHECK_P_COMPUTE: break;
    case ATTNCHECK_P_F32: p_type = dtype::f32; break;
    case ATTNCHECK_P_BF16: p_type = dtype::bf16; break;
    case ATTNCHECK_P_F16: p_type = dtype::f16; break;
    // fp8 P (FlashAttention 3's e4m3 P V): a stage of the profile, with or without fp8 inputs.
    case ATTNCHECK_P_E4M3: p_type = dtype::e4m3; break;
    case ATTNCHECK_P_E5M2: p_type = dtype::e5m2; break;
    default: refuse("p_format", spec, "p_format " + std::to_string(p->p_format) + " is none of ATTNCHECK_P_* (0 to 5)");
  }
  const bool rounded = p->p_format != ATTNCHECK_P_COMPUTE;
  if (rounded) {
    s.p_u = unit_roundoff(p_type);
    s.p_eta = smallest_subnormal(p_type);
  }
  // A saturating cast: with a power-of-two factor no weight (at most 1, times the
  // factor below) reaches the format's largest value, so saturating or not is the same.
  const bool fp8_p = p->p_format == ATTNCHECK_P_E4M3 || p->p_format == ATTNCHECK_P_E5M2;
  if (p->p_saturates > 1) refuse("p_saturates", spec, "p_saturates " + std::to_string(p->p_saturates) + " is 0 or 1");
  if (p->p_saturates != 0 && !fp8_p) refuse("p_saturates", spec, "p_saturates is for fp8 P formats only: 0");
  if (p->row_sum > ATTNCHECK_ROW_SUM_AFTER_CAST)
    refuse("row_sum", spec, "row_sum " + std::to_string(p->row_sum) + " is none of ATTNCHECK_ROW_SUM_* (0, 1)");
  if (p->row_sum == ATTNCHECK_ROW_SUM_AFTER_CAST && !rounded)
    refuse("row_sum", spec, "ATTNCHECK_ROW_SUM_AFTER_CAST needs a p_format that rounds P");
  s.row_sum_after_cast = p->row_sum == ATTNCHECK_ROW_SUM_AFTER_CAST;
  switch (p->p_factor) {
    case ATTNCHECK_P_FACTOR_NONE:
      if (p->p_factor_log2 != 0) refuse("p_factor_log2", spec, "p_factor_log2 needs p_factor ATTNCHECK_P_FACTOR_POW2");
      break;
    case ATTNCHECK_P_FACTOR_POW2: {
      // The largest weight times the factor must stay below the format's largest finite value.
      const int top = std::ilogb(largest_finite(p_type));
      if (!rounded) refuse("p_factor", spec, "a pre-cast factor needs a p_format that rounds P");
      if (p->p_factor_log2 < -64 || p->p_factor_log2 > top - 1)
        refuse("p_factor_log2", spec,
               "p_factor_log2 = " + std::to_string(p->p_factor_log2) + " must lie in [-64, " + std::to_string(top - 1) +
                   "] for this P format");
      s.p_factor_log2 = p->p_factor_log2;
      break;
    }
    case ATTNCHECK_P_FACTOR_ROW:
      refuse("p_factor", spec, "a per-row factor (fp8's) is not judged by this attncheck yet: ATTNCHECK_P_FACTOR_NONE or _POW2");
    default: refuse("p_factor", spec, "p_factor " + std::to_string(p->p_factor) + " is none of ATTNCHECK_P_FACTOR_* (0 to 2)");
  }
  return out;
}

std::string profile_text(const stage_profile& s, double u) {
  if (s.is_default()) return "";
  // Only the stages that differ from u: the rest is the declared u.
  std::string t;
  const auto add = [&](const std::string& what) { t += (t.empty() ? "" : ", ") + what; };
  const auto unit = [&](const char* stage, double x) {
    if (x != 0 && x != u) add(std::string(stage) + " " + power_text(x));
  };
  if (s.exact_products) add("products exact");
  unit("products", s.qk_product_u);
  unit("dot", s.qk_accum_u);
  static constexpr const char* scale_names[] = {"any way", "after the dot", "into Q", "into K", "sqrt split", "log2 e folded"};
  if (s.scale != scale_mode::any) add(std::string("scale ") + scale_names[static_cast<int>(s.scale)]);
  unit("rescale", s.rescale_u);
  if (s.p_u != 0)
    add("P " + power_text(s.p_u) + (s.p_factor_log2 ? " times 2^" + std::to_string(s.p_factor_log2) : "") +
        (s.row_sum_after_cast ? " (row sum after the cast)" : " (row sum before the cast)"));
  unit("P V", s.pv_accum_u);
  unit("LSE", s.lse_u);
  return t.empty() ? "every stage at u" : t;
}

declared_conventions read_conventions(const attncheck_conventions* c, const std::string& spec) {
  declared_conventions d;
  if (!c) return d;
  const auto refuse_field = [&](const char* field, const std::string& why) {
    throw input_error(std::string("subject.conventions.") + field, spec + ": " + why);
  };
  if (c->struct_size < sizeof(attncheck_conventions))
    refuse_field("struct_size", "the conventions' struct_size " + std::to_string(c->struct_size) +
                                    " is under its first version's size " + std::to_string(sizeof(attncheck_conventions)));
  if (c->empty_row_o > ATTNCHECK_EMPTY_O_UNSPECIFIED)
    refuse_field("empty_row_o", "empty_row_o " + std::to_string(c->empty_row_o) + " is none of ATTNCHECK_EMPTY_O_* (0 to 2)");
  if (c->empty_row_lse > ATTNCHECK_EMPTY_LSE_UNSPECIFIED)
    refuse_field("empty_row_lse",
                 "empty_row_lse " + std::to_string(c->empty_row_lse) + " is none of ATTNCHECK_EMPTY_LSE_* (0 to 3)");
  if (c->masked_slots > ATTNCHECK_MASKED_WEIGHTED_BY_ZERO)
    refuse_field("masked_slots", "masked_slots " + std::to_string(c->masked_slots) + " is none of ATTNCHECK_MASKED_* (0 or 1)");
  constexpr std::uint32_t flush_bits = ATTNCHECK_FLUSH_INPUTS | ATTNCHECK_FLUSH_INTERMEDIATES | ATTNCHECK_FLUSH_OUTPUTS;
  if (c->flush & ~flush_bits)
    refuse_field("flush", "flush " + std::to_string(c->flush) + " has bits outside ATTNCHECK_FLUSH_* (0x1, 0x2, 0x4)");
  d.empty_rows.o = static_cast<empty_row_convention::o_kind>(c->empty_row_o);
  d.empty_rows.lse = static_cast<empty_row_convention::lse_kind>(c->empty_row_lse);
  d.masked_weighted_by_zero = c->masked_slots == ATTNCHECK_MASKED_WEIGHTED_BY_ZERO;
  d.flush = c->flush;
  return d;
}

std::string conventions_text(const declared_conventions& d) {
  static constexpr const char* o_names[] = {"0", "NaN", "unspecified"};
  static constexpr const char* lse_names[] = {"-inf", "+inf", "0", "unspecified"};
  const empty_row_convention& e = d.empty_rows;
  std::string t = e.is_default() ? ""
                                 : std::string("empty rows: O ") + o_names[static_cast<int>(e.o)] + ", LSE " +
                                       lse_names[static_cast<int>(e.lse)];
  if (d.masked_weighted_by_zero) t += (t.empty() ? "" : "; ") + std::string("masked slots weighted by zero");
  if (d.flush) {
    std::string stages;
    for (const auto& [bit, stage] :
         {std::pair{ATTNCHECK_FLUSH_INPUTS, "inputs"}, std::pair{ATTNCHECK_FLUSH_INTERMEDIATES, "intermediates"},
          std::pair{ATTNCHECK_FLUSH_OUTPUTS, "outputs"}})
      if (d.flush & bit) stages += (stages.empty() ? "" : ", ") + std::string(stage);
    t += std::string(t.empty() ? "" : "; ") + "subnormals flushed (" + stages + ")";
  }
  return t;
}

}  // namespace attncheck
