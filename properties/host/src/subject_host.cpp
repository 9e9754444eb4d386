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

namespace attncheck {

namespace {

// Guard words on each side of every buffer handed to a subject: writes there
// are out of bounds; reads there meet NaN and show up in the result. Before a
// buffer: guard_elems. After it: as many elements as the buffer holds (at
// least guard_elems), so a subject that takes a 2-byte dtype for a 4-byte one
// (declares f16, reads and writes f32) stays inside the guards: the overrun
// is reported with a case that shrinks, not a heap it corrupts.
constexpr std::size_t guard_elems = 64;
std::size_t tail_guard(std::size_t payload) { return std::max(guard_elems, payload); }

// "k of the n guard elements, storage elements a..b": where a subject wrote
// outside a buffer, from the written guard elements' storage offsets.
std::string write_map(const std::vector<std::int64_t>& written, std::size_t guard) {
  std::ostringstream m;
  m << written.size() << " of the " << guard << " guard elements, storage element" << (written.size() > 1 ? "s " : " ")
    << written.front();
  if (written.size() > 1) m << ".." << written.back();
  return m.str();
}

std::uint32_t sentinel_bits(dtype t) {
  switch (t) {
    case dtype::f32: return 0x7fc0deadu;  // a quiet NaN with a payload nobody computes
    case dtype::f16: return 0x7e5au;
    case dtype::bf16: return 0x7fdau;
  }
  return 0x7fc0deadu;
}

// Packed bytes of a tensor's storage with guard elements on both sides; the
// tensor's element 0 starts at data().
struct guarded_bytes {
  std::vector<unsigned char> bytes;
  std::size_t width = 4;
  std::size_t payload = 0;  // elements

  guarded_bytes(const tensor& t) : width(size_of(t.type)), payload(t.bits.size()) {
    bytes.resize(elements() * width);
    const std::uint32_t s = sentinel_bits(t.type);
    for (std::size_t i = 0; i < elements(); ++i) put(i, s);
    const auto packed = t.packed_storage();
    if (!packed.empty()) std::memcpy(bytes.data() + guard_elems * width, packed.data(), packed.size());
  }
  void put(std::size_t i, std::uint32_t v) {
    if (width == 4) {
      std::memcpy(&bytes[i * 4], &v, 4);
    } else {
      const auto h = static_cast<std::uint16_t>(v);
      std::memcpy(&bytes[i * 2], &h, 2);
    }
  }
  std::uint32_t get(std::size_t i) const {
    if (width == 4) {
      std::uint32_t v;
      std::memcpy(&v, &bytes[i * 4], 4);
      return v;
    }
    std::uint16_t h;
    std::memcpy(&h, &bytes[i * 2], 2);
    return h;
  }
  unsigned char* data() { return bytes.data() + guard_elems * width; }
  std::size_t tail() const { return tail_guard(payload); }
  std::size_t elements() const { return guard_elems + payload + tail(); }
};

attncheck_dtype to_abi(dtype t) {
  switch (t) {
    case dtype::f32: return ATTNCHECK_F32;
    case dtype::f16: return ATTNCHECK_F16;
    case dtype::bf16: return ATTNCHECK_BF16;
  }
  return ATTNCHECK_F32;
}

attncheck_tensor view_of(guarded_bytes& g, const tensor& t) {
  attncheck_tensor v{};
  v.data = g.data() + static_cast<std::size_t>(t.offset) * g.width;
  for (int a = 0; a < 4; ++a) v.stride[a] = t.stride[a];
  return v;
}

// Marks which storage elements of t its view covers.
std::vector<bool> covered(const tensor& t) {
  std::vector<bool> in(t.bits.size(), false);
  for (std::int64_t a = 0; a < t.shape[0]; ++a)
    for (std::int64_t b = 0; b < t.shape[1]; ++b)
      for (std::int64_t c = 0; c < t.shape[2]; ++c)
        for (std::int64_t d = 0; d < t.shape[3]; ++d) in[static_cast<std::size_t>(t.index(a, b, c, d))] = true;
  return in;
}

// The header of a case without its tensors or mask: what make_output and
// fill_problem read. Copying a whole case per cache step copied all of K and V.
attn_case header_of(const attn_case& c, std::int64_t lq) {
  attn_case h;
  h.b = c.b, h.hq = c.hq, h.hkv = c.hkv, h.lq = lq, h.lk = c.lk, h.d = c.d, h.dv = c.dv;
  h.scale = c.scale;
  h.causal = c.causal;
  h.type = c.type;
  h.layout = c.layout;
  return h;
}

// The output tensor handed to the subject: the case's layout, every element
// (view and gaps) set to the sentinel so unwritten outputs and stray writes show.
struct output_buffers {
  tensor o;
  guarded_bytes og;
  std::vector<float> lse;  // guard + storage + guard
  std::size_t lse_n = 0;   // storage elements
  std::int64_t b = 0, hq = 0, lq = 0;
  std::array<std::int64_t, 3> lse_stride{};  // over (b, h, i)

  output_buffers(const attn_case& c, std::int64_t lq_, bool want_lse, bool lse_strided = false)
      : o(make_output_rows(c, lq_)), og(sentinel_fill(o)), b(c.b), hq(c.hq), lq(lq_) {
    if (want_lse) {
      // Dense (B, Hq, Lq), or (B, Lq, Hq) with a gap after every query
      // position and every batch element (non-dense strides, as a kernel
      // writing into a (B, Lq, Hq) slice of a bigger buffer sees them).
      lse_stride =
          lse_strided ? std::array<std::int64_t, 3>{lq * (hq + 1) + 2, 1, hq + 1} : std::array<std::int64_t, 3>{hq * lq, lq, 1};
      lse_n = static_cast<std::size_t>(b * lse_stride[0]);
      lse.assign(guard_elems + lse_n + tail_guard(lse_n), std::bit_cast<float>(sentinel_bits(dtype::f32)));
    }
  }
  static tensor make_output_rows(const attn_case& c, std::int64_t lq) { return make_output(header_of(c, lq)); }
  static tensor sentinel_fill(tensor& t) {
    std::fill(t.bits.begin(), t.bits.end(), sentinel_bits(t.type));
    return t;
  }
  float* lse_data() { return lse.empty() ? nullptr : lse.data() + guard_elems; }
  std::size_t lse_index(std::int64_t bi, std::int64_t h, std::int64_t i) const {
    return static_cast<std::size_t>(bi * lse_stride[0] + h * lse_stride[1] + i * lse_stride[2]);
  }

  // Copies the result back into subject_output and checks the guards.
  void collect(subject_output& out) {
    out.o = o;
    std::ostringstream why;
    const std::uint32_t s = sentinel_bits(o.type);
    const auto inside = covered(o);
    for (std::size_t i = 0; i < og.payload; ++i) {
      const std::uint32_t v = og.get(guard_elems + i);
      out.o.bits[i] = v;
      if (!inside[i] && v != s) {
        out.guard_violated = true;
        why << "wrote the gap element " << i << " of O's storage; ";
        break;
      }
    }
    // The write map outside O: which guard elements, before and after, changed.
    std::vector<std::int64_t> before, after;
    for (std::size_t i = 0; i < guard_elems; ++i)
      if (og.get(i) != s) before.push_back(static_cast<std::int64_t>(i) - static_cast<std::int64_t>(guard_elems));
    for (std::size_t i = 0; i < og.tail(); ++i)
      if (og.get(guard_elems + og.payload + i) != s) after.push_back(static_cast<std::int64_t>(og.payload + i));
    if (!before.empty() || !after.empty()) out.guard_violated = true;
    if (!before.empty()) why << "wrote before the start of O: " << write_map(before, guard_elems) << "; ";
    if (!after.empty())
      why << "wrote past the end of O (" << og.payload << " storage element" << (og.payload == 1 ? "" : "s")
          << "): " << write_map(after, og.tail())
          << (after.back() >= static_cast<std::int64_t>(2 * og.payload) - 1 && o.type != dtype::f32
                  ? " (as far as 4-byte elements would reach: a subject writing f32 into " + std::string(name(o.type)) + " O?)"
                  : "")
          << "; ";
    if (!lse.empty()) {
      const auto fs = sentinel_bits(dtype::f32);
      std::vector<bool> in(lse_n, false);
      for (std::int64_t bi = 0; bi < b; ++bi)
        for (std::int64_t h = 0; h < hq; ++h)
          for (std::int64_t i = 0; i < lq; ++i) in[lse_index(bi, h, i)] = true;
      std::vector<std::int64_t> stray;
      for (std::size_t i = 0; i < lse.size(); ++i) {
        const bool view = i >= guard_elems && i < guard_elems + lse_n && in[i - guard_elems];
        if (!view && std::bit_cast<std::uint32_t>(lse[i]) != fs)
          stray.push_back(static_cast<std::int64_t>(i) - static_cast<std::int64_t>(guard_elems));
      }
      if (!stray.empty()) {
        out.guard_violated = true;
        why << "wrote outside LSE's view (" << lse_n << " storage elements, strides " << lse_stride[0] << "," << lse_stride[1]
            << "," << lse_stride[2] << "): " << stray.size() << " element" << (stray.size() > 1 ? "s" : "") << ", storage element"
            << (stray.size() > 1 ? "s " : " ") << stray.front();
        if (stray.size() > 1) why << ".." << stray.back();
        why << "; ";
      }
      out.lse.assign(static_cast<std::size_t>(b * hq * lq), 0.0f);
      for (std::int64_t bi = 0; bi < b; ++bi)
        for (std::int64_t h = 0; h < hq; ++h)
          for (std::int64_t i = 0; i < lq; ++i)
            out.lse[static_cast<std::size_t>((bi * hq + h) * lq + i)] = lse[guard_elems + lse_index(bi, h, i)];
    }
    out.guard_report = why.str();
    if (out.guard_report.size() >= 2) out.guard_report.resize(out.guard_report.size() - 2);  // the last "; "
  }
};

// The call in its own forked child (call_isolation): the child sends back the
// status, the message and O's and LSE's buffers, guards included; a child that
// dies is a failed call (status -1) whose message says how it died.
int attend_in_child(const attncheck_instance& inst, const attncheck_problem& p, output_buffers& ob, char* err) {
  const std::size_t o_bytes = ob.og.bytes.size(), lse_bytes = ob.lse.size() * sizeof(float);
  const child_outcome co = run_isolated(
      [&] {
        prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the law's child
        const int rc = inst.attend(inst.state, &p, err, ATTNCHECK_ERR_CAPACITY);
        std::string payload(reinterpret_cast<const char*>(&rc), sizeof rc);
        payload.append(err, ATTNCHECK_ERR_CAPACITY);
        payload.append(reinterpret_cast<const char*>(ob.og.bytes.data()), o_bytes);
        payload.append(reinterpret_cast<const char*>(ob.lse.data()), lse_bytes);
        return payload;
      },
      86400);  // the law's own time limit and the watchdog stop a hang
  if (!co.completed || co.payload.size() != sizeof(int) + ATTNCHECK_ERR_CAPACITY + o_bytes + lse_bytes) {
    std::snprintf(err, ATTNCHECK_ERR_CAPACITY, "the call's own process was %s", co.describe().c_str());
    return -1;
  }
  int rc = 0;
  const char* at = co.payload.data();
  std::memcpy(&rc, at, sizeof rc);
  std::memcpy(err, at + sizeof rc, ATTNCHECK_ERR_CAPACITY);
  std::memcpy(ob.og.bytes.data(), at + sizeof rc + ATTNCHECK_ERR_CAPACITY, o_bytes);
  if (lse_bytes) std::memcpy(ob.lse.data(), at + sizeof rc + ATTNCHECK_ERR_CAPACITY + o_bytes, lse_bytes);
  return rc;
}

void fill_problem(attncheck_problem& p, const attn_case& c, int threads) {
  p.struct_size = sizeof(attncheck_problem);
  p.dtype = to_abi(c.type);
  p.b = c.b, p.hq = c.hq, p.hkv = c.hkv, p.lq = c.lq, p.lk = c.lk, p.d = c.d, p.dv = c.dv;
  p.scale = c.effective_scale();
  p.causal = c.causal ? 1 : 0;
  p.threads = threads;
}

// The contract 1.1 variants of a case as a version 3 problem carries them
// (subject.h, attncheck_variants): sinks and slopes point into the case, the
// bias is packed in its storage type with zero strides on broadcast dims.
struct variant_parts {
  attncheck_variants v{};
  std::vector<unsigned char> bias;

  explicit variant_parts(const attn_case& c) {
    const score_variants& w = c.variants;
    v.struct_size = sizeof v;
    v.window_left = w.window_left;
    v.window_right = w.window_right;
    v.chunk = w.chunk;
    v.softcap = w.softcap;
    v.sinks = w.has_sinks() ? w.sink_logits.data() : nullptr;
    v.alibi = w.has_alibi() ? w.alibi_slopes.data() : nullptr;
    v.bias_dtype = to_abi(w.bias_type);
    if (w.has_bias()) {
      bias = w.bias.packed_storage();
      v.bias = bias.data();
      const auto& bs = w.bias_shape;
      const std::int64_t dense[4] = {bs[1] * bs[2] * bs[3], bs[2] * bs[3], bs[3], 1};
      for (int a = 0; a < 4; ++a) v.bias_stride[a] = bs[a] == 1 ? 0 : dense[a];
    }
  }
};

void set_output(attncheck_problem& p, output_buffers& ob) {
  p.o = ob.og.data() + static_cast<std::size_t>(ob.o.offset) * ob.og.width;
  for (int a = 0; a < 4; ++a) p.o_stride[a] = ob.o.stride[a];
  p.lse = ob.lse_data();
  for (int a = 0; a < 3; ++a) p.lse_stride[a] = ob.lse_stride[a];
}

constexpr std::size_t err_cap = ATTNCHECK_ERR_CAPACITY;

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

  void hand_over(attncheck_problem& p, const attn_case& c, attncheck_variants* variants) {
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
    if (variants && c.variants.has_bias() && bs[2] != 1) {
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
      variants->bias = bias.data();
      variants->bias_stride[0] = d1 * c.lq * d3;
      variants->bias_stride[1] = d1 == 1 ? 0 : c.lq * d3;
      variants->bias_stride[2] = d3;
      variants->bias_stride[3] = d3 == 1 ? 0 : 1;
    }
  }
};

// A call in the paged or ragged form. O and LSE come back in the usual dense
// form (O in the case's layout, LSE (B, Hq, Lq)); the dense rows that are not
// part of a ragged problem hold the host's NaN sentinel, as an unwritten row does.
subject_output attend_in_form(const attncheck_instance& inst, const attn_case& c, const call_layout& how, bool want_lse) {
  subject_output out;
  attncheck_problem p{};
  fill_problem(p, c, how.threads);
  guarded_bytes qg(c.q), kg(c.k), vg(c.v);
  p.q = view_of(qg, c.q);
  p.k = view_of(kg, c.k);
  p.v = view_of(vg, c.v);
  std::vector<std::int64_t> key_len(static_cast<std::size_t>(c.b));
  for (std::int64_t b = 0; b < c.b; ++b) key_len[static_cast<std::size_t>(b)] = c.valid_keys(b);
  p.key_len = key_len.data();  // the paged form always gives n[b]; ragged alone clears it
  if (c.has_mask()) {
    const auto& ms = c.mask_shape;
    p.mask = c.mask.data();
    const std::int64_t s2 = ms[3], s1 = ms[2] * ms[3], s0 = ms[1] * ms[2] * ms[3];
    p.mask_stride[0] = ms[0] == 1 ? 0 : s0;
    p.mask_stride[1] = ms[1] == 1 ? 0 : s1;
    p.mask_stride[2] = ms[2] == 1 ? 0 : s2;
    p.mask_stride[3] = ms[3] == 1 ? 0 : 1;
  }
  variant_parts parts(c);
  if (c.variants.any()) p.variants = &parts.v;
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
    ragged->hand_over(p, c, c.variants.any() ? &parts.v : nullptr);
  }
  // O: the case's layout over (B, Lq) rows, or packed (1, total_q + tail rows) for ragged.
  attn_case packed_header = header_of(c, c.lq);
  if (ragged) {
    packed_header.b = 1;
    packed_header.lq = ragged->cu_q.back() + ragged_parts::tail_rows;
  }
  output_buffers ob(packed_header, packed_header.lq, want_lse, how.lse_strided);
  set_output(p, ob);
  if (ragged) p.o_stride[0] = 0, p.lse_stride[0] = 0;  // not used with ragged
  char err[err_cap] = {0};
  {
    const watched_call watch("attend", c.b * c.hq * c.lq * c.lk * (c.d + c.dv));
    out.status = call_isolation() ? attend_in_child(inst, p, ob, err) : inst.attend(inst.state, &p, err, err_cap);
  }
  err[err_cap - 1] = 0;
  if (out.status != 0) out.error = err;
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
    out.o = make_output(header_of(c, c.lq));
    output_buffers::sentinel_fill(out.o);
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

namespace {

// ---- Version 1 plugins, adapted to a version 2 instance ---------------------
namespace v1 {
const attncheck_subject* of(void* state) { return static_cast<const attncheck_subject*>(state); }
std::int64_t key_blocks(void* st, const attncheck_problem* p) { return of(st)->key_blocks ? of(st)->key_blocks(p) : 1; }
int attend(void* st, const attncheck_problem* p, char* err, std::size_t len) { return of(st)->attend(p, err, len); }
void* cache_create(void* st, const attncheck_cache_config* cfg, char* err, std::size_t len) {
  return of(st)->cache_create(cfg, err, len);
}
int cache_append(void* st, void* cache, const attncheck_tensor* k, const attncheck_tensor* v, std::int64_t c,
                 const std::int64_t* count, char* err, std::size_t len) {
  return of(st)->cache_append(cache, k, v, c, count, err, len);
}
int cache_attend(void* st, void* cache, const attncheck_problem* p, char* err, std::size_t len) {
  return of(st)->cache_attend(cache, p, err, len);
}
void cache_free(void* st, void* cache) { of(st)->cache_free(cache); }
void destroy(attncheck_instance* self) { delete self; }

attncheck_instance* adapt(const attncheck_subject* d) {
  auto* x = new attncheck_instance{};
  x->abi_version = ATTNCHECK_SUBJECT_ABI_VERSION_2;
  x->struct_size = sizeof *x;
  x->name = d->name;
  x->dtypes = d->dtypes, x->features = d->features, x->invariances = d->invariances;
  x->compute_unit_roundoff = d->compute_unit_roundoff, x->exp_ulps = d->exp_ulps;
  x->state = const_cast<attncheck_subject*>(d);
  x->key_blocks = key_blocks;
  x->attend = d->attend ? attend : nullptr;
  if (d->cache_create) x->cache_create = cache_create;
  if (d->cache_append) x->cache_append = cache_append;
  if (d->cache_attend) x->cache_attend = cache_attend;
  if (d->cache_free) x->cache_free = cache_free;
  x->destroy = destroy;
  return x;
}
}  // namespace v1

// Common production sizes, for a subject that declares none: tiles and
// split-KV chunks of widely used kernels sit at these.
constexpr std::int64_t production_lengths[] = {16, 32, 64, 128, 256, 512, 1024};

// Checks the declared numbers; throws input_error naming the field and the limit.
void check_declaration(const attncheck_instance& d, const std::string& spec) {
  if (!d.attend) throw input_error("subject", spec + " has no attend entry point");
  if ((d.features & ATTNCHECK_FEATURE_CACHE) && !(d.cache_create && d.cache_append && d.cache_attend && d.cache_free))
    throw input_error("subject", spec + " declares a cache but lacks cache_* entry points");
  const double u = d.compute_unit_roundoff;
  // The limits as subject.h names them: 2^-64 and 2^-8, 4096, 2^20.
  const auto power = [](double x) { return "2^" + std::to_string(std::ilogb(x)); };
  if (!(u >= ATTNCHECK_MIN_UNIT_ROUNDOFF && u <= ATTNCHECK_MAX_UNIT_ROUNDOFF))
    throw input_error("subject.compute_unit_roundoff", spec + " declares u = " + std::to_string(u) + "; it must lie in [" +
                                                           power(ATTNCHECK_MIN_UNIT_ROUNDOFF) + ", " +
                                                           power(ATTNCHECK_MAX_UNIT_ROUNDOFF) + "] (2^-24 for f32 compute)");
  if (!(d.exp_ulps >= 0 && d.exp_ulps <= ATTNCHECK_MAX_EXP_ULPS))
    throw input_error("subject.exp_ulps", spec + " declares exp_ulps = " + std::to_string(d.exp_ulps) + "; it must lie in [0, " +
                                              std::to_string(static_cast<long long>(ATTNCHECK_MAX_EXP_ULPS)) + "] ulps");
  const auto hint_ok = [](std::int64_t h) { return h >= 0 && h <= ATTNCHECK_MAX_SIZE_HINT; };
  bool ok = hint_ok(d.hints.q_tile) && hint_ok(d.hints.k_tile) && hint_ok(d.hints.split_keys);
  for (int i = 0; i < ATTNCHECK_SIZE_HINT_SLOTS; ++i) ok = ok && hint_ok(d.hints.lengths[i]) && hint_ok(d.hints.head_dims[i]);
  if (!ok) throw input_error("subject.hints", spec + " declares a size hint outside [0, " + power(ATTNCHECK_MAX_SIZE_HINT) + "]");
}

// The version 3 fields a version 3 instance declares, read only where its
// struct_size holds them (docs/abi.md: one that ends before features_v3
// loads with no version 3 feature).
struct v3_declaration {
  std::uint32_t features = 0, invariances = 0;
  double tanh_ulps = 0;
  bool backward = false;  // attend_backward set
};

v3_declaration read_v3(const attncheck_instance& d) {
  v3_declaration v;
  if (d.abi_version < ATTNCHECK_SUBJECT_ABI_VERSION_3) return v;
  const auto holds = [&](std::size_t end) { return d.struct_size >= end; };
  if (holds(offsetof(attncheck_instance, invariances_v3) + sizeof d.invariances_v3)) {
    v.features = d.features_v3;
    v.invariances = d.invariances_v3;
  }
  if (holds(offsetof(attncheck_instance, tanh_ulps) + sizeof d.tanh_ulps)) v.tanh_ulps = d.tanh_ulps;
  if (holds(offsetof(attncheck_instance, attend_backward) + sizeof d.attend_backward)) v.backward = d.attend_backward != nullptr;
  return v;
}

// Checks a version 3 declaration (docs/abi.md, "Declaration checks"); throws
// input_error naming the field, the bit and the rule.
void check_v3_declaration(const v3_declaration& v, const std::string& spec) {
  const auto hex = [](std::uint32_t x) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%x", x);
    return std::string(buf);
  };
  if (const std::uint32_t unknown = v.features & ~ATTNCHECK_FEATURE3_KNOWN)
    throw input_error("subject.features_v3", spec + " declares unknown bit(s) " + hex(unknown) + " (this attncheck knows " +
                                                 hex(ATTNCHECK_FEATURE3_KNOWN) +
                                                 "): a feature it cannot judge is refused, never silently passed");
  if (const std::uint32_t unknown = v.invariances & ~ATTNCHECK_CLAIM3_KNOWN)
    throw input_error("subject.invariances_v3", spec + " declares unknown claim bit(s) " + hex(unknown) +
                                                    " (this attncheck knows " + hex(ATTNCHECK_CLAIM3_KNOWN) + ")");
  if (v.backward != ((v.features & ATTNCHECK_FEATURE3_BACKWARD) != 0))
    throw input_error("subject.attend_backward", spec + (v.backward ? " sets attend_backward without FEATURE3_BACKWARD"
                                                                    : " declares FEATURE3_BACKWARD without attend_backward"));
  if ((v.features & ATTNCHECK_FEATURE3_BIAS_GRAD) && (v.features & (ATTNCHECK_FEATURE3_BIAS | ATTNCHECK_FEATURE3_BACKWARD)) !=
                                                         (ATTNCHECK_FEATURE3_BIAS | ATTNCHECK_FEATURE3_BACKWARD))
    throw input_error("subject.features_v3",
                      spec + " declares FEATURE3_BIAS_GRAD without both FEATURE3_BIAS and FEATURE3_BACKWARD");
  if ((v.features & ATTNCHECK_FEATURE3_BACKWARD_VARIANTS) && !(v.features & ATTNCHECK_FEATURE3_BACKWARD))
    throw input_error("subject.features_v3", spec + " declares FEATURE3_BACKWARD_VARIANTS without FEATURE3_BACKWARD");
  if ((v.features & ATTNCHECK_FEATURE3_SOFTCAP) && !(v.tanh_ulps >= 0 && v.tanh_ulps <= ATTNCHECK_MAX_TANH_ULPS))
    throw input_error("subject.tanh_ulps", spec + " declares tanh_ulps = " + std::to_string(v.tanh_ulps) +
                                               "; it must lie in [0, " +
                                               std::to_string(static_cast<long long>(ATTNCHECK_MAX_TANH_ULPS)) + "] ulps");
  const std::pair<std::uint32_t, std::uint32_t> claim_needs[] = {
      {ATTNCHECK_CLAIM3_PAGE_PLACEMENT, ATTNCHECK_FEATURE3_PAGED},
      {ATTNCHECK_CLAIM3_PAGED_EQUALS_DENSE, ATTNCHECK_FEATURE3_PAGED},
      {ATTNCHECK_CLAIM3_RAGGED_EQUALS_DENSE, ATTNCHECK_FEATURE3_RAGGED},
      {ATTNCHECK_CLAIM3_BACKWARD_DETERMINISTIC, ATTNCHECK_FEATURE3_BACKWARD},
  };
  for (const auto& [claim, feature] : claim_needs)
    if ((v.invariances & claim) && !(v.features & feature))
      throw input_error("subject.invariances_v3",
                        spec + " claims " + hex(claim) + " without the feature " + hex(feature) + " it is about");
}

// Splits NAME|PATH[:options]: options start at the first ':' followed by key=...
std::pair<std::string, std::string> split_spec(const std::string& spec) {
  for (std::size_t i = spec.find(':'); i != std::string::npos; i = spec.find(':', i + 1)) {
    const std::string rest = spec.substr(i + 1);
    const auto eq = rest.find('=');
    const auto comma = rest.find(',');
    if (rest.empty() || (eq != std::string::npos && (comma == std::string::npos || eq < comma) && eq > 0))
      return {spec.substr(0, i), rest};
  }
  return {spec, ""};
}

// A C++ plugin that defined its entry point outside extern "C" exports it
// mangled (_Z20attncheck_subject_v2PKcPcm): name that near-match and the fix.
std::string mangled_entry_hint(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  for (const char* entry : {ATTNCHECK_SUBJECT_ENTRY_V2, ATTNCHECK_SUBJECT_ENTRY}) {
    for (std::size_t at = bytes.find(entry); at != std::string::npos; at = bytes.find(entry, at + 1)) {
      // Walk back over the length digits to "_Z".
      std::size_t start = at;
      while (start > 0 && std::isdigit(static_cast<unsigned char>(bytes[start - 1]))) --start;
      if (start == at || start < 2 || bytes.compare(start - 2, 2, "_Z") != 0) continue;
      std::size_t end = at;
      while (end < bytes.size() && (std::isalnum(static_cast<unsigned char>(bytes[end])) || bytes[end] == '_')) ++end;
      return "; it has the C++ (mangled) symbol " + bytes.substr(start - 2, end - start + 2) +
             ": define the entry point inside extern \"C\" (attncheck/subject.h declares both entry points so, when "
             "included before the definition)";
    }
  }
  return "";
}

}  // namespace

subject::subject(attncheck_instance* inst, void* handle, std::string spec, unsigned abi)
    : inst_(inst), handle_(handle), spec_(std::move(spec)), abi_(abi) {
  hints_ = inst_->hints;
  default_hints_ = hints_.q_tile == 0 && hints_.k_tile == 0 && hints_.split_keys == 0 && hints_.lengths[0] == 0;
  if (default_hints_) {
    int n = 0;
    for (std::int64_t l : production_lengths) hints_.lengths[n++] = l;
  }
}

subject::~subject() {
  if (inst_ && inst_->destroy) inst_->destroy(inst_);
  if (handle_) dlclose(handle_);
}

std::shared_ptr<subject> subject::wrap(const attncheck_subject* desc, std::string spec) {
  if (!desc) throw input_error("subject", spec + " returned no descriptor");
  if (desc->abi_version != ATTNCHECK_SUBJECT_ABI_VERSION_1)
    throw input_error("subject", spec + " has ABI version " + std::to_string(desc->abi_version) +
                                     " in its attncheck_subject_v1 descriptor; expected " +
                                     std::to_string(ATTNCHECK_SUBJECT_ABI_VERSION_1));
  attncheck_instance* x = v1::adapt(desc);
  try {
    check_declaration(*x, spec);
  } catch (...) {
    x->destroy(x);
    throw;
  }
  return std::shared_ptr<subject>(new subject(x, nullptr, std::move(spec), 1));
}

std::shared_ptr<subject> subject::adopt(attncheck_instance* inst, std::string spec) {
  if (!inst) throw input_error("subject", spec + " returned no instance");
  const bool known_version =
      inst->abi_version == ATTNCHECK_SUBJECT_ABI_VERSION_2 || inst->abi_version == ATTNCHECK_SUBJECT_ABI_VERSION_3;
  if (!known_version || inst->struct_size < ATTNCHECK_INSTANCE_V2_SIZE) {
    if (inst->destroy) inst->destroy(inst);
    throw input_error("subject", spec + " returned an instance of ABI version " + std::to_string(inst->abi_version) +
                                     " (struct_size " + std::to_string(inst->struct_size) + "); expected version 2 or 3");
  }
  v3_declaration v3;
  try {
    check_declaration(*inst, spec);
    v3 = read_v3(*inst);
    check_v3_declaration(v3, spec);
  } catch (...) {
    if (inst->destroy) inst->destroy(inst);
    throw;
  }
  auto s = std::shared_ptr<subject>(new subject(inst, nullptr, std::move(spec), inst->abi_version));
  s->features_v3_ = v3.features;
  s->invariances_v3_ = v3.invariances;
  s->tanh_ulps_ = (v3.features & ATTNCHECK_FEATURE3_SOFTCAP) ? v3.tanh_ulps : 0.0;
  return s;
}

std::shared_ptr<subject> subject::make_v2(attncheck_subject_entry_v2 entry, const std::string& options, const std::string& spec,
                                          const std::string& who) {
  char err[err_cap] = {0};
  auto* inst = entry(options.c_str(), err, err_cap);
  if (!inst) {
    err[err_cap - 1] = 0;
    throw input_error("subject",
                      "'" + spec + "': " + who + " refused the options '" + options + "': " + (err[0] ? err : "no reason given"));
  }
  return adopt(inst, spec);
}

std::shared_ptr<subject> subject::load(const std::string& spec) {
  const auto parts = split_spec(spec);
  const std::string& where = parts.first;
  const std::string& options = parts.second;
  const auto kinds = subject_kinds();
  for (const auto& k : kinds)
    if (k.whole_spec && spec.rfind(k.name + ":", 0) == 0) return k.make(spec, spec.substr(k.name.size() + 1));
  for (const auto& k : kinds)
    if (!k.whole_spec && where == k.name) return k.make(spec, options);
  // dlopen searches the library path for a name without '/': a plugin in the
  // current folder is meant when the name is a file here.
  std::error_code ec;
  const std::string path =
      where.find('/') == std::string::npos && std::filesystem::is_regular_file(where, ec) ? "./" + where : where;
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    std::string expected;  // the registered kinds that carry a hint: "a, b or "
    std::size_t named = 0;
    for (const auto& k : kinds) named += !k.hint.empty();
    for (const auto& k : kinds)
      if (!k.hint.empty()) expected += k.hint + (--named ? ", " : " or ");
    throw input_error("subject", "cannot load '" + where + "': " + (e ? e : "unknown error") + " (expected " + expected +
                                     "a path to a plugin .so[:options])");
  }
  std::shared_ptr<subject> s;
  try {
    // The newest entry first: a plugin may export older ones for older hosts.
    if (auto v3 = reinterpret_cast<attncheck_subject_entry_v2>(dlsym(h, ATTNCHECK_SUBJECT_ENTRY_V3))) {
      s = make_v2(v3, options, spec, where);
    } else if (auto v2 = reinterpret_cast<attncheck_subject_entry_v2>(dlsym(h, ATTNCHECK_SUBJECT_ENTRY_V2))) {
      s = make_v2(v2, options, spec, where);
    } else if (auto v1e = reinterpret_cast<attncheck_subject_entry>(dlsym(h, ATTNCHECK_SUBJECT_ENTRY))) {
      if (!options.empty())
        throw input_error("subject", "'" + spec + "': " + where + " is an ABI v1 plugin and takes no options");
      s = wrap(v1e(), spec);
    } else {
      throw input_error("subject", where + " exports neither " ATTNCHECK_SUBJECT_ENTRY_V2 " nor " ATTNCHECK_SUBJECT_ENTRY +
                                       mangled_entry_hint(path));
    }
  } catch (...) {
    dlclose(h);
    throw;
  }
  s->handle_ = h;
  return s;
}

declared_numbers subject::declared() const {
  declared_numbers d;
  d.u = inst_->compute_unit_roundoff;
  d.exp_ulps = inst_->exp_ulps;
  d.tanh_ulps = tanh_ulps_;
  d.features_v3 = features_v3_;
  for (std::int64_t lk : {1, 64, 1024, 4096}) {
    attn_case c;
    c.lk = lk;
    d.nb_at.emplace_back(lk, key_blocks(c));
  }
  return d;
}

std::string subject::cannot_take(const attn_case& c, bool want_lse) const {
  if (!(inst_->dtypes & (1u << static_cast<unsigned>(to_abi(c.type)))))
    return std::string("no ") + std::string(attncheck::name(c.type));
  if (c.causal && !has(ATTNCHECK_FEATURE_CAUSAL)) return "no causal mask";
  if (c.has_padding() && !has(ATTNCHECK_FEATURE_PADDING)) return "no key padding";
  if (c.has_mask() && !has(ATTNCHECK_FEATURE_MASK)) return "no boolean mask";
  if (want_lse && !has_lse()) return "no LSE";
  // Contract 1.1 variants: given only to a version 3 subject that declared each one.
  const score_variants& w = c.variants;
  const std::pair<bool, std::pair<std::uint32_t, const char*>> variants[] = {
      {w.has_window(), {ATTNCHECK_FEATURE3_WINDOW, "no sliding window"}},
      {w.has_chunk(), {ATTNCHECK_FEATURE3_CHUNK, "no chunked attention"}},
      {w.has_softcap(), {ATTNCHECK_FEATURE3_SOFTCAP, "no softcap"}},
      {w.has_sinks(), {ATTNCHECK_FEATURE3_SINKS, "no attention sinks"}},
      {w.has_alibi(), {ATTNCHECK_FEATURE3_ALIBI, "no ALiBi"}},
      {w.has_bias(), {ATTNCHECK_FEATURE3_BIAS, "no additive bias"}},
  };
  for (const auto& [used, need] : variants)
    if (used && !has_v3(need.first)) return need.second;
  // Contract 1.2 input forms: likewise, only to a subject that declared each.
  if (c.form.paged() && !has_v3(ATTNCHECK_FEATURE3_PAGED)) return "no paged K/V";
  if (c.form.ragged && !has_v3(ATTNCHECK_FEATURE3_RAGGED)) return "no ragged batches";
  return {};
}

std::int64_t subject::key_blocks(const attn_case& c) const {
  if (!inst_->key_blocks) return 1;
  attncheck_problem p{};
  fill_problem(p, c, 0);
  const variant_parts parts(c);
  if (c.variants.any()) p.variants = &parts.v;  // cannot_take() keeps variants from older subjects
  const std::int64_t cap = std::max<std::int64_t>(1, ATTNCHECK_MAX_KEY_BLOCKS_PER_KEY * c.lk);
  const watched_call watch("key_blocks", 0);
  return std::clamp<std::int64_t>(inst_->key_blocks(inst_->state, &p), 1, cap);
}

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
  guarded_bytes qg(c.q), kg(c.k), vg(c.v);
  output_buffers ob(c, c.lq, has_lse(), how.lse_strided);
  attncheck_problem p{};
  fill_problem(p, c, how.threads);
  p.q = view_of(qg, c.q);
  p.k = view_of(kg, c.k);
  p.v = view_of(vg, c.v);
  std::vector<std::int64_t> key_len = c.key_len;
  if (c.has_padding()) p.key_len = key_len.data();
  std::vector<std::uint8_t> mask;
  if (c.has_mask()) {
    const auto& ms = c.mask_shape;
    if (!how.mask_expanded) {
      p.mask = c.mask.data();
      const std::int64_t s3 = 1, s2 = ms[3], s1 = ms[2] * ms[3], s0 = ms[1] * ms[2] * ms[3];
      p.mask_stride[0] = ms[0] == 1 ? 0 : s0;
      p.mask_stride[1] = ms[1] == 1 ? 0 : s1;
      p.mask_stride[2] = ms[2] == 1 ? 0 : s2;
      p.mask_stride[3] = ms[3] == 1 ? 0 : s3;
    } else {
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
  }
  const variant_parts parts(c);
  if (c.variants.any()) p.variants = &parts.v;  // cannot_take() keeps variants from older subjects
  set_output(p, ob);
  char err[err_cap] = {0};
  {
    // The per-call watchdog times the subject's code alone, not the host's copies.
    const watched_call watch("attend", c.b * c.hq * c.lq * c.lk * (c.d + c.dv));
    if (call_isolation())
      out.status = attend_in_child(*inst_, p, ob, err);
    else
      out.status = inst_->attend(inst_->state, &p, err, err_cap);
  }
  err[err_cap - 1] = 0;
  if (out.status != 0) out.error = err;
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
    if (c.variants.any()) p.variants = &parts.v;
    p.q = view_of(qg, qn);
    set_output(p, ob);
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

namespace {

// One output of a backward call: the tensor in the case's layout, every
// storage element (view and gaps) and both guard bands poisoned with the
// sentinel, so that unwritten elements and stray writes show.
struct guarded_output {
  tensor t;
  guarded_bytes g;
  const char* label;
  guarded_output(dtype type, dims4 shape, layout_kind layout, const char* what)
      : t(poisoned(type, shape, layout)), g(t), label(what) {}
  static tensor poisoned(dtype type, dims4 shape, layout_kind layout) {
    tensor x = make_tensor(type, shape, layout);
    std::fill(x.bits.begin(), x.bits.end(), sentinel_bits(type));
    return x;
  }
  void* view() { return g.data() + static_cast<std::size_t>(t.offset) * g.width; }
  // Copies the result into t; appends to `why` where the subject wrote outside the view.
  bool collect(std::ostringstream& why) {
    bool violated = false;
    const std::uint32_t s = sentinel_bits(t.type);
    const auto inside = covered(t);
    for (std::size_t i = 0; i < g.payload; ++i) {
      const std::uint32_t v = g.get(guard_elems + i);
      t.bits[i] = v;
      if (!inside[i] && v != s && !violated) {
        violated = true;
        why << "wrote the gap element " << i << " of " << label << "'s storage; ";
      }
    }
    std::vector<std::int64_t> before, after;
    for (std::size_t i = 0; i < guard_elems; ++i)
      if (g.get(i) != s) before.push_back(static_cast<std::int64_t>(i) - static_cast<std::int64_t>(guard_elems));
    for (std::size_t i = 0; i < g.tail(); ++i)
      if (g.get(guard_elems + g.payload + i) != s) after.push_back(static_cast<std::int64_t>(g.payload + i));
    if (!before.empty()) why << "wrote before the start of " << label << ": " << write_map(before, guard_elems) << "; ";
    if (!after.empty())
      why << "wrote past the end of " << label << " (" << g.payload << " storage elements): " << write_map(after, g.tail())
          << "; ";
    return violated || !before.empty() || !after.empty();
  }
};

}  // namespace

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
  guarded_bytes qg(c.q), kg(c.k), vg(c.v), og(in.o), dog(in.d_o);
  attncheck_problem p{};
  fill_problem(p, c, threads);
  p.q = view_of(qg, c.q);
  p.k = view_of(kg, c.k);
  p.v = view_of(vg, c.v);
  std::vector<std::int64_t> key_len = c.key_len;
  if (c.has_padding()) p.key_len = key_len.data();
  if (c.has_mask()) {
    const auto& ms = c.mask_shape;
    p.mask = c.mask.data();
    const std::int64_t dense[4] = {ms[1] * ms[2] * ms[3], ms[2] * ms[3], ms[3], 1};
    for (int a = 0; a < 4; ++a) p.mask_stride[a] = ms[a] == 1 ? 0 : dense[a];
  }
  const variant_parts parts(c);
  if (c.variants.any()) p.variants = &parts.v;
  // LSE handed in dense (B, Hq, Lq) between guard bands of NaN.
  std::vector<float> lse(guard_elems + in.lse.size() + tail_guard(in.lse.size()),
                         std::bit_cast<float>(sentinel_bits(dtype::f32)));
  std::copy(in.lse.begin(), in.lse.end(), lse.begin() + guard_elems);
  guarded_output dq(c.type, c.q.shape, c.layout, "dQ"), dk(c.type, c.k.shape, c.layout, "dK"),
      dv(c.type, c.v.shape, c.layout, "dV");
  // d(sink): Hq f32 entries with sinks (a subject without BACKWARD_VARIANTS is never handed a variant).
  const bool sinks = c.variants.has_sinks();
  guarded_output ds(dtype::f32, dims4{sinks ? c.hq : 1, 1, 1, 1}, layout_kind::bshd, "d_sinks");
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
  char err[err_cap] = {0};
  {
    const watched_call watch("attend_backward", 3 * c.b * c.hq * c.lq * c.lk * (c.d + c.dv));
    if (call_isolation()) {
      // The call in its own forked child, as attend_in_child: the child sends
      // back the status, the message and the three outputs' guarded buffers.
      std::vector<guarded_output*> outs{&dq, &dk, &dv, &ds};
      std::size_t total = 0;
      for (auto* o : outs) total += o->g.bytes.size();
      const child_outcome co = run_isolated(
          [&] {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            const int rc = inst_->attend_backward(inst_->state, &bp, err, err_cap);
            std::string payload(reinterpret_cast<const char*>(&rc), sizeof rc);
            payload.append(err, err_cap);
            for (auto* o : outs) payload.append(reinterpret_cast<const char*>(o->g.bytes.data()), o->g.bytes.size());
            return payload;
          },
          86400);
      if (!co.completed || co.payload.size() != sizeof(int) + err_cap + total) {
        std::snprintf(err, err_cap, "the call's own process was %s", co.describe().c_str());
        out.status = -1;
      } else {
        const char* at = co.payload.data();
        std::memcpy(&out.status, at, sizeof out.status);
        std::memcpy(err, at + sizeof out.status, err_cap);
        at += sizeof out.status + err_cap;
        for (auto* o : outs) {
          std::memcpy(o->g.bytes.data(), at, o->g.bytes.size());
          at += o->g.bytes.size();
        }
      }
    } else {
      out.status = inst_->attend_backward(inst_->state, &bp, err, err_cap);
    }
  }
  err[err_cap - 1] = 0;
  if (out.status != 0) out.error = err;
  std::ostringstream why;
  const bool v1 = dq.collect(why), v2 = dk.collect(why), v3 = dv.collect(why), v4 = ds.collect(why);
  out.guard_violated = v1 || v2 || v3 || v4;
  out.guard_report = why.str();
  if (out.guard_report.size() >= 2) out.guard_report.resize(out.guard_report.size() - 2);
  out.dq = std::move(dq.t), out.dk = std::move(dk.t), out.dv = std::move(dv.t);
  if (sinks)
    for (std::int64_t h = 0; h < c.hq; ++h) out.d_sinks.push_back(static_cast<float>(ds.t.at(h, 0, 0, 0)));
  return out;
}

}  // namespace attncheck
