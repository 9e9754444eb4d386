// A paged KV cache for incremental decode. Keys and values live in fixed-size
// pages drawn from a pool in any order; a block table per sequence maps
// logical pages to physical ones. attend() runs the same engine as
// attention(), so a token gives the same bits whether it was processed in a
// prefill, in a chunk or one at a time (for a fixed config.k_tile/split_keys).
// Inside a page each KV head's part is contiguous: K stored (dim, slot), keys
// across, so decode reads 8 keys' element d in one load; V stored (slot, dim).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "attnimpl/attention.hpp"

namespace attnimpl {

namespace detail {
/// Page-pool storage: cache-line aligned (a run of 8 keys never straddles two
/// lines); pools of 4 MiB and more are 2 MiB aligned and asked for huge
/// pages (Linux), so that a decode step's page walk rarely misses the TLB.
void* pool_allocate(std::size_t bytes);
void pool_free(void* p, std::size_t bytes) noexcept;

template <class T>
struct pool_allocator {
  using value_type = T;
  pool_allocator() = default;
  template <class U>
  pool_allocator(const pool_allocator<U>&) {}
  T* allocate(std::size_t n) { return static_cast<T*>(pool_allocate(n * sizeof(T))); }
  void deallocate(T* p, std::size_t n) noexcept { pool_free(p, n * sizeof(T)); }
  friend bool operator==(const pool_allocator&, const pool_allocator&) { return true; }
};
}  // namespace detail

struct kv_cache_config {
  std::int64_t batch = 1;  ///< sequences
  std::int64_t hkv = 1, d = 1, dv = 1;
  dtype type = dtype::f32;             ///< storage type of cached K and V
  std::int64_t page_size = 16;         ///< tokens per page, >= 1; need not divide any tile
  std::int64_t pages = 0;              ///< pages in the pool
  std::int64_t max_pages_per_seq = 0;  ///< width of the block table; 0: pages
};

/// New tokens of one sequence: K (count, hkv, d), V (count, hkv, dv), element
/// strides over (token, head, dim), in the cache's dtype (copied bit for bit).
struct kv_tokens {
  const void* k = nullptr;
  std::array<std::int64_t, 3> k_stride{};
  const void* v = nullptr;
  std::array<std::int64_t, 3> v_stride{};
};

/// Queries of the newest lq tokens of every sequence, attending to the cache.
/// Q (batch, lq, hq, d), O (batch, lq, hq, dv); query i of sequence b sits at
/// position length(b) - lq + i (bottom-right causal when causal is set).
struct cache_attention_args {
  std::int64_t hq = 1, lq = 1;
  tensor_in q;
  tensor_out o;
  lse_out lse;                 ///< optional
  std::optional<float> scale;  ///< nullopt: default_scale(d)
  bool causal = true;
  mask_in mask;  ///< optional, over (b, h, i, j), j the absolute key position
  variants var;  ///< optional (contract 1.1); bias over (b, h, i, j), j absolute
};

class paged_kv_cache {
 public:
  /// Checks cfg and page_order (a permutation of [0, pages), or empty for
  /// 0, 1, 2, ...: the order in which free pages are handed out).
  static status create(const kv_cache_config& cfg, std::vector<std::int32_t> page_order, std::optional<paged_kv_cache>& out);

  const kv_cache_config& config_used() const { return cfg_; }
  std::int64_t length(std::int64_t seq) const { return lengths_[static_cast<std::size_t>(seq)]; }
  const std::vector<std::int64_t>& lengths() const { return lengths_; }
  /// Physical page of logical page p of sequence seq; -1 when unassigned.
  std::int32_t page(std::int64_t seq, std::int64_t p) const {
    return table_[static_cast<std::size_t>(seq * cfg_.max_pages_per_seq + p)];
  }

  /// Appends count tokens (count >= 0) to sequence seq at positions
  /// length(seq) .. length(seq) + count - 1. Fails (changing nothing) when
  /// the pool or the block table would overflow.
  status append(std::int64_t seq, std::int64_t count, const kv_tokens& tokens);

  /// Attention of the new queries over every cached key (the new tokens
  /// already appended). Shares the engine with attention().
  status attend(const cache_attention_args& args, const config& cfg = {}) const;

 private:
  paged_kv_cache() = default;

  kv_cache_config cfg_;
  std::vector<unsigned char, detail::pool_allocator<unsigned char>> k_pool_, v_pool_;
  std::vector<std::int32_t> table_;  // batch x max_pages_per_seq
  std::vector<std::int32_t> free_;   // pages still free, handed out from the back
  std::vector<std::int64_t> lengths_;
};

}  // namespace attnimpl
