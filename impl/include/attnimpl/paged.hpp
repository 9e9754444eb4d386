// The paged and ragged input forms (docs/spec.md "Paged KV", "Ragged
// batches"): K and V in page arenas reached through a caller's block table,
// and packed (varlen) sequences located by cu_seqlens offsets. Both are ways
// to hand over a dense problem: they run the engine of attention() and give
// the dense form's bits for the same config (tests/impl/paged_test.cpp).
#pragma once

#include <cstdint>
#include <optional>

#include "attnimpl/attention.hpp"

namespace attnimpl {

/// K and V in page arenas through a block table. Logical key j < n[b] of
/// sequence b is slot j % page_size of page table[b * table_stride + j /
/// page_size]: K[b, j, g, d] = k_pages[page, slot, g, d] (element strides
/// over (page, slot, head, dim), any values), V likewise. Only the first
/// ceil(n[b] / page_size) entries of a row and the slots below n[b] are ever
/// read; the rest of the table and the arenas may hold anything (-1, numbers
/// out of range, NaN). Pages may be shared between rows; nothing is written.
struct paged_kv {
  std::int64_t page_size = 16;          ///< P, in [1, 2^20]
  std::int64_t num_pages = 0;           ///< pages in each arena; valid entries lie in [0, num_pages)
  tensor_in k_pages;                    ///< (num_pages, P, hkv, d); k_pages.type == v_pages.type
  tensor_in v_pages;                    ///< (num_pages, P, hkv, dv)
  const std::int32_t* table = nullptr;  ///< b rows of max_pages entries
  std::int64_t table_stride = 0;        ///< entries between rows, >= max_pages
  std::int64_t max_pages = 0;           ///< entries per row, >= ceil(n[b] / P) for every b
};

/// attention() with K and V paged: dims.lk bounds the lengths (every
/// key_len[b] in [0, lk]); key_len is required. Everything else (causal,
/// mask, variants, LSE) as attention_args, with j the logical key.
struct paged_attention_args {
  shape dims;
  tensor_in q;
  paged_kv kv;
  tensor_out o;
  lse_out lse;                 ///< optional
  std::optional<float> scale;  ///< nullopt: default_scale(d)
  bool causal = false;
  const std::int64_t* key_len = nullptr;  ///< required, b entries: n[b]
  mask_in mask;                           ///< optional
  variants var;                           ///< optional
};

/// Computes the paged problem: the bits of attention() on the dense K and V
/// the table describes, for the same config. invalid_argument (naming the
/// field and its limit, writing nothing) for what attention() refuses and for
/// a page size, table width or stride, or valid table entry out of range.
status paged_attention(const paged_attention_args& args, const config& cfg = {});

/// Packed sequences: query i of sequence b is row cu_seqlens_q[b] + i of Q
/// and O (along stride[1]; stride[0] unused) and of LSE (along stride[2];
/// stride[0] unused); key j is row cu_seqlens_k[b] + j of K and V, or, with
/// paged, the paged key j of table row b with n[b] = key_len[b]. Each
/// sequence is its own problem: sequence b gives the bits of attention()
/// with batch 1, lq[b] queries and n[b] keys (positions p = n[b] - lq[b] +
/// i). dims.b is the number of sequences; dims.lq and dims.lk bound lq[b]
/// and n[b] (and size the query and key dims of a mask or bias, indexed by
/// (b, h, i, j) within the sequence). Zero-length sequences are legal on
/// either side; only valid output rows are written.
struct ragged_attention_args {
  shape dims;
  const std::int64_t* cu_seqlens_q = nullptr;  ///< b + 1 offsets, 0 = cu[0] <= cu[1] <= ...
  const std::int64_t* cu_seqlens_k = nullptr;  ///< b + 1 offsets; null with paged
  tensor_in q, k, v;                           ///< k and v unused with paged
  const paged_kv* paged = nullptr;             ///< optional: K and V through a block table
  const std::int64_t* key_len = nullptr;       ///< n[b], with paged only
  tensor_out o;
  lse_out lse;  ///< optional
  std::optional<float> scale;
  bool causal = false;
  mask_in mask;
  variants var;
};

/// Computes every sequence of the packed batch. invalid_argument (naming the
/// field and its limit, writing nothing) for bad offsets, lengths past
/// dims.lq or dims.lk, and what attention() or paged_attention() refuse.
status ragged_attention(const ragged_attention_args& args, const config& cfg = {});

}  // namespace attnimpl
