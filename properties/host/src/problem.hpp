// The problem a call hands a subject, built from a case: the header
// (fill_problem), the contract 1.1 variants (variant_parts) and the case's
// inputs between guard bands (case_inputs). What a subject can be handed at
// all is subject::cannot_take, in problem.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "attncheck/case.hpp"
#include "attncheck/subject.h"
#include "guarded.hpp"

namespace attncheck::host {

attncheck_dtype to_abi(dtype t);

/// The case's header in p: dtype, sizes, scale, causal, threads.
void fill_problem(attncheck_problem& p, const attn_case& c, int threads);

// The contract 1.1 variants of a case as a version 3 problem carries them
// (subject.h, attncheck_variants): sinks and slopes point into the case, the
// bias is packed in its storage type with zero strides on broadcast dims.
struct variant_parts {
  attncheck_variants v{};
  std::vector<unsigned char> bias;
  bool any = false;  // the case has a variant

  explicit variant_parts(const attn_case& c);
  /// What p.variants gets: none for a case without variants (cannot_take()
  /// keeps variants from older subjects).
  const attncheck_variants* handed() const { return any ? &v : nullptr; }
};

// The fp8 storage of a case as a version 4 problem carries it (subject.h,
// attncheck_quant): the types, the granularities and the descales, which
// point into the case.
struct quant_parts {
  attncheck_quant q{};
  bool any = false;  // the case holds an fp8 input

  explicit quant_parts(const attn_case& c);
  /// What p.quant gets: none for a case without fp8 (cannot_take() keeps
  /// fp8 from subjects that did not declare it).
  const attncheck_quant* handed() const { return any ? &q : nullptr; }
};

// The case's inputs as every call hands them: Q, K and V between guard bands,
// the valid-key counts when keys are padded, the mask with zero strides on
// its broadcast dims, and the variants.
struct case_inputs {
  guarded_bytes q, k, v;
  std::vector<std::int64_t> key_len;
  variant_parts parts;
  quant_parts quant;

  explicit case_inputs(const attn_case& c) : q(c.q), k(c.k), v(c.v), key_len(c.key_len), parts(c), quant(c) {}
  /// Fills p: the case's header (fill_problem) and these inputs.
  void hand_over(attncheck_problem& p, const attn_case& c, int threads);
};

}  // namespace attncheck::host
