// The paged and ragged forms (attnimpl/paged.hpp) give the dense form's bits
// on every instruction set, thread count and tile config: page sizes 1 to
// 512, shuffled page orders, arenas of any strides, stale and invalid table
// tails, NaN in every unused slot and page, shared pages, zero-length
// sequences on either side. The dense reference is one run (portable, one
// thread) per problem and config; every other run must match it bit for bit.
// Bad arguments are refused with a message naming the field.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "attnimpl/paged.hpp"
#include "support.hpp"

namespace {

using namespace attnimpl_test;
using attnimpl::isa;

constexpr float nan_value = std::numeric_limits<float>::quiet_NaN();

std::uint32_t bits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

std::vector<isa> isas() {
  std::vector<isa> v{isa::portable};
  if (attnimpl::isa_supported(isa::avx2)) v.push_back(isa::avx2);
  if (attnimpl::isa_supported(isa::avx512)) v.push_back(isa::avx512);
  return v;
}

/// Production tiles, tiny tiles, and tiles that split keys across threads.
std::vector<attnimpl::config> tile_configs() {
  attnimpl::config production, tiny, split;
  tiny.q_tile = 2, tiny.k_tile = 3, tiny.split_keys = 6;
  split.k_tile = 16, split.split_keys = 48;
  return {production, tiny, split};
}

/// K and V of a dense problem moved into page arenas through a table.
struct arenas {
  std::int64_t page_size = 1, num_pages = 0, max_pages = 0, table_stride = 0;
  buffer k, v;
  std::vector<std::int32_t> table;

  attnimpl::paged_kv view() const {
    attnimpl::paged_kv kv;
    kv.page_size = page_size;
    kv.num_pages = num_pages;
    kv.k_pages = k.in();
    kv.v_pages = v.in();
    kv.table = table.data();
    kv.table_stride = table_stride;
    kv.max_pages = max_pages;
    return kv;
  }
};

/// Pages for n[b] keys of each sequence (the first `shared` pages of every
/// sequence are sequence 0's: its keys must be equal there), in a shuffled
/// physical order with two spare pages; NaN in every unused slot and page;
/// each row's tail past ceil(n[b] / P) stale page numbers (invalid_tail:
/// -1, num_pages, INT32_MAX) with two extra entries and a row stride beyond.
arenas page(const problem& p, const std::vector<std::int64_t>& n, std::int64_t page_size, std::int64_t shared, layout lay,
            bool invalid_tail, std::uint64_t seed) {
  arenas a;
  a.page_size = page_size;
  const std::int64_t b_count = static_cast<std::int64_t>(n.size());
  std::vector<std::int64_t> pages(n.size());
  std::int64_t own = 0;
  for (std::int64_t b = 0; b < b_count; ++b) {
    pages[b] = (n[b] + page_size - 1) / page_size;
    a.max_pages = std::max(a.max_pages, pages[b]);
    own += b == 0 ? pages[b] : std::max<std::int64_t>(0, pages[b] - shared);
  }
  a.max_pages += 2;
  a.table_stride = a.max_pages + 1;
  a.num_pages = own + 2;
  std::vector<std::int32_t> order(static_cast<std::size_t>(a.num_pages));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  const auto& d = p.dims;
  a.k = buffer::make(p.type, {a.num_pages, page_size, d.hkv, d.d}, lay);
  a.v = buffer::make(p.type, {a.num_pages, page_size, d.hkv, d.dv}, lay);
  for (buffer* t : {&a.k, &a.v})
    for (std::int64_t x = 0; x < t->dims[0]; ++x)
      for (std::int64_t s = 0; s < t->dims[1]; ++s)
        for (std::int64_t g = 0; g < t->dims[2]; ++g)
          for (std::int64_t e = 0; e < t->dims[3]; ++e) t->set(x, s, g, e, nan_value);
  a.table.assign(static_cast<std::size_t>(b_count * a.table_stride), -1);
  std::size_t next = 0;
  for (std::int64_t b = 0; b < b_count; ++b) {
    for (std::int64_t t = 0; t < pages[b]; ++t) {
      const bool from_zero = b > 0 && t < shared;
      const std::int32_t pg = from_zero ? a.table[static_cast<std::size_t>(t)] : order[next++];
      a.table[static_cast<std::size_t>(b * a.table_stride + t)] = pg;
      if (from_zero) continue;
      for (std::int64_t s = 0; s < page_size && t * page_size + s < n[b]; ++s)
        for (std::int64_t g = 0; g < d.hkv; ++g) {
          for (std::int64_t e = 0; e < d.d; ++e) a.k.set(pg, s, g, e, p.k.get(b, t * page_size + s, g, e));
          for (std::int64_t e = 0; e < d.dv; ++e) a.v.set(pg, s, g, e, p.v.get(b, t * page_size + s, g, e));
        }
    }
    // The unspecified tail: stale numbers of real pages, or numbers no page has.
    const std::int32_t invalid[] = {-1, static_cast<std::int32_t>(a.num_pages), std::numeric_limits<std::int32_t>::max(),
                                    std::numeric_limits<std::int32_t>::min()};
    for (std::int64_t t = pages[b]; t < a.table_stride; ++t)
      a.table[static_cast<std::size_t>(b * a.table_stride + t)] =
          invalid_tail ? invalid[(b + t) % 4] : order[static_cast<std::size_t>((b * 7 + t) % a.num_pages)];
  }
  return a;
}

/// Sequence lengths around page boundaries: two pages, one past a page,
/// none, one before a page.
std::vector<std::int64_t> lengths_for(std::int64_t page_size) {
  return {2 * page_size, page_size + 1, 0, std::max<std::int64_t>(1, page_size - 1)};
}

/// A dense problem whose every sequence repeats sequence 0's first `shared`
/// pages of keys (a shared prefix), with key padding n.
problem dense_problem(std::int64_t page_size, std::int64_t lq, bool causal, dtype t, std::int64_t shared, std::uint64_t seed) {
  const std::vector<std::int64_t> n = lengths_for(page_size);
  problem_spec s;
  s.dims = {static_cast<std::int64_t>(n.size()), 4, 2, lq, *std::max_element(n.begin(), n.end()), 8, 5};
  s.type = t;
  s.causal = causal;
  s.seed = seed;
  problem p = make_problem(s);
  p.key_len = n;
  for (std::int64_t b = 1; b < s.dims.b; ++b)
    for (std::int64_t j = 0; j < std::min(shared * page_size, n[b]); ++j)
      for (std::int64_t g = 0; g < s.dims.hkv; ++g) {
        for (std::int64_t e = 0; e < s.dims.d; ++e) p.k.set(b, j, g, e, p.k.get(0, j, g, e));
        for (std::int64_t e = 0; e < s.dims.dv; ++e) p.v.set(b, j, g, e, p.v.get(0, j, g, e));
      }
  return p;
}

void poison_outputs(problem& p) {
  for (std::int64_t b = 0; b < p.o.dims[0]; ++b)
    for (std::int64_t i = 0; i < p.o.dims[1]; ++i)
      for (std::int64_t h = 0; h < p.o.dims[2]; ++h)
        for (std::int64_t e = 0; e < p.o.dims[3]; ++e) p.o.set(b, i, h, e, nan_value);
  std::fill(p.lse.begin(), p.lse.end(), nan_value);
}

attnimpl::paged_attention_args paged_args(problem& p, const arenas& a) {
  const attnimpl::attention_args d = p.args();
  attnimpl::paged_attention_args x;
  x.dims = d.dims;
  x.q = d.q;
  x.kv = a.view();
  x.o = d.o;
  x.lse = d.lse;
  x.scale = d.scale;
  x.causal = d.causal;
  x.key_len = d.key_len;
  x.mask = d.mask;
  x.var = d.var;
  return x;
}

TEST(paged, equals_dense_bitwise_over_page_sizes_isas_threads_and_tiles) {
  int checked = 0;
  std::uint64_t seed = 1;
  for (std::int64_t page_size : {1, 3, 16, 17, 64, 128, 256, 512})
    for (dtype t : {dtype::f32, dtype::bf16})
      for (std::int64_t lq : {1, 5})
        for (bool causal : {false, true}) {
          ++seed;
          const std::int64_t shared = seed % 2;
          problem p = dense_problem(page_size, lq, causal, t, shared, seed);
          const layout lay = static_cast<layout>(seed % 4);
          const arenas a = page(p, p.key_len, page_size, shared, lay, seed % 3 == 0, seed);
          for (attnimpl::config cfg : tile_configs()) {
            cfg.simd = isa::portable;
            cfg.threads = 1;
            poison_outputs(p);
            run(p, cfg);
            const std::vector<std::uint32_t> dense = output_bits(p);
            for (isa which : isas())
              for (int threads : {1, 3}) {
                cfg.simd = which;
                cfg.threads = threads;
                poison_outputs(p);
                const attnimpl::status st = attnimpl::paged_attention(paged_args(p, a), cfg);
                ASSERT_TRUE(st.ok()) << st.message;
                const std::vector<std::uint32_t> got = output_bits(p);
                for (std::size_t x = 0; x < got.size(); ++x)
                  if (got[x] != dense[x]) {
                    ADD_FAILURE() << "first difference at output element " << x << " of " << got.size() << " (LSE from "
                                  << got.size() - p.lse.size() << "): " << got[x] << " vs " << dense[x];
                    break;
                  }
                ASSERT_EQ(got, dense) << "P=" << page_size << " isa=" << attnimpl::isa_name(which) << " threads=" << threads
                                      << " k_tile=" << cfg.k_tile << " " << p.line();
                ++checked;
              }
          }
        }
  EXPECT_GT(checked, 0);
}

TEST(paged, unspecified_entries_and_slots_change_no_bit) {
  // The same problem through a stale tail and through an invalid one, with
  // the unused slots NaN and then huge: every bit the same.
  for (std::int64_t page_size : {1, 3, 17}) {
    problem p = dense_problem(page_size, 3, true, dtype::f32, 1, 90 + static_cast<std::uint64_t>(page_size));
    arenas stale = page(p, p.key_len, page_size, 1, layout::dense, false, 5);
    arenas invalid = page(p, p.key_len, page_size, 1, layout::dense, true, 5);
    for (buffer* t : {&invalid.k, &invalid.v})
      for (std::int64_t x = 0; x < t->dims[0]; ++x)
        for (std::int64_t s = 0; s < t->dims[1]; ++s)
          for (std::int64_t g = 0; g < t->dims[2]; ++g)
            for (std::int64_t e = 0; e < t->dims[3]; ++e)
              if (std::isnan(t->get(x, s, g, e))) t->set(x, s, g, e, 1e30f);
    attnimpl::config cfg;
    cfg.threads = 2;
    poison_outputs(p);
    ASSERT_TRUE(attnimpl::paged_attention(paged_args(p, stale), cfg).ok());
    const auto first = output_bits(p);
    poison_outputs(p);
    ASSERT_TRUE(attnimpl::paged_attention(paged_args(p, invalid), cfg).ok());
    EXPECT_EQ(output_bits(p), first) << "P=" << page_size;
    for (std::uint32_t u : first) EXPECT_NE(u & 0x7fc00000u, 0x7fc00000u) << "a NaN reached the output, P=" << page_size;
  }
}

/// The ragged form of a dense problem: sequence b's queries are its last
/// lq[b] dense rows; Q, O (two spare tail rows) and, unless paged, K and V
/// packed.
struct packed {
  std::vector<std::int64_t> cu_q, cu_k, lq;
  buffer q, k, v, o;
  std::vector<float> lse;  // (hq, rows)
  std::int64_t rows = 0;
};

packed pack(const problem& p, const std::vector<std::int64_t>& lq) {
  packed r;
  const auto& d = p.dims;
  r.lq = lq;
  r.cu_q = {0};
  r.cu_k = {0};
  for (std::int64_t b = 0; b < d.b; ++b) {
    r.cu_q.push_back(r.cu_q.back() + lq[b]);
    r.cu_k.push_back(r.cu_k.back() + p.key_len[b]);
  }
  r.rows = r.cu_q.back() + 2;
  r.q = buffer::make(p.type, {1, r.rows, d.hq, d.d}, layout::padded);
  r.o = buffer::make(p.type, {1, r.rows, d.hq, d.dv}, layout::dense);
  r.k = buffer::make(p.type, {1, std::max<std::int64_t>(1, r.cu_k.back()), d.hkv, d.d}, layout::dense);
  r.v = buffer::make(p.type, {1, std::max<std::int64_t>(1, r.cu_k.back()), d.hkv, d.dv}, layout::padded);
  for (std::int64_t b = 0; b < d.b; ++b) {
    for (std::int64_t i = 0; i < lq[b]; ++i)
      for (std::int64_t h = 0; h < d.hq; ++h)
        for (std::int64_t e = 0; e < d.d; ++e) r.q.set(0, r.cu_q[b] + i, h, e, p.q.get(b, d.lq - lq[b] + i, h, e));
    for (std::int64_t j = 0; j < p.key_len[b]; ++j)
      for (std::int64_t g = 0; g < d.hkv; ++g) {
        for (std::int64_t e = 0; e < d.d; ++e) r.k.set(0, r.cu_k[b] + j, g, e, p.k.get(b, j, g, e));
        for (std::int64_t e = 0; e < d.dv; ++e) r.v.set(0, r.cu_k[b] + j, g, e, p.v.get(b, j, g, e));
      }
  }
  for (std::int64_t i = 0; i < r.rows; ++i)
    for (std::int64_t h = 0; h < d.hq; ++h)
      for (std::int64_t e = 0; e < d.dv; ++e) r.o.set(0, i, h, e, nan_value);
  r.lse.assign(static_cast<std::size_t>(d.hq * r.rows), nan_value);
  return r;
}

attnimpl::ragged_attention_args ragged_args(problem& p, packed& r, const arenas* a, attnimpl::paged_kv& kv) {
  const attnimpl::attention_args d = p.args();
  attnimpl::ragged_attention_args x;
  x.dims = d.dims;
  x.cu_seqlens_q = r.cu_q.data();
  x.q = r.q.in();
  if (a) {
    kv = a->view();
    x.paged = &kv;
    x.key_len = p.key_len.data();
  } else {
    x.cu_seqlens_k = r.cu_k.data();
    x.k = r.k.in();
    x.v = r.v.in();
  }
  x.o = r.o.out();
  x.lse = {r.lse.data(), {0, r.rows, 1}};
  x.scale = d.scale;
  x.causal = d.causal;
  x.mask = d.mask;  // per key only: the same for every query row
  x.var = d.var;
  return x;
}

TEST(ragged, each_sequence_equals_its_dense_rows_bitwise) {
  int checked = 0;
  std::uint64_t seed = 200;
  for (std::int64_t page_size : {1, 3, 16, 17, 64})
    for (dtype t : {dtype::f32, dtype::f16})
      for (bool causal : {false, true})
        for (bool paged : {false, true}) {
          ++seed;
          problem p = dense_problem(page_size, 6, causal, t, 0, seed);
          // A per-key mask (the same for every row) and a window on odd seeds.
          if (seed % 2) {
            p.mask_dims = {1, 1, 1, p.dims.lk};
            p.mask.assign(static_cast<std::size_t>(p.dims.lk), 1);
            for (std::int64_t j = 0; j < p.dims.lk; j += 3) p.mask[static_cast<std::size_t>(j)] = 0;
          }
          // lq[b]: full, one, full or none (n[2] = 0: rows with no key), none.
          const std::vector<std::int64_t> lq = {6, 1, seed % 3 == 0 ? 0 : 6, 0};
          const std::int64_t hq = p.dims.hq;
          std::vector<float> sinks(static_cast<std::size_t>(hq), 0.5f);
          for (attnimpl::config cfg : tile_configs()) {
            attnimpl::attention_args dense_args = p.args();
            if (seed % 4 == 1) dense_args.var.window_left = 2, dense_args.var.sinks = sinks.data();
            cfg.simd = isa::portable;
            cfg.threads = 1;
            poison_outputs(p);
            ASSERT_TRUE(attnimpl::attention(dense_args, cfg).ok());
            const problem dense = p;
            const arenas a = page(p, p.key_len, page_size, 0, static_cast<layout>(seed % 4), seed % 2 == 0, seed);
            for (isa which : isas())
              for (int threads : {1, 3}) {
                cfg.simd = which;
                cfg.threads = threads;
                packed r = pack(p, lq);
                attnimpl::paged_kv kv;
                attnimpl::ragged_attention_args x = ragged_args(p, r, paged ? &a : nullptr, kv);
                x.var = dense_args.var;
                const attnimpl::status st = attnimpl::ragged_attention(x, cfg);
                ASSERT_TRUE(st.ok()) << st.message;
                const auto& d = p.dims;
                for (std::int64_t b = 0; b < d.b; ++b)
                  for (std::int64_t i = 0; i < lq[b]; ++i)
                    for (std::int64_t h = 0; h < d.hq; ++h) {
                      const std::int64_t row = r.cu_q[b] + i, di = d.lq - lq[b] + i;
                      for (std::int64_t e = 0; e < d.dv; ++e)
                        ASSERT_EQ(bits(r.o.get(0, row, h, e)), bits(dense.o.get(b, di, h, e)))
                            << "b=" << b << " i=" << i << " h=" << h << " P=" << page_size << " paged=" << paged
                            << " isa=" << attnimpl::isa_name(which) << " threads=" << threads << " k_tile=" << cfg.k_tile;
                      ASSERT_EQ(bits(r.lse[static_cast<std::size_t>(h * r.rows + row)]),
                                bits(dense.lse[static_cast<std::size_t>((b * d.hq + h) * d.lq + di)]))
                          << "LSE b=" << b << " i=" << i << " h=" << h;
                    }
                // The two rows past total_q are untouched.
                for (std::int64_t row = r.rows - 2; row < r.rows; ++row)
                  for (std::int64_t h = 0; h < d.hq; ++h) {
                    EXPECT_TRUE(std::isnan(r.lse[static_cast<std::size_t>(h * r.rows + row)]));
                    for (std::int64_t e = 0; e < d.dv; ++e) EXPECT_TRUE(std::isnan(r.o.get(0, row, h, e))) << "tail row written";
                  }
                ++checked;
              }
          }
        }
  EXPECT_GT(checked, 0);
}

TEST(ragged, a_row_with_no_key_gives_zero_and_minus_infinity) {
  problem p = dense_problem(3, 2, false, dtype::f32, 0, 7);  // n[2] = 0
  packed r = pack(p, {0, 0, 2, 0});
  attnimpl::paged_kv kv;
  attnimpl::ragged_attention_args x = ragged_args(p, r, nullptr, kv);
  ASSERT_TRUE(attnimpl::ragged_attention(x).ok());
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t h = 0; h < p.dims.hq; ++h) {
      EXPECT_EQ(r.lse[static_cast<std::size_t>(h * r.rows + i)], -std::numeric_limits<float>::infinity());
      for (std::int64_t e = 0; e < p.dims.dv; ++e) EXPECT_EQ(bits(r.o.get(0, i, h, e)), 0u);
    }
}

/// Runs f on a fresh valid paged problem after `breaks` spoils it; the status
/// must be invalid_argument with a message containing `field`.
template <class Break>
void expect_paged_refusal(Break breaks, const std::string& field) {
  problem p = dense_problem(3, 2, true, dtype::f32, 0, 11);
  arenas a = page(p, p.key_len, 3, 0, layout::dense, false, 11);
  attnimpl::paged_attention_args x = paged_args(p, a);
  breaks(x, a);
  const attnimpl::status st = attnimpl::paged_attention(x);
  EXPECT_FALSE(st.ok()) << field;
  EXPECT_NE(st.message.find(field), std::string::npos) << st.message;
}

TEST(paged, bad_arguments_are_refused_by_name) {
  using A = attnimpl::paged_attention_args;
  expect_paged_refusal([](A& x, arenas&) { x.kv.page_size = 0; }, "kv.page_size");
  expect_paged_refusal([](A& x, arenas&) { x.kv.max_pages = 1; }, "kv.max_pages");
  expect_paged_refusal([](A& x, arenas&) { x.kv.table_stride = 1; }, "kv.table_stride");
  expect_paged_refusal([](A& x, arenas&) { x.kv.num_pages = -1; }, "kv.num_pages");
  expect_paged_refusal([](A&, arenas& a) { a.table[0] = -1; }, "kv.table[0][0] = -1");
  expect_paged_refusal([](A& x, arenas& a) { a.table[1] = static_cast<std::int32_t>(x.kv.num_pages); }, "kv.table[0][1]");
  expect_paged_refusal([](A& x, arenas&) { x.key_len = nullptr; }, "key_len");
  expect_paged_refusal([](A& x, arenas&) { x.kv.table = nullptr; }, "kv.table");
  expect_paged_refusal([](A& x, arenas&) { x.kv.k_pages.data = nullptr; }, "kv.k_pages");
  expect_paged_refusal([](A& x, arenas&) { x.kv.v_pages.type = dtype::bf16; }, "kv.k_pages and v_pages");
}

TEST(ragged, bad_offsets_are_refused_by_name) {
  problem p = dense_problem(3, 2, true, dtype::f32, 0, 12);
  const auto refused = [&](auto breaks, const std::string& field) {
    packed r = pack(p, {2, 1, 0, 2});
    attnimpl::paged_kv kv;
    attnimpl::ragged_attention_args x = ragged_args(p, r, nullptr, kv);
    breaks(x, r);
    const attnimpl::status st = attnimpl::ragged_attention(x);
    EXPECT_FALSE(st.ok()) << field;
    EXPECT_NE(st.message.find(field), std::string::npos) << st.message;
  };
  using A = attnimpl::ragged_attention_args;
  refused([](A& x, packed&) { x.cu_seqlens_q = nullptr; }, "cu_seqlens_q");
  refused([](A&, packed& r) { r.cu_q[0] = 1; }, "cu_seqlens_q[0]");
  refused([](A&, packed& r) { r.cu_q[2] = r.cu_q[1] - 1; }, "cu_seqlens_q[2] - cu_seqlens_q[1] = -1");
  refused([](A& x, packed&) { x.dims.lq = 1; }, "lq = 1");
  refused([](A&, packed& r) { r.cu_k[2] = r.cu_k[1] - 1; }, "cu_seqlens_k[2] - cu_seqlens_k[1] = -1");
  refused([](A& x, packed&) { x.cu_seqlens_k = nullptr; }, "cu_seqlens_k");
  refused([&](A& x, packed&) { x.key_len = p.key_len.data(); }, "key_len must be null");
}

}  // namespace
