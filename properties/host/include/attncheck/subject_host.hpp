// Loads a subject (built in or a plugin) and calls it on cases, with guard
// bands around every buffer it may write.
#pragma once

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "attncheck/case.hpp"
#include "attncheck/oracle.hpp"
#include "attncheck/subject.h"
#include "attncheck/static_limits.hpp"

namespace attncheck {

/// Thrown by a call (attend, attend_cached, backward) of a version 4 subject
/// that returned ATTNCHECK_DECLINED and left its outputs unwritten: the case
/// is outside what the subject computes (docs/abi.md "Return status:
/// declined"). The law runner counts it and draws another case; a decline is
/// never a failure (unless --strict-declines). A declined call that wrote its
/// outputs is not thrown: it comes back as a failed call.
struct case_declined : std::runtime_error {
  std::string reason;  ///< the subject's message
  /// True when the host declined it for the subject: the case is outside the
  /// declared static limits, so even --strict-declines never fails it.
  bool by_limit = false;
  explicit case_declined(std::string why, bool limit = false);
  /// The reason's key, as declines are counted: the text up to the first ':',
  /// trimmed and cut to 80 characters ("(no reason given)" when empty).
  std::string key() const;
};

/// What a subject declares it writes in a row that sees no key and has no
/// sink (docs/abi.md "Conventions"); the default is the contract's, O = 0
/// and LSE = -inf. `unspecified` excuses the value: the host reads it as the
/// contract's (unspecified_read_as_contract), and the comparisons judge nothing there.
struct empty_row_convention {
  enum class o_kind : std::uint8_t { zero, nan, unspecified } o = o_kind::zero;
  enum class lse_kind : std::uint8_t { minus_inf, plus_inf, zero, unspecified } lse = lse_kind::minus_inf;
  bool is_default() const { return o == o_kind::zero && lse == lse_kind::minus_inf; }
  bool any_unspecified() const { return o == o_kind::unspecified || lse == lse_kind::unspecified; }
};

/// True when row (bi, h, i) of c gives no key and no sink any weight: no key
/// is visible or every visible score is exactly -inf, and the head has no
/// finite sink. The oracle's LSE there is -inf (or NaN, where an infinite Q
/// or K element makes every score -inf), and the row holds the empty-row
/// convention's values.
bool row_has_no_mass(const attn_case& c, std::int64_t bi, std::int64_t h, std::int64_t i);

/// True when every visible score of row (b, h, i) is exactly -inf (an
/// infinite Q or K element): the row is empty once those keys drop out. False
/// for a row with no visible key.
bool every_visible_score_is_minus_inf(const attn_case& c, std::int64_t b, std::int64_t h, std::int64_t i);

/// What one call of a subject produced.

struct subject_output {
  int status = 0;               ///< the subject's return code (0 = ok)
  std::string error;            ///< its message when status != 0, or a host finding
  tensor o;                     ///< output in the case's layout (gaps poisoned)
  std::vector<float> lse;       ///< (B, Hq, Lq) dense; empty when the subject has no LSE
  bool guard_violated = false;  ///< wrote outside O or LSE
  std::string guard_report;     ///< where, when guard_violated
  /// The subject's declared empty rows: the comparisons judge such rows by it.
  empty_row_convention empty_rows{};

  bool ok() const { return status == 0 && !guard_violated; }
  /// Value of O[b,i,h,e] decoded exactly.
  double o_at(std::int64_t bi, std::int64_t i, std::int64_t h, std::int64_t e) const { return o.at(bi, i, h, e); }
};

/// A subject that declares an empty row's O or LSE unspecified: the host
/// reads that value of each row with no mass (row_has_no_mass) as the
/// contract's, O = 0 or LSE = -inf, so that a relation between two runs
/// holds there; the comparisons judge nothing in such a row
/// (comparison::empty_row_o). A dense output only: the cache law judges its
/// rows itself.
void read_unspecified_as_contract(const attn_case& c, subject_output& out);

/// What one backward call of a subject produced (subject::backward): dQ, dK
/// and dV in the case's layout (the shapes of Q, K and V), every element the
/// subject did not write still holding the host's poison (a quiet NaN).
struct backward_output {
  int status = 0;     ///< the subject's return code (0 = ok)
  std::string error;  ///< its message when status != 0
  tensor dq, dk, dv;
  std::vector<float> d_sinks;   ///< Hq entries when the case has sinks (unwritten: NaN), else empty
  bool guard_violated = false;  ///< wrote outside dQ, dK, dV or d_sinks' views
  std::string guard_report;     ///< where, when guard_violated

  bool ok() const { return status == 0 && !guard_violated; }
};

/// The forward results a backward call is handed (docs/abi.md "The backward
/// problem"): O in the case's storage type and layout, LSE (B, Hq, Lq) dense
/// f32, and dO (B, Lq, Hq, Dv) in the case's storage type.
struct backward_inputs {
  tensor o;
  std::vector<float> lse;
  tensor d_o;
};

/// One chunk of a chunked run through a subject's cache: how many tokens of
/// each sequence to append before attending with `lq` queries.
struct cache_step {
  std::int64_t lq = 1;
  std::vector<std::int64_t> append;  ///< per batch element
};

struct cache_plan {
  std::int64_t page_size = 16;
  std::vector<std::int64_t> page_order;  ///< empty: subject's own order
  std::vector<cache_step> steps;
};

/// How the host hands one call's buffers to the subject; the layout law
/// varies what docs/spec.md leaves free.
struct call_layout {
  int threads = 0;             ///< 0: the subject's default
  bool lse_strided = false;    ///< LSE with non-dense strides: (B, Lq, Hq) order with gaps
  bool mask_expanded = false;  ///< the boolean mask written out in full, keys outer, queries inner, padded
};

/// The tolerance a subject declares for itself, as the gate prints it.
struct declared_numbers {
  double u = 0, exp_ulps = 0;
  double tanh_ulps = 0;                                      ///< ABI v3 with FEATURE3_SOFTCAP: c_tanh; 0 otherwise
  std::uint32_t features_v3 = 0;                             ///< ABI v3 feature bits (ATTNCHECK_FEATURE3_*)
  std::uint32_t features_v4 = 0;                             ///< ABI v4 feature bits (ATTNCHECK_FEATURE4_*)
  std::vector<std::pair<std::int64_t, std::int64_t>> nb_at;  ///< (Lk, nb) samples
  std::string profile;      ///< the stage-wise profile in words (profile_text); empty: one u for every stage
  std::string conventions;  ///< the declared conventions in words (conventions_text); empty: the contract's
  std::string limits;       ///< the declared static limits in words (static_limits::text); empty: none
};

class subject {
 public:
  /// One grammar for every subject: NAME|PATH[:key=value,...].
  ///   NAME[:options]               a kind of the subject registry (subject_registry.hpp); the
  ///                                bundled ones (builtin, naive, python:...) are listed in
  ///                                properties/subjects/include/attncheck/bundled_subjects.hpp
  ///   path/to/plugin.so[:options]  a plugin; ABI v2 gets the options, ABI v1 takes none
  /// Each call makes an independent instance. Throws input_error naming
  /// "subject" when it cannot be loaded, refuses its options or declares
  /// absurd numbers (u outside [ATTNCHECK_MIN_UNIT_ROUNDOFF, ATTNCHECK_MAX_UNIT_ROUNDOFF],
  /// exp_ulps outside [0, ATTNCHECK_MAX_EXP_ULPS]: subject.h).
  static std::shared_ptr<subject> load(const std::string& spec);
  /// Calls a version 2 entry point with an option string and adopts what it
  /// returns; a refusal throws input_error "'spec': who refused the options ...".
  static std::shared_ptr<subject> make_v2(attncheck_subject_entry_v2 entry, const std::string& options, const std::string& spec,
                                          const std::string& who);
  /// Wraps a version 1 descriptor that lives in this process (no dlopen).
  static std::shared_ptr<subject> wrap(const attncheck_subject* desc, std::string spec);
  /// Takes ownership of a version 2 instance (destroyed with the subject).
  static std::shared_ptr<subject> adopt(attncheck_instance* inst, std::string spec);

  ~subject();
  subject(const subject&) = delete;
  subject& operator=(const subject&) = delete;

  const attncheck_instance& desc() const { return *inst_; }
  const std::string& spec() const { return spec_; }
  std::string name() const { return inst_->name ? inst_->name : spec_; }
  /// 1 to 4: the ABI the subject was built against.
  unsigned abi() const { return abi_; }
  /// ABI v3 feature and claim bits (0 for a version 1 or 2 subject, or a
  /// version 3 instance too short to hold them), and the declared tanh ulps.
  std::uint32_t features_v3() const { return features_v3_; }
  bool has_v3(std::uint32_t feature) const { return (features_v3_ & feature) != 0; }
  bool claims_v3(std::uint32_t invariance) const { return (invariances_v3_ & invariance) != 0; }
  /// True when the subject may decline a case (a version 4 instance: ATTNCHECK_DECLINED).
  bool may_decline() const { return abi_ >= 4; }
  /// Version 4 feature bits (ATTNCHECK_FEATURE4_*; 0 below version 4).
  std::uint32_t features_v4() const { return features_v4_; }
  bool has_v4(std::uint32_t feature) const { return (features_v4_ & feature) != 0; }
  /// Version 4 claims (ATTNCHECK_CLAIM4_*; docs/abi.md "Version 4").
  bool claims_v4(std::uint32_t invariance) const { return (invariances_v4_ & invariance) != 0; }
  double tanh_ulps() const { return tanh_ulps_; }
  /// The stage-wise precision profile a version 4 instance declares (the
  /// default: every stage at compute_unit_roundoff), and the exp accuracy the
  /// bound takes: the profile's where it sets one, else the instance's.
  const stage_profile& profile() const { return profile_; }
  double exp_ulps() const { return exp_ulps_ < 0 ? inst_->exp_ulps : exp_ulps_; }
  /// What it declares it writes in a row that sees no key (docs/abi.md "Conventions").
  const empty_row_convention& empty_rows() const { return empty_rows_; }
  /// True when it declares masked and padded slots read and weighted by zero
  /// (ATTNCHECK_MASKED_WEIGHTED_BY_ZERO): the host hands it finite values in
  /// every slot no visible pair uses (masked_fill.hpp), never NaN or inf.
  bool weights_masked_by_zero() const { return masked_by_zero_; }
  /// True when it declares the stage flushed (ATTNCHECK_FLUSH_INTERMEDIATES
  /// or _OUTPUTS): the bound widens its underflow terms (docs/bound.md
  /// "Flushed subnormals").
  bool flushes(std::uint32_t stage) const { return (flush_ & stage) != 0; }
  /// The static limits a version 4 instance declares (docs/abi.md "Static
  /// limits"; none for any other): the generators fit their draws into them,
  /// and every call of a case outside them is declined on the subject's
  /// behalf (case_declined with by_limit), never handed to it.
  const static_limits& limits() const { return limits_; }

  /// Empty when the subject can take this case; otherwise why not (dtype,
  /// mask kind, a contract 1.1 variant it did not declare, ...), which makes a
  /// law report "skipped".
  std::string cannot_take(const attn_case& c, bool want_lse = false) const;
  bool has(std::uint32_t feature) const { return (inst_->features & feature) != 0; }
  bool claims(std::uint32_t invariance) const { return (inst_->invariances & invariance) != 0; }
  bool has_lse() const { return has(ATTNCHECK_FEATURE_LSE); }

  /// nb for the bound on this case: the subject's declaration, at least 1 and
  /// capped at max(1, 2 Lk) (one rescale and one merge per key at most).
  std::int64_t key_blocks(const attn_case& c) const;
  /// The subject's size hints; a subject without any gets the common production values.
  const attncheck_size_hints& hints() const { return hints_; }
  /// True when the subject declared no size hints of its own.
  bool default_hints() const { return default_hints_; }
  /// The declared bound numbers, with nb sampled at a few lengths.
  declared_numbers declared() const;

  /// Runs attend on a materialized case. threads: 0 = subject default.
  subject_output attend(const attn_case& c, int threads = 0) const;
  /// The same with the buffers laid out as `how` says; the result is in the
  /// usual form (O in the case's layout, LSE dense).
  subject_output attend(const attn_case& c, const call_layout& how) const;

  /// True when the subject declares FEATURE3_BACKWARD (attend_backward is set).
  bool has_backward() const { return has_v3(ATTNCHECK_FEATURE3_BACKWARD); }
  /// True when its backward takes the variants it declares (FEATURE3_BACKWARD_VARIANTS), d(sink) included.
  bool has_backward_variants() const { return has_v3(ATTNCHECK_FEATURE3_BACKWARD_VARIANTS); }
  /// nb of the backward bound on this case (subject.h backward_blocks): dQ's
  /// key blocks, capped at max(1, 2 Lk), and the query blocks summed into one
  /// key's dK and dV, capped at max(1, 2 G Lq); 1 each without a declaration.
  std::pair<std::int64_t, std::int64_t> backward_blocks(const attn_case& c) const;
  /// Runs attend_backward on a materialized case with the forward results and
  /// dO in `in`: every output element is poisoned and each buffer has guard
  /// bands, as for attend(). A subject without backward gets status -1.
  backward_output backward(const attn_case& c, const backward_inputs& in, int threads = 0) const;

  /// Runs the case through the cache: one sequence per batch element holding
  /// keys 0..n[b]-1, filled and queried chunk by chunk as the plan says. The
  /// outputs of the steps are stacked into one O of shape (B, sum lq, Hq, Dv)
  /// (LSE likewise). Its key_len gives n[b]; the plan's appends sum to at most
  /// n[b] per sequence. Q rows are bottom-right aligned as in the one-shot
  /// call: row pos - n[b] + Lq of the case is the query at position pos.
  subject_output attend_cached(const attn_case& c, const cache_plan& plan, int threads = 0) const;

 private:
  subject(attncheck_instance* inst, void* handle, std::string spec, unsigned abi);
  /// After a call: a version 4 subject's ATTNCHECK_DECLINED throws
  /// case_declined when the call wrote nothing (`wrote` false); one that wrote
  /// keeps its status, a failure, and says so in `error`.
  void settle_decline(int status, std::string& error, bool wrote) const;
  /// Before a call: throws case_declined (by_limit) when c is outside the
  /// declared static limits.
  void decline_outside_limits(const attn_case& c) const;
  /// The case as this subject gets it: the case itself, or for a subject that
  /// weights masked slots by zero a copy in `filled` with finite unused slots.
  const attn_case& handed_case(const attn_case& c, std::optional<attn_case>& filled) const;
  attncheck_instance* inst_;
  void* handle_;
  std::string spec_;
  unsigned abi_;
  std::uint32_t features_v3_ = 0, invariances_v3_ = 0;
  std::uint32_t features_v4_ = 0, invariances_v4_ = 0;
  double tanh_ulps_ = 0;
  stage_profile profile_{};
  double exp_ulps_ = -1;  ///< -1: the instance's exp_ulps
  empty_row_convention empty_rows_{};
  bool masked_by_zero_ = false;
  std::uint32_t flush_ = 0;
  static_limits limits_{};
  attncheck_size_hints hints_{};
  bool default_hints_ = false;
};

}  // namespace attncheck
