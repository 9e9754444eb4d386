#include "attncheck/subject_host.hpp"

#include <dlfcn.h>
#include <signal.h>
#include <sys/prctl.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <numeric>
#include <sstream>

#include "attncheck/isolate.hpp"
#include "attncheck/subject_registry.hpp"
#include "guarded.hpp"
#include "problem.hpp"

namespace attncheck {

using namespace host;

namespace {

// ---- Contract 1.2 input forms (docs/spec.md "Paged KV", "Ragged batches") ----

static_assert(max_page_size == ATTNCHECK_MAX_PAGE_SIZE, "case.hpp and subject.h disagree on the page size limit");
static_assert(max_ragged_sequences == ATTNCHECK_MAX_RAGGED_SEQUENCES, "case.hpp and subject.h disagree on ragged B");

// splitmix64, for the page order and the table tails, from the case's seed.
std::uint64_t form_mix(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// What fills every slot of the arena no valid table entry reaches: a NaN with
// a payload of its own, or +-1e30 (the type's largest finite value for f16
// and bf16) when the case's poison is `big`.
std::uint32_t canary_bits(const attn_case& c, std::size_t at) {
  if (c.poison == poison_kind::big) return encode(c.type, (at & 1 ? -1.0 : 1.0) * std::min(1e30, largest_finite(c.type)));
  switch (c.type) {
    case dtype::f32: return 0x7fc0ca11u;
    case dtype::f16: return 0x7e11u;
    case dtype::bf16: return 0x7fcau;
  }
  return 0x7fc0ca11u;
}

// The arena and the block table of the paged form, built from the case:
// sequence b's logical page t (t < ceil(n[b] / P)) is a page of its own, or
// one of the shared-prefix pages for t < shared_pages; the logical pages and
// the spare ones sit in the arena in the case's page order; every slot no
// valid entry reaches holds a canary; every table entry past ceil(n[b] / P)
// holds a stale page number or an invalid one. The arenas take the case's
// layout: bshd gives (num_pages, P, Hkv, D) dense (slot-major pages, as
// FlashInfer's NHD), bhsd (num_pages, Hkv, P, D) (head-major pages, HND),
// padded gaps between heads, slots and pages, with table rows longer than
// max_pages (the entries between rows invalid).
struct paged_parts {
  std::int64_t page = 1, num_pages = 1, max_pages = 1, table_stride = 1;
  tensor kp, vp;  // (num_pages, P, Hkv, D) and (num_pages, P, Hkv, Dv) in the case's layout
  std::vector<std::int32_t> table;
  std::vector<unsigned char> k_bytes, v_bytes;  // the arenas as handed over, to see writes
  std::vector<std::unique_ptr<guarded_bytes>> guarded;
  attncheck_paged_kv pk{};

  explicit paged_parts(const attn_case& c) {
    const input_form& f = c.form;
    page = f.page_size;
    std::vector<std::int64_t> used(static_cast<std::size_t>(c.b));
    std::int64_t most = 0;
    for (std::int64_t b = 0; b < c.b; ++b)
      most = std::max(most, used[static_cast<std::size_t>(b)] = (c.valid_keys(b) + page - 1) / page);
    const std::int64_t shared = std::min(f.shared_pages, most);
    // Logical page numbers: the shared prefix first, then each sequence's own.
    std::vector<std::int64_t> base(static_cast<std::size_t>(c.b));
    std::int64_t logical = shared;
    for (std::int64_t b = 0; b < c.b; ++b) {
      base[static_cast<std::size_t>(b)] = logical;
      logical += used[static_cast<std::size_t>(b)] - std::min(f.shared_pages, used[static_cast<std::size_t>(b)]);
    }
    const auto logical_of = [&](std::int64_t b, std::int64_t t) {
      return t < f.shared_pages ? t : base[static_cast<std::size_t>(b)] + t - f.shared_pages;
    };
    num_pages = std::max<std::int64_t>(1, logical + f.spare_pages);
    max_pages = std::max<std::int64_t>(1, (c.lk + page - 1) / page + f.spare_pages);
    std::vector<std::int64_t> perm(static_cast<std::size_t>(num_pages));
    std::iota(perm.begin(), perm.end(), 0);
    std::uint64_t state = c.seed ^ 0x70a6ed5eedull;
    if (f.page_order == page_order_kind::reversed) std::reverse(perm.begin(), perm.end());
    if (f.page_order == page_order_kind::shuffled)
      for (std::size_t i = perm.size(); i > 1; --i) std::swap(perm[i - 1], perm[form_mix(state) % i]);

    kp = make_tensor(c.type, {num_pages, page, c.hkv, c.d}, c.layout);
    vp = make_tensor(c.type, {num_pages, page, c.hkv, c.dv}, c.layout);
    for (std::size_t i = 0; i < kp.bits.size(); ++i) kp.bits[i] = canary_bits(c, i);
    for (std::size_t i = 0; i < vp.bits.size(); ++i) vp.bits[i] = canary_bits(c, i);
    // A shared slot is written from a sequence that uses it: another one may
    // hold the case's poison there (a slot it does not use), which must not
    // reach the sequences that do.
    const bool sharing = f.shared_pages > 0 && c.b > 1;
    const slot_usage usage = sharing ? used_slots(c) : slot_usage{};
    std::vector<std::uint8_t> from_user(sharing ? static_cast<std::size_t>(num_pages * page * c.hkv) : 0, 0);
    for (std::int64_t b = 0; b < c.b; ++b)
      for (std::int64_t j = 0; j < c.valid_keys(b); ++j) {
        const std::int64_t phys = perm[static_cast<std::size_t>(logical_of(b, j / page))], slot = j % page;
        for (std::int64_t g = 0; g < c.hkv; ++g) {
          if (sharing) {
            auto& mark = from_user[static_cast<std::size_t>((phys * page + slot) * c.hkv + g)];
            const bool user = usage.key(c, b, j, g);
            if (mark && !user) continue;
            mark = user ? 1 : mark;
          }
          for (std::int64_t x = 0; x < c.d; ++x) kp.set_bits(phys, slot, g, x, c.k.bits_at(b, j, g, x));
          for (std::int64_t e = 0; e < c.dv; ++e) vp.set_bits(phys, slot, g, e, c.v.bits_at(b, j, g, e));
        }
      }

    table_stride = max_pages + (c.layout == layout_kind::padded ? 3 : 0);
    table.assign(static_cast<std::size_t>(c.b * table_stride), std::numeric_limits<std::int32_t>::min());
    const std::int32_t invalid[] = {-1,
                                    static_cast<std::int32_t>(num_pages),
                                    std::numeric_limits<std::int32_t>::max(),
                                    std::numeric_limits<std::int32_t>::min(),
                                    -2,
                                    static_cast<std::int32_t>(num_pages + 7)};
    for (std::int64_t b = 0; b < c.b; ++b)
      for (std::int64_t t = 0; t < max_pages; ++t) {
        std::int32_t& e = table[static_cast<std::size_t>(b * table_stride + t)];
        if (t < used[static_cast<std::size_t>(b)]) {
          e = static_cast<std::int32_t>(perm[static_cast<std::size_t>(logical_of(b, t))]);
        } else if (f.table_tail == table_tail_kind::invalid) {
          e = invalid[static_cast<std::size_t>(b + t) % std::size(invalid)];
        } else {
          // A stale number: a page of another sequence or a spare one, real
          // data a kernel reading past ceil(n[b] / P) would take for keys.
          e = static_cast<std::int32_t>(form_mix(state) % static_cast<std::uint64_t>(num_pages));
          for (int tries = 0; tries < 8 && used[static_cast<std::size_t>(b)] > 0; ++tries) {
            bool own = false;
            for (std::int64_t u = 0; u < used[static_cast<std::size_t>(b)]; ++u)
              own = own || e == static_cast<std::int32_t>(perm[static_cast<std::size_t>(logical_of(b, u))]);
            if (!own) break;
            e = static_cast<std::int32_t>(form_mix(state) % static_cast<std::uint64_t>(num_pages));
          }
        }
      }
  }

  // Fills the problem's paged part; the arenas get guard bands like every buffer.
  void hand_over(attncheck_problem& p) {
    guarded.push_back(std::make_unique<guarded_bytes>(kp));
    guarded.push_back(std::make_unique<guarded_bytes>(vp));
    k_bytes = guarded[0]->bytes;
    v_bytes = guarded[1]->bytes;
    pk.struct_size = sizeof pk;
    pk.page_size = page;
    pk.num_pages = num_pages;
    pk.k_pages = view_of(*guarded[0], kp);
    pk.v_pages = view_of(*guarded[1], vp);
    pk.block_table = table.data();
    pk.block_table_stride = table_stride;
    pk.max_pages = max_pages;
    p.paged = &pk;
    p.k = attncheck_tensor{};
    p.v = attncheck_tensor{};
  }
  // "wrote the K arena" when the subject wrote what is read-only (docs/spec.md "Shared pages").
  std::string writes(const std::vector<std::int32_t>& table_before) const {
    std::string why;
    if (guarded[0]->bytes != k_bytes) why += "wrote into the K page arena (read-only); ";
    if (guarded[1]->bytes != v_bytes) why += "wrote into the V page arena (read-only); ";
    if (table != table_before) why += "wrote into the block table (read-only); ";
    return why;
  }
};

// The ragged form's packed Q (and K, V unless paged), offsets, and the mask
// and bias re-indexed by each sequence's own query rows (docs/abi.md
// "Ragged batches"): ragged query i of sequence b is dense row Lq - q_len[b] + i.
struct ragged_parts {
  static constexpr std::int64_t tail_rows = 2;  // unused rows after total_q in O and LSE
  std::vector<std::int64_t> cu_q, cu_k;
  tensor q, k, v;
  std::vector<std::uint8_t> mask;
  std::vector<unsigned char> bias;
  std::vector<std::unique_ptr<guarded_bytes>> guarded;
  attncheck_ragged rg{};

  explicit ragged_parts(const attn_case& c) {
    cu_q.assign(1, 0);
    cu_k.assign(1, 0);
    for (std::int64_t b = 0; b < c.b; ++b) {
      cu_q.push_back(cu_q.back() + c.queries(b));
      cu_k.push_back(cu_k.back() + c.valid_keys(b));
    }
    q = tensor::contiguous(c.type, {1, std::max<std::int64_t>(1, cu_q.back()), c.hq, c.d});
    for (std::int64_t b = 0; b < c.b; ++b)
      for (std::int64_t i = 0; i < c.queries(b); ++i)
        for (std::int64_t h = 0; h < c.hq; ++h)
          for (std::int64_t x = 0; x < c.d; ++x)
            q.set_bits(0, cu_q[static_cast<std::size_t>(b)] + i, h, x, c.q.bits_at(b, c.lq - c.queries(b) + i, h, x));
    if (!c.form.paged()) {
      k = tensor::contiguous(c.type, {1, std::max<std::int64_t>(1, cu_k.back()), c.hkv, c.d});
      v = tensor::contiguous(c.type, {1, std::max<std::int64_t>(1, cu_k.back()), c.hkv, c.dv});
      for (std::int64_t b = 0; b < c.b; ++b)
        for (std::int64_t j = 0; j < c.valid_keys(b); ++j)
          for (std::int64_t g = 0; g < c.hkv; ++g) {
            const std::int64_t row = cu_k[static_cast<std::size_t>(b)] + j;
            for (std::int64_t x = 0; x < c.d; ++x) k.set_bits(0, row, g, x, c.k.bits_at(b, j, g, x));
            for (std::int64_t e = 0; e < c.dv; ++e) v.set_bits(0, row, g, e, c.v.bits_at(b, j, g, e));
          }
    }
  }

  void hand_over(attncheck_problem& p, const attn_case& c, variant_parts& parts) {
    const auto packed = [&](const tensor& t) {
      guarded.push_back(std::make_unique<guarded_bytes>(t));
      attncheck_tensor v = view_of(*guarded.back(), t);
      v.stride[0] = 0;  // not used with ragged
      return v;
    };
    p.q = packed(q);
    if (!c.form.paged()) {
      p.k = packed(k);
      p.v = packed(v);
      p.key_len = nullptr;  // the lengths are cu_seqlens_k's differences
      rg.cu_seqlens_k = cu_k.data();
    }
    rg.struct_size = sizeof rg;
    rg.cu_seqlens_q = cu_q.data();
    rg.total_q = cu_q.back();
    rg.total_k = cu_k.back();
    p.ragged = &rg;
    if (c.has_mask()) {
      // (B, Hq, Lq, Lk) dense, row i of sequence b from dense row Lq - q_len[b] + i.
      mask.assign(static_cast<std::size_t>(c.b * c.hq * c.lq * c.lk), 0);
      for (std::int64_t b = 0; b < c.b; ++b)
        for (std::int64_t h = 0; h < c.hq; ++h)
          for (std::int64_t i = 0; i < c.queries(b); ++i)
            for (std::int64_t j = 0; j < c.lk; ++j)
              mask[static_cast<std::size_t>(((b * c.hq + h) * c.lq + i) * c.lk + j)] =
                  c.mask_allows(b, h, c.lq - c.queries(b) + i, j) ? 1 : 0;
      p.mask = mask.data();
      p.mask_stride[0] = c.hq * c.lq * c.lk, p.mask_stride[1] = c.lq * c.lk, p.mask_stride[2] = c.lk, p.mask_stride[3] = 1;
    }
    const auto& bs = c.variants.bias_shape;
    if (c.variants.has_bias() && bs[2] != 1) {
      // The same shift for a bias with a query dim: (B, bias Hq, Lq, bias Lk), the batch dim
      // full because the shift depends on the sequence.
      const std::size_t w = size_of(c.variants.bias_type);
      const auto src = c.variants.bias.packed_storage();
      const std::int64_t d1 = bs[1], d3 = bs[3];
      bias.assign(static_cast<std::size_t>(c.b * d1 * c.lq * d3) * w, 0);
      for (std::int64_t b = 0; b < c.b; ++b)
        for (std::int64_t h = 0; h < d1; ++h)
          for (std::int64_t i = 0; i < c.queries(b); ++i)
            for (std::int64_t j = 0; j < d3; ++j) {
              const std::int64_t from = (((bs[0] == 1 ? 0 : b) * d1 + h) * bs[2] + c.lq - c.queries(b) + i) * d3 + j;
              const std::int64_t to = ((b * d1 + h) * c.lq + i) * d3 + j;
              std::memcpy(&bias[static_cast<std::size_t>(to) * w], &src[static_cast<std::size_t>(from) * w], w);
            }
      parts.v.bias = bias.data();
      parts.v.bias_stride[0] = d1 * c.lq * d3;
      parts.v.bias_stride[1] = d1 == 1 ? 0 : c.lq * d3;
      parts.v.bias_stride[2] = d3;
      parts.v.bias_stride[3] = d3 == 1 ? 0 : 1;
    }
  }
};

// A call in the paged or ragged form. O and LSE come back in the usual dense
// form (O in the case's layout, LSE (B, Hq, Lq)); the dense rows that are not
// part of a ragged problem hold the host's NaN sentinel, as an unwritten row does.
subject_output attend_in_form(const attncheck_instance& inst, const attn_case& c, const call_layout& how, bool want_lse) {
  subject_output out;
  attncheck_problem p{};
  case_inputs inputs(c);
  inputs.hand_over(p, c, how.threads);
  std::vector<std::int64_t> key_len(static_cast<std::size_t>(c.b));
  for (std::int64_t b = 0; b < c.b; ++b) key_len[static_cast<std::size_t>(b)] = c.valid_keys(b);
  p.key_len = key_len.data();  // the paged form always gives n[b]; ragged alone clears it
  std::optional<paged_parts> paged;
  std::vector<std::int32_t> table_before;
  if (c.form.paged()) {
    paged.emplace(c);
    table_before = paged->table;
    paged->hand_over(p);
  }
  std::optional<ragged_parts> ragged;
  if (c.form.ragged) {
    ragged.emplace(c);
    ragged->hand_over(p, c, inputs.parts);
  }
  // O: the case's layout over (B, Lq) rows, or packed (1, total_q + tail rows) for ragged.
  attn_case packed_header = header_of(c, c.lq);
  if (ragged) {
    packed_header.b = 1;
    packed_header.lq = ragged->cu_q.back() + ragged_parts::tail_rows;
  }
  output_buffers ob(packed_header, packed_header.lq, want_lse, how.lse_strided);
  ob.hand_over(p);
  if (ragged) p.o_stride[0] = 0, p.lse_stride[0] = 0;  // not used with ragged
  const call_result r = call_attend(inst, p, ob, c);
  out.status = r.status, out.error = r.error;
  subject_output got;
  ob.collect(got);
  std::string why = got.guard_report.empty() ? "" : got.guard_report + "; ";
  if (paged && !call_isolation()) why += paged->writes(table_before);
  if (!ragged) {
    out.o = std::move(got.o);
    out.lse = std::move(got.lse);
  } else {
    // Unpack: ragged row cu_q[b] + i is dense row Lq - q_len[b] + i; the rows
    // past total_q must still hold the sentinel.
    const std::int64_t total = ragged->cu_q.back();
    const std::uint32_t s = sentinel_bits(c.type);
    for (std::int64_t r = total; r < packed_header.lq; ++r)
      for (std::int64_t h = 0; h < c.hq; ++h) {
        bool o_touched = false, lse_touched = false;
        for (std::int64_t e = 0; e < c.dv; ++e) o_touched = o_touched || got.o.bits_at(0, r, h, e) != s;
        if (want_lse)
          lse_touched = std::bit_cast<std::uint32_t>(got.lse[static_cast<std::size_t>(h * packed_header.lq + r)]) !=
                        sentinel_bits(dtype::f32);
        if (o_touched || lse_touched) {
          why += std::string("wrote the unused tail of the packed ") + (o_touched ? "O" : "LSE") + " (row " + std::to_string(r) +
                 ", head " + std::to_string(h) + "; total_q = " + std::to_string(total) + "); ";
          r = packed_header.lq;
          break;
        }
      }
    out.o = poisoned(make_output(header_of(c, c.lq)));
    if (want_lse) out.lse.assign(static_cast<std::size_t>(c.b * c.hq * c.lq), std::bit_cast<float>(sentinel_bits(dtype::f32)));
    for (std::int64_t b = 0; b < c.b; ++b)
      for (std::int64_t i = 0; i < c.queries(b); ++i) {
        const std::int64_t row = ragged->cu_q[static_cast<std::size_t>(b)] + i, dense = c.lq - c.queries(b) + i;
        for (std::int64_t h = 0; h < c.hq; ++h) {
          for (std::int64_t e = 0; e < c.dv; ++e) out.o.set_bits(b, dense, h, e, got.o.bits_at(0, row, h, e));
          if (want_lse)
            out.lse[static_cast<std::size_t>((b * c.hq + h) * c.lq + dense)] =
                got.lse[static_cast<std::size_t>(h * packed_header.lq + row)];
        }
      }
  }
  if (!why.empty()) {
    out.guard_violated = true;
    out.guard_report = why.substr(0, why.size() - 2);
  }
  return out;
}

}  // namespace

subject_output subject::attend(const attn_case& c, int threads) const {
  call_layout how;
  how.threads = threads;
  return attend(c, how);
}

subject_output subject::attend(const attn_case& c, const call_layout& how) const {
  if (!c.form.dense()) {
    if (const std::string why = cannot_take(c); !why.empty()) {
      subject_output refused;
      refused.status = -1;
      refused.error = "the host does not hand this case to " + name() + ": " + why;
      return refused;
    }
    return attend_in_form(*inst_, c, how, has_lse());
  }
  subject_output out;
  case_inputs inputs(c);
  output_buffers ob(c, c.lq, has_lse(), how.lse_strided);
  attncheck_problem p{};
  inputs.hand_over(p, c, how.threads);
  std::vector<std::uint8_t> mask;
  if (c.has_mask() && how.mask_expanded) {
    // The broadcast mask written out in full (no zero strides), keys outer
    // and queries inner with a gap after every key column; gaps alternate
    // 1 and 0, so reading one changes the answer somewhere.
    const std::int64_t s2 = 1, s3 = c.lq + 1, s1 = c.lk * s3, s0 = c.hq * s1;
    mask.resize(static_cast<std::size_t>(c.b * s0));
    for (std::size_t x = 0; x < mask.size(); ++x) mask[x] = static_cast<std::uint8_t>(x & 1);
    for (std::int64_t bi = 0; bi < c.b; ++bi)
      for (std::int64_t h = 0; h < c.hq; ++h)
        for (std::int64_t i = 0; i < c.lq; ++i)
          for (std::int64_t j = 0; j < c.lk; ++j)
            mask[static_cast<std::size_t>(bi * s0 + h * s1 + i * s2 + j * s3)] = c.mask_allows(bi, h, i, j) ? 1 : 0;
    p.mask = mask.data();
    p.mask_stride[0] = s0, p.mask_stride[1] = s1, p.mask_stride[2] = s2, p.mask_stride[3] = s3;
  }
  ob.hand_over(p);
  const call_result r = call_attend(*inst_, p, ob, c);
  out.status = r.status, out.error = r.error;
  ob.collect(out);
  return out;
}

subject_output subject::attend_cached(const attn_case& c, const cache_plan& plan, int threads) const {
  subject_output out;
  if (!c.form.dense()) {
    out.status = -1;
    out.error = "the cache path takes the dense form only: a paged or ragged case is handed to attend";
    return out;
  }
  if (!has(ATTNCHECK_FEATURE_CACHE)) {
    out.status = -1;
    out.error = "subject has no cache";
    return out;
  }
  std::int64_t total_lq = 0;
  for (const auto& s : plan.steps) total_lq += s.lq;
  out.o = make_output(header_of(c, std::max<std::int64_t>(1, total_lq)));
  const bool want_lse = has_lse();
  if (want_lse) out.lse.assign(static_cast<std::size_t>(c.b * c.hq * total_lq), 0.0f);

  attncheck_cache_config cfg{};
  cfg.struct_size = sizeof cfg;
  cfg.dtype = to_abi(c.type);
  cfg.b = c.b, cfg.hkv = c.hkv, cfg.d = c.d, cfg.dv = c.dv;
  cfg.capacity = c.lk;
  cfg.page_size = plan.page_size;
  cfg.page_order = plan.page_order.empty() ? nullptr : plan.page_order.data();
  cfg.page_count = static_cast<std::int64_t>(plan.page_order.size());
  // One watched call for the whole chunked run (its steps rename the entry in flight).
  const watched_call watch("attend_cached", c.b * c.hq * std::max<std::int64_t>(1, total_lq) * c.lk * (c.d + c.dv));
  char err[err_cap] = {0};
  void* cache = [&] {
    const watched_call step("cache_create", 0);
    return inst_->cache_create(inst_->state, &cfg, err, err_cap);
  }();
  if (!cache) {
    out.status = -1;
    err[err_cap - 1] = 0;
    out.error = std::string("cache_create failed: ") + err;
    return out;
  }
  std::vector<std::int64_t> filled(static_cast<std::size_t>(c.b), 0);
  std::int64_t row0 = 0;
  for (const auto& step : plan.steps) {
    // New keys/values of this step only, (B, c, Hkv, D) dense, copied from the case.
    const std::int64_t cmax = *std::max_element(step.append.begin(), step.append.end());
    const std::int64_t cn = std::max<std::int64_t>(cmax, 1);
    tensor kn = tensor::contiguous(c.type, {c.b, cn, c.hkv, c.d});
    tensor vn = tensor::contiguous(c.type, {c.b, cn, c.hkv, c.dv});
    for (std::int64_t bi = 0; bi < c.b; ++bi)
      for (std::int64_t t = 0; t < step.append[static_cast<std::size_t>(bi)]; ++t)
        for (std::int64_t g = 0; g < c.hkv; ++g) {
          const std::int64_t j = filled[static_cast<std::size_t>(bi)] + t;
          for (std::int64_t x = 0; x < c.d; ++x) kn.set_bits(bi, t, g, x, c.k.bits_at(bi, j, g, x));
          for (std::int64_t x = 0; x < c.dv; ++x) vn.set_bits(bi, t, g, x, c.v.bits_at(bi, j, g, x));
        }
    guarded_bytes kg(kn), vg(vn);
    attncheck_tensor kv = view_of(kg, kn), vv = view_of(vg, vn);
    const int appended = [&] {
      const watched_call in("cache_append", 0);
      return inst_->cache_append(inst_->state, cache, &kv, &vv, cn, step.append.data(), err, err_cap);
    }();
    if (appended != 0) {
      out.status = -1;
      err[err_cap - 1] = 0;
      out.error = std::string("cache_append failed: ") + err;
      break;
    }
    for (std::int64_t bi = 0; bi < c.b; ++bi) filled[static_cast<std::size_t>(bi)] += step.append[static_cast<std::size_t>(bi)];
    // Queries: the last step.lq tokens of each sequence (rows that precede
    // the sequence start, or whose position has no row in the case, get zeros).
    tensor qn = tensor::contiguous(c.type, {c.b, step.lq, c.hq, c.d});
    for (std::int64_t bi = 0; bi < c.b; ++bi)
      for (std::int64_t i = 0; i < step.lq; ++i) {
        const std::int64_t pos = filled[static_cast<std::size_t>(bi)] - step.lq + i;
        // The case's Q rows are bottom-right aligned: row pos - n[b] + Lq holds position pos.
        const std::int64_t row = pos - c.valid_keys(bi) + c.lq;
        if (pos < 0 || row < 0 || row >= c.lq) continue;
        for (std::int64_t h = 0; h < c.hq; ++h)
          for (std::int64_t x = 0; x < c.d; ++x) qn.set_bits(bi, i, h, x, c.q.bits_at(bi, row, h, x));
      }
    guarded_bytes qg(qn);
    attn_case stepcase = header_of(c, step.lq);
    // The variants travel with every step: positions are absolute, so windows,
    // chunks, ALiBi and sinks apply as in the one-shot call; a bias with a
    // query dim is cut to the step's rows (zero where a row has no query).
    stepcase.variants = c.variants;
    if (c.variants.has_bias() && c.variants.bias_shape[2] != 1) {
      const auto& bs = c.variants.bias_shape;
      tensor cut = tensor::contiguous(c.variants.bias_type, {c.b, bs[1], step.lq, bs[3]});
      for (std::int64_t bi = 0; bi < c.b; ++bi)
        for (std::int64_t i = 0; i < step.lq; ++i) {
          const std::int64_t row = filled[static_cast<std::size_t>(bi)] - step.lq + i - c.valid_keys(bi) + c.lq;
          if (row < 0 || row >= c.lq) continue;
          for (std::int64_t h = 0; h < bs[1]; ++h)
            for (std::int64_t j = 0; j < bs[3]; ++j)
              cut.set_bits(bi, h, i, j, c.variants.bias.bits_at(bs[0] == 1 ? 0 : bi, h, row, j));
        }
      stepcase.variants.bias_shape = cut.shape;
      stepcase.variants.bias = std::move(cut);
    }
    const variant_parts parts(stepcase);
    output_buffers ob(stepcase, step.lq, want_lse);
    attncheck_problem p{};
    fill_problem(p, stepcase, threads);
    p.variants = parts.handed();
    p.q = view_of(qg, qn);
    ob.hand_over(p);
    const int rc = [&] {
      const watched_call in("cache_attend", 0);
      return inst_->cache_attend(inst_->state, cache, &p, err, err_cap);
    }();
    subject_output part;
    ob.collect(part);
    if (rc != 0 || part.guard_violated) {
      out.status = rc;
      err[err_cap - 1] = 0;
      out.error = rc ? std::string("cache_attend failed: ") + err : std::string();
      out.guard_violated = part.guard_violated;
      out.guard_report = part.guard_report;
      break;
    }
    for (std::int64_t bi = 0; bi < c.b; ++bi)
      for (std::int64_t i = 0; i < step.lq; ++i)
        for (std::int64_t h = 0; h < c.hq; ++h) {
          for (std::int64_t e = 0; e < c.dv; ++e) out.o.set_bits(bi, row0 + i, h, e, part.o.bits_at(bi, i, h, e));
          if (want_lse)
            out.lse[static_cast<std::size_t>((bi * c.hq + h) * total_lq + row0 + i)] =
                part.lse[static_cast<std::size_t>((bi * c.hq + h) * step.lq + i)];
        }
    row0 += step.lq;
  }
  {
    const watched_call in("cache_free", 0);
    inst_->cache_free(inst_->state, cache);
  }
  return out;
}

std::pair<std::int64_t, std::int64_t> subject::backward_blocks(const attn_case& c) const {
  std::int64_t dq = 1, dkv = 1;
  if (has_backward() && inst_->struct_size >= offsetof(attncheck_instance, backward_blocks) + sizeof inst_->backward_blocks &&
      inst_->backward_blocks) {
    attncheck_problem p{};
    fill_problem(p, c, 0);
    attncheck_backward_problem bp{};
    bp.struct_size = sizeof bp;
    bp.forward = &p;
    const watched_call watch("backward_blocks", 0);
    inst_->backward_blocks(inst_->state, &bp, &dq, &dkv);
  }
  const std::int64_t dq_cap = std::max<std::int64_t>(1, ATTNCHECK_MAX_KEY_BLOCKS_PER_KEY * c.lk);
  const std::int64_t dkv_cap = std::max<std::int64_t>(1, ATTNCHECK_MAX_KEY_BLOCKS_PER_KEY * c.group() * c.lq);
  return {std::clamp<std::int64_t>(dq, 1, dq_cap), std::clamp<std::int64_t>(dkv, 1, dkv_cap)};
}

backward_output subject::backward(const attn_case& c, const backward_inputs& in, int threads) const {
  backward_output out;
  if (!has_backward()) {
    out.status = -1;
    out.error = "subject declares no backward (FEATURE3_BACKWARD)";
    return out;
  }
  if (!c.form.dense()) {
    out.status = -1;
    out.error = "the backward entry point takes the dense form only (docs/abi.md)";
    return out;
  }
  if (c.variants.any() && !has_backward_variants()) {
    out.status = -1;
    out.error = "subject declares no backward under variants (FEATURE3_BACKWARD_VARIANTS)";
    return out;
  }
  if (in.o.shape != output_shape(c) || in.d_o.shape != output_shape(c) || in.o.type != c.type || in.d_o.type != c.type ||
      in.lse.size() != static_cast<std::size_t>(c.b * c.hq * c.lq))
    throw input_error("backward", "O, LSE and dO must have the case's shapes and storage type: " + to_line(c));
  case_inputs inputs(c);
  guarded_bytes og(in.o), dog(in.d_o);
  attncheck_problem p{};
  inputs.hand_over(p, c, threads);
  // LSE handed in dense (B, Hq, Lq) between guard bands of NaN.
  std::vector<float> lse = guarded_floats(in.lse.size());
  std::copy(in.lse.begin(), in.lse.end(), lse.begin() + guard_elems);
  guarded_output dq(make_tensor(c.type, c.q.shape, c.layout), "dQ"), dk(make_tensor(c.type, c.k.shape, c.layout), "dK"),
      dv(make_tensor(c.type, c.v.shape, c.layout), "dV");
  // d(sink): Hq f32 entries with sinks (a subject without BACKWARD_VARIANTS is never handed a variant).
  const bool sinks = c.variants.has_sinks();
  guarded_output ds(make_tensor(dtype::f32, dims4{sinks ? c.hq : 1, 1, 1, 1}, layout_kind::bshd), "d_sinks");
  attncheck_backward_problem bp{};
  bp.struct_size = sizeof bp;
  bp.forward = &p;
  bp.o = view_of(og, in.o);
  bp.lse = lse.data() + guard_elems;
  bp.lse_stride[0] = c.hq * c.lq, bp.lse_stride[1] = c.lq, bp.lse_stride[2] = 1;
  bp.d_o = view_of(dog, in.d_o);
  bp.dq = dq.view(), bp.dk = dk.view(), bp.dv = dv.view();
  if (sinks) bp.d_sinks = static_cast<float*>(ds.view());
  for (int a = 0; a < 4; ++a)
    bp.dq_stride[a] = dq.t.stride[a], bp.dk_stride[a] = dk.t.stride[a], bp.dv_stride[a] = dv.t.stride[a];
  const call_result r = call_subject("attend_backward", 3 * c.b * c.hq * c.lq * c.lk * (c.d + c.dv),
                                     [&](char* err) { return inst_->attend_backward(inst_->state, &bp, err, err_cap); },
                                     {dq.bytes(), dk.bytes(), dv.bytes(), ds.bytes()});
  out.status = r.status, out.error = r.error;
  std::ostringstream why;
  const bool v1 = dq.collect(why), v2 = dk.collect(why), v3 = dv.collect(why), v4 = ds.collect(why);
  out.guard_violated = v1 || v2 || v3 || v4;
  out.guard_report = finished_report(why.str());
  out.dq = std::move(dq.t), out.dk = std::move(dk.t), out.dv = std::move(dv.t);
  if (sinks)
    for (std::int64_t h = 0; h < c.hq; ++h) out.d_sinks.push_back(static_cast<float>(ds.t.at(h, 0, 0, 0)));
  return out;
}

}  // namespace attncheck
