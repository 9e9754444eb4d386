// The paged and ragged call adapter (forms.hpp): the paged form's arena and
// block table (paged_parts), the ragged form's packed tensors and offsets
// (ragged_parts), and the call that hands either to attend.
#include "forms.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <iterator>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "attncheck/isolate.hpp"
#include "attncheck/masked_fill.hpp"
#include "guarded.hpp"
#include "problem.hpp"

namespace attncheck::host {

namespace {

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
// and bf16) when the case's poison is `big`; for a subject that weights
// masked slots by zero, the finite fill of the case's poison (masked_fill.hpp).
std::uint32_t canary_bits(const attn_case& c, std::size_t at, const std::optional<finite_fill>& fill, fill_tensor which) {
  if (fill)
    return finite_fill_bits(c.type, which == fill_tensor::k ? fill->k_floor() : fill->v_floor(), which, at,
                            fill_variant(c.poison));
  if (c.poison == poison_kind::big) return encode(c.type, (at & 1 ? -1.0 : 1.0) * std::min(1e30, largest_finite(c.type)));
  return per_dtype(c.type, 0x7fc0ca11u, 0x7e11u, 0x7fcau, 0x7fu, 0x7du);
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

  paged_parts(const attn_case& c, bool masked_by_zero) {
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
    const std::optional<finite_fill> fill = masked_by_zero ? std::optional<finite_fill>(finite_fill_of(c)) : std::nullopt;
    for (std::size_t i = 0; i < kp.bits.size(); ++i) kp.bits[i] = canary_bits(c, i, fill, fill_tensor::k);
    for (std::size_t i = 0; i < vp.bits.size(); ++i) vp.bits[i] = canary_bits(c, i, fill, fill_tensor::v);
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

}  // namespace

subject_output attend_in_form(const attncheck_instance& inst, const attn_case& c, const call_layout& how, bool want_lse,
                              bool masked_by_zero) {
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
    paged.emplace(c, masked_by_zero);
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
    out.guard_report = finished_report(why);
  }
  return out;
}

}  // namespace attncheck::host
