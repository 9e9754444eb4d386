// validate(): every field of a case against docs/spec.md and the memory limits.
#include <array>
#include <cmath>
#include <limits>
#include <initializer_list>
#include <string>
#include <utility>

#include "attncheck/case.hpp"
#include "attncheck/features.hpp"
#include "layout.hpp"

namespace attncheck {

namespace {

using detail::checked_add;
using detail::checked_mul;

[[noreturn]] void fail(std::string field, const std::string& what) { throw input_error(std::move(field), what); }

std::string str(std::int64_t v) { return std::to_string(v); }

void check_dim(const char* field, std::int64_t v, const case_limits& limits) {
  if (v < 1) fail(field, std::string(field) + "=" + str(v) + " must be >= 1");
  if (v > limits.max_dim) fail(field, std::string(field) + "=" + str(v) + " exceeds max_dim=" + str(limits.max_dim));
}

struct factor {
  const char* name;
  std::int64_t value;
};

// Multiplies named sizes without overflow and checks the product against a
// limit; the message spells the product out ("b*lk*hkv*d = 2*3*2*3 = 36").
std::int64_t checked_product(const std::string& field, std::initializer_list<factor> factors, std::int64_t limit,
                             const char* limit_name) {
  std::string names, values;
  std::int64_t p = 1;
  bool overflow = false;
  for (const factor& f : factors) {
    names += (names.empty() ? "" : "*") + std::string(f.name);
    values += (values.empty() ? "" : "*") + str(f.value);
    if (!overflow) {
      auto r = checked_mul(p, f.value);
      if (r)
        p = *r;
      else
        overflow = true;
    }
  }
  if (overflow) fail(field, names + " = " + values + " overflows int64");
  if (p > limit) fail(field, names + " = " + values + " = " + str(p) + " exceeds " + limit_name + "=" + str(limit));
  return p;
}

std::string dims_text(const dims4& d) { return "[" + str(d[0]) + "," + str(d[1]) + "," + str(d[2]) + "," + str(d[3]) + "]"; }

// Storage elements of a tensor: as held, or as materialize() will allocate it.
std::int64_t storage_of(const tensor& t, dims4 shape, layout_kind layout, const std::string& field) {
  if (!t.bits.empty()) return static_cast<std::int64_t>(t.bits.size());
  const auto g = detail::layout_geometry(shape, layout);
  if (!g) fail(field, "storage of the " + std::string(name(layout)) + " layout overflows int64");
  return g->storage;
}

void check_tensor(const tensor& t, const std::string& field, const char* role, dims4 want, const char* want_names, dtype type,
                  const case_limits& limits) {
  if (t.type != type)
    fail(field + ".type", "is " + std::string(name(t.type)) + ", the case's dtype is " + std::string(name(type)));
  if (t.shape != want)
    fail(field + ".shape", "is " + dims_text(t.shape) + ", " + role + " needs " + want_names + " = " + dims_text(want));
  for (int a = 0; a < 4; ++a)
    if (t.stride[a] < 0) fail(field + ".stride[" + std::to_string(a) + "]", "=" + str(t.stride[a]) + " must be >= 0");
  if (t.offset < 0) fail(field + ".offset", "=" + str(t.offset) + " must be >= 0");
  const auto held = static_cast<std::int64_t>(t.bits.size());
  if (held > limits.max_elements)
    fail(field + ".storage", "holds " + str(held) + " elements, over max_elements=" + str(limits.max_elements));
  // Largest reachable index, overflow-safe: hostile strides must not wrap.
  std::optional<std::int64_t> last = t.offset;
  for (int a = 0; a < 4 && last; ++a) {
    auto step = checked_mul(t.shape[a] - 1, t.stride[a]);
    last = step ? checked_add(*last, *step) : std::nullopt;
  }
  if (!last) fail(field + ".stride", "the view's last element lies beyond int64");
  if (*last >= held)
    fail(field + ".storage", "the view reaches element " + str(*last) + " but the storage holds " + str(held) + " elements");
  if (size_of(t.type) < 4) {
    const std::uint32_t top = (1u << (8 * size_of(t.type))) - 1;
    for (std::size_t i = 0; i < t.bits.size(); ++i)
      if (t.bits[i] > top)
        fail(field + ".bits", "element " + std::to_string(i) + " has bits above the " + std::to_string(8 * size_of(t.type)) +
                                  "-bit " + std::string(name(t.type)) + " width");
  }
}

// Contract 1.2 input forms (docs/spec.md "Paged KV", "Ragged batches"):
// each field in its range, naming the field and the limit (subject.h's
// ATTNCHECK_MAX_PAGE_SIZE and ATTNCHECK_MAX_RAGGED_SEQUENCES).
void validate_form(const attn_case& c, const case_limits& limits) {
  const input_form& f = c.form;
  if (f.page_size < 0 || f.page_size > max_page_size)
    fail("pages", "page size " + str(f.page_size) + " is outside [1, " + str(max_page_size) + "] (ATTNCHECK_MAX_PAGE_SIZE)");
  if (static_cast<int>(f.page_order) > static_cast<int>(page_order_kind::reversed))
    fail("page_order", "is not one of shuffled, in_order, reversed");
  if (static_cast<int>(f.table_tail) > static_cast<int>(table_tail_kind::invalid))
    fail("table_tail", "is not one of stale, invalid");
  if (!f.paged()) {
    const std::pair<bool, const char*> paged_only[] = {
        {f.spare_pages != 0, "spare_pages"},
        {f.shared_pages != 0, "shared_pages"},
        {f.page_order != page_order_kind::shuffled, "page_order"},
        {f.table_tail != table_tail_kind::stale, "table_tail"},
    };
    for (const auto& [set, field] : paged_only)
      if (set) fail(field, "needs the paged form (pages=P)");
  } else {
    if (f.spare_pages < 0 || f.spare_pages > max_spare_pages)
      fail("spare_pages", "=" + str(f.spare_pages) + " is outside [0, " + str(max_spare_pages) + "]");
    const std::int64_t pages = (c.lk + f.page_size - 1) / f.page_size;
    if (f.shared_pages < 0 || f.shared_pages > pages)
      fail("shared_pages", "=" + str(f.shared_pages) + " is outside [0, ceil(lk / P)=" + str(pages) + "]");
    // Pages in the arena and entries in a table row are int32 page numbers.
    if (c.b > (std::int64_t{1} << 31) / (pages + f.spare_pages + 1))
      fail("pages", "b=" + str(c.b) + " sequences of " + str(pages) + " pages each need page numbers beyond int32");
    // The arena the host builds: every page of every sequence plus the spare ones.
    checked_product("spare_pages",
                    {{"pages in the arena", c.b * pages + f.spare_pages},
                     {"pages", f.page_size},
                     {"hkv", c.hkv},
                     {"max(d,dv)", std::max(c.d, c.dv)}},
                    limits.max_elements, "max_elements");
  }
  if (!f.ragged && !f.q_len.empty()) fail("qlen", "needs the ragged form (ragged)");
  if (f.ragged) {
    if (c.b > max_ragged_sequences)
      fail("b", "=" + str(c.b) + " sequences in a ragged batch, over " + str(max_ragged_sequences) +
                    " (ATTNCHECK_MAX_RAGGED_SEQUENCES)");
    if (!f.q_len.empty()) {
      if (static_cast<std::int64_t>(f.q_len.size()) != c.b)
        fail("qlen", "has " + std::to_string(f.q_len.size()) + " entries, b=" + str(c.b) + " needs " + str(c.b));
      for (std::size_t i = 0; i < f.q_len.size(); ++i)
        if (f.q_len[i] < 0 || f.q_len[i] > c.lq)
          fail("qlen[" + std::to_string(i) + "]", "=" + str(f.q_len[i]) + " is outside [0, lq=" + str(c.lq) + "]");
    }
  }
}

}  // namespace

void validate(const attn_case& c, bool tensors_required, const case_limits& limits) {
  check_dim("b", c.b, limits);
  check_dim("hq", c.hq, limits);
  check_dim("hkv", c.hkv, limits);
  check_dim("lq", c.lq, limits);
  check_dim("lk", c.lk, limits);
  check_dim("d", c.d, limits);
  check_dim("dv", c.dv, limits);
  if (c.hq % c.hkv != 0) fail("hkv", "hq=" + str(c.hq) + " is not a multiple of hkv=" + str(c.hkv));

  if (static_cast<int>(c.type) > static_cast<int>(dtype::bf16))
    fail("dtype", "is not f32, f16 or bf16 (O's type; fp8 inputs: qtype=, ktype=, vtype=)");
  if (static_cast<int>(c.values) > static_cast<int>(value_kind::max_v)) fail("values", "is not a known value kind");
  if (static_cast<int>(c.layout) > static_cast<int>(layout_kind::padded)) fail("layout", "is not a known layout");
  if (static_cast<int>(c.poison) > static_cast<int>(poison_kind::big)) fail("poison", "is not a known poison");
  if (c.scale && !std::isfinite(*c.scale)) fail("scale", "must be finite");

  checked_product("q", {{"b", c.b}, {"lq", c.lq}, {"hq", c.hq}, {"d", c.d}}, limits.max_elements, "max_elements");
  checked_product("k", {{"b", c.b}, {"lk", c.lk}, {"hkv", c.hkv}, {"d", c.d}}, limits.max_elements, "max_elements");
  checked_product("v", {{"b", c.b}, {"lk", c.lk}, {"hkv", c.hkv}, {"dv", c.dv}}, limits.max_elements, "max_elements");
  checked_product("o", {{"b", c.b}, {"lq", c.lq}, {"hq", c.hq}, {"dv", c.dv}}, limits.max_elements, "max_elements");
  checked_product("shape", {{"b", c.b}, {"hq", c.hq}, {"lq", c.lq}, {"lk", c.lk}}, limits.max_pairs, "max_pairs");

  if (c.has_padding()) {
    if (static_cast<std::int64_t>(c.key_len.size()) != c.b)
      fail("key_len", "has " + std::to_string(c.key_len.size()) + " entries, b=" + str(c.b) + " needs " + str(c.b));
    for (std::size_t i = 0; i < c.key_len.size(); ++i)
      if (c.key_len[i] < 0 || c.key_len[i] > c.lk)
        fail("key_len[" + std::to_string(i) + "]", "=" + str(c.key_len[i]) + " is outside [0, lk=" + str(c.lk) + "]");
  }

  validate_form(c, limits);

  std::int64_t mask_entries = 0;
  const auto& ms = c.mask_shape;
  if (ms == std::array<std::int64_t, 4>{}) {
    if (!c.mask.empty()) fail("mask", "has " + std::to_string(c.mask.size()) + " entries but mask_shape is unset");
  } else {
    const std::array<std::pair<const char*, std::int64_t>, 4> full{{{"b", c.b}, {"hq", c.hq}, {"lq", c.lq}, {"lk", c.lk}}};
    for (int a = 0; a < 4; ++a)
      if (ms[a] != 1 && ms[a] != full[a].second)
        fail("mask_shape", "dim " + std::to_string(a) + " is " + str(ms[a]) + ", must be 1 or " + full[a].first + "=" +
                               str(full[a].second) + " (broadcast to b x hq x lq x lk)");
    mask_entries = ms[0] * ms[1] * ms[2] * ms[3];  // each dim is 1 or a checked size; b*hq*lq*lk fit above
    if (mask_entries > limits.max_elements)
      fail("mask_shape", "has " + str(mask_entries) + " entries, over max_elements=" + str(limits.max_elements));
    if (!c.mask.empty() || tensors_required) {
      if (static_cast<std::int64_t>(c.mask.size()) != mask_entries)
        fail("mask", "has " + std::to_string(c.mask.size()) + " entries, mask_shape " + str(ms[0]) + "x" + str(ms[1]) + "x" +
                         str(ms[2]) + "x" + str(ms[3]) + " needs " + str(mask_entries));
      for (std::size_t i = 0; i < c.mask.size(); ++i)
        if (c.mask[i] > 1) fail("mask[" + std::to_string(i) + "]", "=" + std::to_string(c.mask[i]) + " must be 0 or 1");
    }
  }

  // Each feature's own fields (attncheck/features.hpp): the contract 1.1 variants' ranges, vector lengths and bias.
  for (const contract_feature& f : contract_features())
    if (f.check) f.check(c, tensors_required, limits);
  const auto& bs = c.variants.bias_shape;
  const std::int64_t bias_bytes = 4 * bs[0] * bs[1] * bs[2] * bs[3];  // tensor::bits: 4 bytes an entry (checked <= max_elements)

  struct role {
    const tensor& t;
    const char* field;
    const char* name;
    dims4 shape;
    const char* names;
    dtype type;
  };
  const role roles[] = {
      {c.q, "q", "Q", {c.b, c.lq, c.hq, c.d}, "(b,lq,hq,d)", c.q_type()},
      {c.k, "k", "K", {c.b, c.lk, c.hkv, c.d}, "(b,lk,hkv,d)", c.k_type()},
      {c.v, "v", "V", {c.b, c.lk, c.hkv, c.dv}, "(b,lk,hkv,dv)", c.v_type()},
  };
  for (const role& r : roles) {
    if (r.t.bits.empty()) {
      if (tensors_required) fail(r.field, std::string(r.name) + " is missing (no storage)");
      continue;
    }
    check_tensor(r.t, r.field, r.name, r.shape, r.names, r.type, limits);
  }

  // Everything the case holds in memory: 4 bytes per element as stored in
  // tensor::bits, whatever the dtype, plus one byte per mask entry.
  std::optional<std::int64_t> total = checked_add(mask_entries, bias_bytes);
  for (const role& r : roles) {
    const auto bytes = checked_mul(storage_of(r.t, r.shape, c.layout, r.field), 4);
    total = total && bytes ? checked_add(*total, *bytes) : std::nullopt;
  }
  const auto o_bytes = checked_mul(storage_of(tensor{}, output_shape(c), c.layout, "o"), 4);
  total = total && o_bytes ? checked_add(*total, *o_bytes) : std::nullopt;
  if (!total || *total > limits.max_bytes)
    fail("case", "Q, K, V, O, the mask and the bias take " + (total ? str(*total) : std::string("over 2^63")) +
                     " bytes, over max_bytes=" + str(limits.max_bytes));
}

}  // namespace attncheck
