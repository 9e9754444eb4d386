// Paged KV cache: page pool, block tables, append, and attend through
// paged_attention (the shared engine with a paged kv_source).
#include "attnimpl/kv_cache.hpp"

#include <algorithm>
#include <cstring>
#include <new>
#include <string>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "attnimpl/paged.hpp"
#include "convert.hpp"
#include "mutation.hpp"

namespace attnimpl {

namespace detail {
namespace {
constexpr std::size_t huge_page = std::size_t{2} << 20;
std::align_val_t pool_alignment(std::size_t bytes) { return std::align_val_t(bytes >= 2 * huge_page ? huge_page : 64); }
}  // namespace

void* pool_allocate(std::size_t bytes) {
  void* p = ::operator new(bytes, pool_alignment(bytes));
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (bytes >= 2 * huge_page) (void)madvise(p, bytes / huge_page * huge_page, MADV_HUGEPAGE);  // a hint: failure is harmless
#endif
  return p;
}

void pool_free(void* p, std::size_t bytes) noexcept { ::operator delete(p, pool_alignment(bytes)); }
}  // namespace detail

status paged_kv_cache::create(const kv_cache_config& cfg_in, std::vector<std::int32_t> page_order,
                              std::optional<paged_kv_cache>& out) {
  kv_cache_config cfg = cfg_in;
  if (cfg.max_pages_per_seq == 0) cfg.max_pages_per_seq = cfg.pages;
  if (cfg.batch < 1 || cfg.hkv < 1 || cfg.d < 1 || cfg.dv < 1) return status::invalid("batch, hkv, d and dv must be >= 1");
  if (cfg.d > 65536 || cfg.dv > 65536 || cfg.hkv > 65536) return status::invalid("hkv, d, dv must be <= 65536");
  if (cfg.page_size < 1 || cfg.page_size > (1 << 20)) return status::invalid("page_size must be in [1, 2^20]");
  if (cfg.pages < 0 || cfg.pages > (std::int64_t{1} << 30)) return status::invalid("pages must be in [0, 2^30]");
  if (cfg.max_pages_per_seq < 0 || cfg.max_pages_per_seq > cfg.pages)
    return status::invalid("max_pages_per_seq must be in [0, pages]");
  if (cfg.type != dtype::f32 && cfg.type != dtype::f16 && cfg.type != dtype::bf16) return status::invalid("unknown dtype");
  const std::int64_t esize = convert::size_of(cfg.type);
  const double bytes = static_cast<double>(cfg.pages) * static_cast<double>(cfg.page_size) * static_cast<double>(cfg.hkv) *
                       static_cast<double>(cfg.d + cfg.dv) * static_cast<double>(esize);
  if (bytes > static_cast<double>(std::int64_t{1} << 40)) return status::invalid("pool larger than 1 TiB");
  if (page_order.empty()) {
    for (std::int64_t p = 0; p < cfg.pages; ++p) page_order.push_back(static_cast<std::int32_t>(p));
  } else {
    if (static_cast<std::int64_t>(page_order.size()) != cfg.pages)
      return status::invalid("page_order must list every page exactly once");
    std::vector<char> seen(static_cast<std::size_t>(cfg.pages), 0);
    for (std::int32_t p : page_order) {
      if (p < 0 || p >= cfg.pages || seen[static_cast<std::size_t>(p)])
        return status::invalid("page_order must be a permutation of [0, pages)");
      seen[static_cast<std::size_t>(p)] = 1;
    }
  }
  paged_kv_cache c;
  c.cfg_ = cfg;
  c.k_pool_.assign(static_cast<std::size_t>(cfg.pages * cfg.page_size * cfg.hkv * cfg.d * esize), 0);
  c.v_pool_.assign(static_cast<std::size_t>(cfg.pages * cfg.page_size * cfg.hkv * cfg.dv * esize), 0);
  c.table_.assign(static_cast<std::size_t>(cfg.batch * cfg.max_pages_per_seq), -1);
  c.free_.assign(page_order.rbegin(), page_order.rend());  // back() is page_order[0]
  c.lengths_.assign(static_cast<std::size_t>(cfg.batch), 0);
  out = std::move(c);
  return status::success();
}

status paged_kv_cache::append(std::int64_t seq, std::int64_t count, const kv_tokens& t) {
  if (seq < 0 || seq >= cfg_.batch) return status::invalid("seq out of range");
  if (count < 0) return status::invalid("count must be >= 0");
  if (count == 0) return status::success();
  if (!t.k || !t.v) return status::invalid("k and v must not be null");
  const std::int64_t n = lengths_[static_cast<std::size_t>(seq)];
  const std::int64_t end = n + count;
  const std::int64_t shift = ATTNIMPL_MUTANT(cache_append_offset) ? 1 : 0;  // writes at n + 1
  const std::int64_t pages_needed = (end + cfg_.page_size - 1 + shift) / cfg_.page_size;
  if (pages_needed > cfg_.max_pages_per_seq) return status::invalid("sequence would exceed max_pages_per_seq");
  const std::int64_t have = (n + cfg_.page_size - 1) / cfg_.page_size;
  if (pages_needed - have > static_cast<std::int64_t>(free_.size())) return status::invalid("page pool exhausted");
  std::int32_t* row = table_.data() + seq * cfg_.max_pages_per_seq;
  for (std::int64_t p = have; p < pages_needed; ++p) {
    row[p] = free_.back();
    free_.pop_back();
  }
  const std::int64_t esize = convert::size_of(cfg_.type);
  // Page layout, one head's part of a page contiguous (few TLB pages, long
  // runs for the prefetcher): V (head, slot, dim), rows as the caller gave
  // them; K (head, dim, slot), transposed, so that 8 consecutive keys' element
  // d is one vector load and decode needs no transpose (engine: keys-across K).
  const auto copy = [&](unsigned char* pool, const void* src, const std::array<std::int64_t, 3>& st, std::int64_t width,
                        bool transposed) {
    const unsigned char* s = static_cast<const unsigned char*>(src);
    const std::int64_t p_sz = cfg_.page_size;
    for (std::int64_t tok = 0; tok < count; ++tok) {
      const std::int64_t pos = n + tok + shift;
      std::int64_t page = row[pos / p_sz];
      if (ATTNIMPL_MUTANT(cache_identity_page_table)) page = seq * cfg_.max_pages_per_seq + pos / p_sz;
      const std::int64_t slot = pos % p_sz;
      for (std::int64_t g = 0; g < cfg_.hkv; ++g) {
        unsigned char* head = pool + (page * cfg_.hkv + g) * p_sz * width * esize;
        const std::int64_t at = transposed ? slot : slot * width, step = transposed ? p_sz : 1;
        for (std::int64_t e = 0; e < width; ++e)
          std::memcpy(head + (at + e * step) * esize, s + (tok * st[0] + g * st[1] + e * st[2]) * esize,
                      static_cast<std::size_t>(esize));
      }
    }
  };
  copy(k_pool_.data(), t.k, t.k_stride, cfg_.d, true);
  copy(v_pool_.data(), t.v, t.v_stride, cfg_.dv, false);
  lengths_[static_cast<std::size_t>(seq)] = end;
  return status::success();
}

status paged_kv_cache::attend(const cache_attention_args& a, const config& cfg) const {
  // The pool is a page arena and the block table is ours: the paged entry
  // point's call, with K stored (dim, slot) inside a head's part of a page.
  paged_attention_args pa;
  pa.dims = {cfg_.batch, a.hq, cfg_.hkv, a.lq, *std::max_element(lengths_.begin(), lengths_.end()), cfg_.d, cfg_.dv};
  if (ATTNIMPL_MUTANT(decode_position))
    pa.dims.lk = cfg_.max_pages_per_seq * cfg_.page_size;  // the engine takes positions from lk
  const std::int64_t p_sz = cfg_.page_size;
  pa.kv.page_size = p_sz;
  pa.kv.num_pages = cfg_.pages;
  // (page, slot, head, dim) strides; see append
  pa.kv.k_pages = {k_pool_.data(), cfg_.type, {p_sz * cfg_.hkv * cfg_.d, 1, p_sz * cfg_.d, p_sz}};
  pa.kv.v_pages = {v_pool_.data(), cfg_.type, {p_sz * cfg_.hkv * cfg_.dv, cfg_.dv, p_sz * cfg_.dv, 1}};
  if (ATTNIMPL_MUTANT(cache_head_stride))  // heads as if one slot per page
    pa.kv.k_pages.stride[2] = cfg_.d, pa.kv.v_pages.stride[2] = cfg_.dv;
  pa.kv.table = table_.data();
  pa.kv.table_stride = cfg_.max_pages_per_seq;
  pa.kv.max_pages = cfg_.max_pages_per_seq;
  pa.q = a.q;
  pa.o = a.o;
  pa.lse = a.lse;
  pa.scale = a.scale;
  pa.causal = a.causal;
  pa.key_len = lengths_.data();
  pa.mask = a.mask;
  pa.var = a.var;
  return paged_attention(pa, cfg);
}

}  // namespace attnimpl
