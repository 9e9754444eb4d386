// Loads a subject (built in or a plugin) and calls it on cases, with guard
// bands around every buffer it may write.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attncheck/case.hpp"
#include "attncheck/subject.h"

namespace attncheck {

/// What one call of a subject produced.
struct subject_output {
  int status = 0;            ///< the subject's return code (0 = ok)
  std::string error;         ///< its message when status != 0, or a host finding
  tensor o;                  ///< output in the case's layout (gaps poisoned)
  std::vector<float> lse;    ///< (B, Hq, Lq) dense; empty when the subject has no LSE
  bool guard_violated = false;  ///< wrote outside O or LSE
  std::string guard_report;  ///< where, when guard_violated

  bool ok() const { return status == 0 && !guard_violated; }
  /// Value of O[b,i,h,e] decoded exactly.
  double o_at(std::int64_t bi, std::int64_t i, std::int64_t h, std::int64_t e) const { return o.at(bi, i, h, e); }
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

class subject {
 public:
  /// "builtin" (the bundled kernel at production tiles), "builtin:q_tile=2,k_tile=3,split_keys=6"
  /// (tiny tiles, so tile edges show on small shapes), "naive" (the in-tree naive f32 kernel),
  /// or a path to a plugin exporting attncheck_subject_v1. Throws input_error
  /// naming "subject" when it cannot be loaded or its ABI version differs.
  static std::shared_ptr<subject> load(const std::string& spec);
  /// Wraps a descriptor that lives in this process (no dlopen).
  static std::shared_ptr<subject> wrap(const attncheck_subject* desc, std::string spec);

  ~subject();
  subject(const subject&) = delete;
  subject& operator=(const subject&) = delete;

  const attncheck_subject& desc() const { return *desc_; }
  const std::string& spec() const { return spec_; }
  std::string name() const { return desc_->name ? desc_->name : spec_; }

  /// Empty when the subject can take this case; otherwise why not (dtype,
  /// mask kind, ...), which makes a law report "skipped".
  std::string cannot_take(const attn_case& c, bool want_lse = false) const;
  bool has(std::uint32_t feature) const { return (desc_->features & feature) != 0; }
  bool claims(std::uint32_t invariance) const { return (desc_->invariances & invariance) != 0; }
  bool has_lse() const { return has(ATTNCHECK_FEATURE_LSE); }

  /// nb for the bound on this case.
  std::int64_t key_blocks(const attn_case& c) const;

  /// Runs attend on a materialized case. threads: 0 = subject default.
  subject_output attend(const attn_case& c, int threads = 0) const;

  /// Runs the case through the cache: one sequence per batch element holding
  /// keys 0..n[b]-1, filled and queried chunk by chunk as the plan says. The
  /// outputs of the steps are stacked into one O of shape (B, sum lq, Hq, Dv)
  /// (LSE likewise). Its key_len gives n[b]; the plan's appends sum to at most
  /// n[b] per sequence. Q rows are bottom-right aligned as in the one-shot
  /// call: row pos - n[b] + Lq of the case is the query at position pos.
  subject_output attend_cached(const attn_case& c, const cache_plan& plan, int threads = 0) const;

 private:
  subject(const attncheck_subject* desc, void* handle, std::string spec);
  const attncheck_subject* desc_;
  void* handle_;
  std::string spec_;
};

/// The bundled implementation's descriptor (properties/subjects/builtin).
const attncheck_subject* builtin_subject();
/// Tile sizes of the bundled implementation for this process (0 = production default).
void configure_builtin(std::int64_t q_tile, std::int64_t k_tile, std::int64_t split_keys);
/// The in-tree naive f32 kernel's descriptor (properties/subjects/naive).
const attncheck_subject* naive_subject();

}  // namespace attncheck
