// A version 4 subject's static limits (docs/abi.md "Static limits"), as the
// host reads them: checked at load, fitted into by the generators (so that a
// declared limit costs no draws), and enforced on every call (a case outside
// them is declined on the subject's behalf, never handed to it).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "attncheck/case.hpp"
#include "attncheck/subject.h"

namespace attncheck {

/// Every declines key of a case outside the declared limits starts so
/// ("limit max_head_dim"): the host writes it (static_limits::outside), the
/// reports count such declines apart, and a subject's own reason is never
/// counted under it (case_declined::key).
inline constexpr std::string_view limit_key_prefix = "limit ";
/// True for the key of a case the host declined on the subject's behalf.
bool is_limit_decline(std::string_view key);

struct static_limits {
  std::int64_t max_head_dim = 0;        ///< D and Dv at most this; 0: none
  std::int64_t head_dim_multiple = 0;   ///< D and Dv multiples of this; 0 or 1: none
  std::vector<std::int64_t> head_dims;  ///< only these D and Dv; empty: any
  bool dv_equals_d = false;
  bool causal_lq_at_most_lk = false;
  std::int64_t min_lk = 0;              ///< 0: 1
  std::int64_t max_group = 0;           ///< 0: any
  std::uint32_t scale_signs = 0;        ///< ATTNCHECK_SCALE_SIGN_* bits; 0: all
  std::uint32_t bias_dtypes = 0;        ///< bits (1u << ATTNCHECK_F32 etc.) of the bias storage types; 0: all
  double alibi_max_bias = 0;            ///< ALiBi slopes only from this max_bias's rule (alibi_kind::standard); 0: any
  std::int64_t alibi_max_distance = 0;  ///< with ALiBi, max(Lk, Lq) - 1 at most; 0: any

  /// True when no limit is declared (the contract's whole domain).
  bool none() const;
  /// Whether a head size d is inside the limits.
  bool takes_head_dim(std::int64_t d) const;
  /// Empty when c is inside the limits; otherwise "limit NAME: what" (the
  /// text before ':' is the key its declines are counted under).
  std::string outside(const attn_case& c) const;
  /// Moves the shape into the limits: D and Dv to the nearest head size taken,
  /// Dv = D, Lk up to min_lk, the group down to max_group, and for a case that
  /// will carry ALiBi (`alibi`) Lk and Lq down to alibi_max_distance + 1.
  /// Called before the masks are drawn, which depend on Lk and Lq.
  void fit_shape(attn_case& c, bool alibi = false) const;
  /// A causal case's Lq down to Lk, once causal is drawn (before the masks,
  /// whose shape depends on Lq).
  void fit_causal(attn_case& c) const;
  /// The scale to a sign taken: its magnitude kept; a zero scale becomes the
  /// default's magnitude when zero is not taken.
  void fit_scale(attn_case& c) const;
  /// The variants into the limits, once drawn: a bias to the next storage
  /// type taken (bias_type_taken), ALiBi to the declared max_bias's slopes.
  void fit_variants(attn_case& c) const;
  /// `want` if the bias may be stored in it, else the next type taken (f32,
  /// f16, bf16, cyclically): what a law that builds a bias stores it in.
  dtype bias_type_taken(dtype want) const;
  /// Whether the ALiBi slopes of these variants are taken: any without a
  /// declared rule; with one, none or the rule's at the declared max_bias.
  bool takes_alibi(const score_variants& w) const {
    return alibi_max_bias == 0 || w.alibi == alibi_kind::none ||
           (w.alibi == alibi_kind::standard && w.alibi_max_bias == alibi_max_bias);
  }
  /// The limits in words ("D <= 64, D multiple of 8, Lk >= 2, scale > 0");
  /// empty when none is declared.
  std::string text() const;
};

/// Reads a version 4 instance's limits (NULL: none). Throws input_error naming
/// "subject.limits.FIELD" for a value out of range, for an inconsistent set
/// (a listed head size above max_head_dim) and for the limits this attncheck
/// does not judge yet (ALiBi slope lists, a max_bias other than 8).
static_limits read_limits(const attncheck_limits* l, const std::string& spec);

}  // namespace attncheck
