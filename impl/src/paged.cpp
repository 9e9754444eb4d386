// The paged and ragged input forms: validation, then the shared engine. The
// paged form is one engine call whose kv_source walks the caller's block
// table (as the cache's attend does); a ragged batch is one engine call per
// sequence (batch 1, its own lengths), so each sequence's arithmetic is that
// of its batch of one and no sequence's rows depend on another's.
#include "attnimpl/paged.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "convert.hpp"
#include "engine.hpp"
#include "mutation.hpp"

namespace attnimpl {

namespace detail {
status check_common(const shape& s, const config& cfg);
}  // namespace detail

namespace {

bool valid_type(dtype t) { return t == dtype::f32 || t == dtype::f16 || t == dtype::bf16; }

std::string str(std::int64_t v) { return std::to_string(v); }

constexpr std::int64_t max_page_size = std::int64_t{1} << 20;
constexpr std::int64_t max_pages_limit = (std::int64_t{1} << 31) - 1;  // int32 table entries

/// The arenas, the table and its rows' valid entries for n[b] = key_len[b]
/// (b < rows); `what` names the struct in messages.
status check_paged(const paged_kv& kv, std::int64_t rows, const std::int64_t* key_len, const std::string& what) {
  if (kv.page_size < 1 || kv.page_size > max_page_size)
    return status::invalid(what + ".page_size = " + str(kv.page_size) + " is outside [1, 2^20]");
  if (kv.num_pages < 0 || kv.num_pages > max_pages_limit)
    return status::invalid(what + ".num_pages = " + str(kv.num_pages) + " is outside [0, 2^31 - 1]");
  if (kv.max_pages < 0 || kv.max_pages > max_pages_limit)
    return status::invalid(what + ".max_pages = " + str(kv.max_pages) + " is outside [0, 2^31 - 1]");
  if (kv.table_stride < kv.max_pages)
    return status::invalid(what + ".table_stride = " + str(kv.table_stride) + " is below max_pages = " + str(kv.max_pages));
  if (!valid_type(kv.k_pages.type) || !valid_type(kv.v_pages.type))
    return status::invalid(what + ".k_pages.type and v_pages.type must be f32, f16 or bf16");
  if (kv.k_pages.type != kv.v_pages.type) return status::invalid(what + ".k_pages and v_pages must share one dtype");
  for (std::int64_t b = 0; b < rows; ++b) {
    const std::int64_t n = key_len[b];
    const std::int64_t pages = (n + kv.page_size - 1) / kv.page_size;
    if (pages > kv.max_pages)
      return status::invalid("key_len[" + str(b) + "] = " + str(n) + " needs " + str(pages) + " pages of " + str(kv.page_size) +
                             ", more than " + what + ".max_pages = " + str(kv.max_pages));
    if (pages == 0) continue;
    if (!kv.table) return status::invalid(what + ".table must not be null when a sequence has keys");
    if (!kv.k_pages.data || !kv.v_pages.data)
      return status::invalid(what + ".k_pages and v_pages must not be null when a sequence has keys");
    // Only the valid entries are read: the rest of the row is unspecified.
    const std::int32_t* row = kv.table + b * kv.table_stride;
    for (std::int64_t t = 0; t < pages; ++t)
      if (row[t] < 0 || row[t] >= kv.num_pages)
        return status::invalid(what + ".table[" + str(b) + "][" + str(t) + "] = " + str(row[t]) +
                               " is outside [0, num_pages = " + str(kv.num_pages) + ")");
  }
  return status::success();
}

/// The engine's view of paged K and V, table row 0 at `table`.
engine::kv_source paged_source(const paged_kv& kv, const std::int32_t* table) {
  engine::kv_source s;
  s.k = kv.k_pages.data;
  s.v = kv.v_pages.data;
  s.type = kv.k_pages.type;
  s.ks = {0, kv.k_pages.stride[1], kv.k_pages.stride[2], kv.k_pages.stride[3]};
  s.vs = {0, kv.v_pages.stride[1], kv.v_pages.stride[2], kv.v_pages.stride[3]};
  s.table = table;
  s.table_stride = kv.table_stride;
  s.page_size = kv.page_size;
  s.k_page_stride = kv.k_pages.stride[0];
  s.v_page_stride = kv.v_pages.stride[0];
  if (ATTNIMPL_MUTANT(paged_page_stride_from_slots)) {  // a page taken as P slots back to back
    s.k_page_stride = kv.page_size * kv.k_pages.stride[1];
    s.v_page_stride = kv.page_size * kv.v_pages.stride[1];
  }
  s.num_pages = kv.num_pages;
  return s;
}

status check_lengths(const std::int64_t* n, std::int64_t count, std::int64_t limit, const char* field, const char* bound) {
  for (std::int64_t b = 0; b < count; ++b)
    if (n[b] < 0 || n[b] > limit)
      return status::invalid(std::string(field) + "[" + str(b) + "] = " + str(n[b]) + " is outside [0, " + bound + " = " +
                             str(limit) + "]");
  return status::success();
}

/// cu[0] == 0 and cu[b + 1] - cu[b] in [0, limit] for every b.
status check_offsets(const std::int64_t* cu, std::int64_t count, std::int64_t limit, const std::string& name, const char* bound) {
  if (cu[0] != 0) return status::invalid(name + "[0] = " + str(cu[0]) + " must be 0");
  for (std::int64_t b = 0; b < count; ++b)
    if (cu[b + 1] - cu[b] < 0 || cu[b + 1] - cu[b] > limit)
      return status::invalid(name + "[" + str(b + 1) + "] - " + name + "[" + str(b) + "] = " + str(cu[b + 1] - cu[b]) +
                             " is outside [0, " + bound + " = " + str(limit) + "]");
  return status::success();
}

/// What both forms check first: the shape and config, the types of Q and O,
/// the variants.
status check_queries(const shape& s, const config& cfg, dtype q, dtype o, const variants& var) {
  if (status st = detail::check_common(s, cfg); !st.ok()) return st;
  if (!valid_type(q) || !valid_type(o)) return status::invalid("q.type and o.type must be f32, f16 or bf16");
  return check_variants(var, s.hq);
}

/// Paged K and V and the key counts n[b] = key_len[b] that say how much of
/// each table row is read; `what` names the paged_kv in messages.
status check_paged_keys(const paged_kv& kv, const std::int64_t* key_len, const shape& s, const std::string& what) {
  if (!key_len) return status::invalid("key_len must not be null with paged K and V (it gives n[b])");
  if (status st = check_lengths(key_len, s.b, s.lk, "key_len", "lk"); !st.ok()) return st;
  return check_paged(kv, s.b, key_len, what);
}

const void* advance(const void* data, std::int64_t elements, dtype t) {
  return static_cast<const char*>(data) + elements * convert::size_of(t);
}

}  // namespace

status paged_attention(const paged_attention_args& a, const config& cfg) {
  const shape& s = a.dims;
  if (status st = check_queries(s, cfg, a.q.type, a.o.type, a.var); !st.ok()) return st;
  if (status st = check_paged_keys(a.kv, a.key_len, s, "kv"); !st.ok()) return st;
  if (s.lq == 0) return status::success();
  if (!a.q.data || !a.o.data) return status::invalid("q and o must not be null");
  engine::problem p = engine::call_problem(a, paged_source(a.kv, a.kv.table));
#ifdef ATTNIMPL_MUTATION
  std::vector<std::int64_t> keys(a.key_len, a.key_len + s.b);
  if (ATTNIMPL_MUTANT(paged_last_page_past_n) || ATTNIMPL_MUTANT(paged_table_tail_read)) {
    const std::int64_t pg = a.kv.page_size;
    for (std::int64_t& n : keys) {
      if (ATTNIMPL_MUTANT(paged_last_page_past_n)) n = (n + pg - 1) / pg * pg;  // pages taken as full
      // pages counted as n / P + 1: one entry past the valid ones where n ends a page
      if (ATTNIMPL_MUTANT(paged_table_tail_read) && n % pg == 0 && n / pg < a.kv.max_pages) n += pg;
      p.dims.lk = std::max(p.dims.lk, n);
    }
    p.key_len = keys.data();
  }
#endif
  engine::run(p, resolve(cfg));
  return status::success();
}

status ragged_attention(const ragged_attention_args& a, const config& cfg) {
  const shape& s = a.dims;
  if (status st = check_queries(s, cfg, a.q.type, a.o.type, a.var); !st.ok()) return st;
  if (!a.cu_seqlens_q) return status::invalid("cu_seqlens_q must not be null (b + 1 offsets)");
  if (status st = check_offsets(a.cu_seqlens_q, s.b, s.lq, "cu_seqlens_q", "lq"); !st.ok()) return st;
  if (a.paged) {
    if (a.cu_seqlens_k) return status::invalid("cu_seqlens_k must be null with paged K and V (key_len gives n[b])");
    if (status st = check_paged_keys(*a.paged, a.key_len, s, "paged"); !st.ok()) return st;
  } else {
    if (a.key_len) return status::invalid("key_len must be null without paged K and V (cu_seqlens_k gives n[b])");
    if (!a.cu_seqlens_k) return status::invalid("cu_seqlens_k must not be null without paged K and V (b + 1 offsets)");
    if (status st = check_offsets(a.cu_seqlens_k, s.b, s.lk, "cu_seqlens_k", "lk"); !st.ok()) return st;
    if (!valid_type(a.k.type) || !valid_type(a.v.type)) return status::invalid("k.type and v.type must be f32, f16 or bf16");
    if (a.k.type != a.v.type) return status::invalid("k and v must share one dtype");
    if (a.cu_seqlens_k[s.b] > 0 && (!a.k.data || !a.v.data))
      return status::invalid("k and v must not be null when cu_seqlens_k[b] > 0");
  }
  const std::int64_t total_q = a.cu_seqlens_q[s.b];
  if (total_q == 0) return status::success();
  if (!a.q.data || !a.o.data) return status::invalid("q and o must not be null when cu_seqlens_q[b] > 0");
  const config r = resolve(cfg);
  // n[b]: sequence b's keys.
  const auto keys = [&a](std::int64_t b) { return a.paged ? a.key_len[b] : a.cu_seqlens_k[b + 1] - a.cu_seqlens_k[b]; };
  std::int64_t total_k = 0;
  for (std::int64_t b = 0; b < s.b; ++b) total_k += keys(b);
  for (std::int64_t b = 0; b < s.b; ++b) {
    const std::int64_t lq = a.cu_seqlens_q[b + 1] - a.cu_seqlens_q[b], n = keys(b);
    std::int64_t row = a.cu_seqlens_q[b], rows = lq;
    if (ATTNIMPL_MUTANT(ragged_empty_writes_neighbour) && rows == 0 && row > 0) row -= 1, rows = 1;  // the row before it
    if (rows == 0) continue;                                                                         // no row: nothing is written
    engine::problem p;
    p.dims = {1, s.hq, s.hkv, rows, n, s.d, s.dv};
    p.q = {advance(a.q.data, row * a.q.stride[1], a.q.type), a.q.type, {0, a.q.stride[1], a.q.stride[2], a.q.stride[3]}};
    p.o = {static_cast<char*>(a.o.data) + row * a.o.stride[1] * convert::size_of(a.o.type),
           a.o.type,
           {0, a.o.stride[1], a.o.stride[2], a.o.stride[3]}};
    if (a.lse.data) p.lse = {a.lse.data + row * a.lse.stride[2], {0, a.lse.stride[1], a.lse.stride[2]}};
    if (a.paged) {
      p.kv = paged_source(*a.paged, a.paged->table ? a.paged->table + b * a.paged->table_stride : nullptr);
    } else {
      std::int64_t k0 = a.cu_seqlens_k[b];
      if (ATTNIMPL_MUTANT(ragged_key_offset_first)) k0 = a.cu_seqlens_k[0];  // every sequence's keys from sequence 0's row
      p.kv.k = n > 0 ? advance(a.k.data, k0 * a.k.stride[1], a.k.type) : nullptr;
      p.kv.v = n > 0 ? advance(a.v.data, k0 * a.v.stride[1], a.v.type) : nullptr;
      p.kv.type = a.k.type;
      p.kv.ks = {0, a.k.stride[1], a.k.stride[2], a.k.stride[3]};
      p.kv.vs = {0, a.v.stride[1], a.v.stride[2], a.v.stride[3]};
    }
    p.scale = a.scale ? *a.scale : default_scale(s.d);
    p.causal = a.causal;
    p.key_len = nullptr;  // lk = n
    p.mask = a.mask;
    if (p.mask.data) p.mask.data += b * a.mask.stride[0];
    p.var = a.var;
    if (p.var.bias.data) p.var.bias.data = advance(p.var.bias.data, b * a.var.bias.stride[0], a.var.bias.type);
    p.pos_shift = (total_k - total_q) - (n - lq);  // read by a mutation point only
    engine::run(p, r);
  }
  return status::success();
}

}  // namespace attnimpl
