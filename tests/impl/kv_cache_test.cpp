// Cache equivalence, bit for bit: a one-shot causal prefill equals the same
// tokens pushed through the paged cache in any chunking (single tokens
// included), with shuffled page tables, page sizes that do not divide the
// tile, sequences of different lengths in one batch, and any thread count.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <numeric>
#include <random>

#include "attnimpl/kv_cache.hpp"
#include "support.hpp"

namespace {

using namespace attnimpl_test;

/// One sequence's tokens with their one-shot causal prefill output.
struct sequence {
  problem prefill;  // b = 1, lq = lk = tokens, causal
};

/// Heads and head dims of the sequences a schedule pushes.
struct heads {
  std::int64_t hq = 6, hkv = 2, d = 5, dv = 3;
};

sequence make_sequence(std::int64_t tokens, dtype t, std::uint64_t seed, const attnimpl::config& cfg, const heads& hd) {
  problem_spec s;
  s.dims = {.b = 1, .hq = hd.hq, .hkv = hd.hkv, .lq = tokens, .lk = tokens, .d = hd.d, .dv = hd.dv};
  s.causal = true;
  s.type = t;
  s.seed = seed;
  sequence q{make_problem(s)};
  run(q.prefill, cfg);
  return q;
}

struct schedule_case {
  std::int64_t page_size, k_tile;
  dtype type;
  std::vector<std::int64_t> chunks;  // tokens appended to both sequences per step
  std::int64_t head_start;           // tokens seq 1 receives before the shared steps
  heads hd{};
};

void check_schedule(const schedule_case& sc, std::uint64_t seed) {
  const std::int64_t shared = std::accumulate(sc.chunks.begin(), sc.chunks.end(), std::int64_t{0});
  const attnimpl::config one_shot_cfg{.threads = 1, .q_tile = 4, .k_tile = sc.k_tile, .split_keys = 2 * sc.k_tile};
  const attnimpl::config cache_cfg{.threads = 3, .q_tile = 2, .k_tile = sc.k_tile, .split_keys = 2 * sc.k_tile};
  std::vector<sequence> seqs;
  seqs.push_back(make_sequence(shared, sc.type, seed, one_shot_cfg, sc.hd));
  seqs.push_back(make_sequence(sc.head_start + shared, sc.type, seed + 1, one_shot_cfg, sc.hd));
  const auto& d = seqs[0].prefill.dims;

  const std::int64_t pages = 2 * ((sc.head_start + shared) / sc.page_size + 2);
  std::vector<std::int32_t> order(static_cast<std::size_t>(pages));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(seed));
  std::optional<attnimpl::paged_kv_cache> cache;
  ASSERT_TRUE(attnimpl::paged_kv_cache::create(
                  {.batch = 2, .hkv = d.hkv, .d = d.d, .dv = d.dv, .type = sc.type, .page_size = sc.page_size, .pages = pages},
                  order, cache)
                  .ok());

  const auto push = [&](std::int64_t b, std::int64_t count) {
    const problem& src = seqs[static_cast<std::size_t>(b)].prefill;
    const std::int64_t n = cache->length(b);
    const std::int64_t es = src.k.elem();
    attnimpl::kv_tokens t;
    t.k = src.k.bytes.data() + src.k.index(0, n, 0, 0) * es;
    t.k_stride = {src.k.stride[1], src.k.stride[2], src.k.stride[3]};
    t.v = src.v.bytes.data() + src.v.index(0, n, 0, 0) * es;
    t.v_stride = {src.v.stride[1], src.v.stride[2], src.v.stride[3]};
    ASSERT_TRUE(cache->append(b, count, t).ok());
  };
  // Attends with the newest lq tokens of both sequences and checks the rows
  // of the sequences listed in `check` against their one-shot prefill.
  const auto attend_and_check = [&](std::int64_t lq, std::vector<std::int64_t> check) {
    buffer q = buffer::make(sc.type, {2, lq, d.hq, d.d}, layout::padded);
    buffer o = buffer::make(sc.type, {2, lq, d.hq, d.dv}, layout::dense);
    std::vector<float> lse(static_cast<std::size_t>(2 * d.hq * lq));
    for (std::int64_t b = 0; b < 2; ++b)
      for (std::int64_t i = 0; i < lq; ++i) {
        const std::int64_t pos = cache->length(b) - lq + i;
        if (pos < 0) continue;
        for (std::int64_t h = 0; h < d.hq; ++h)
          for (std::int64_t e = 0; e < d.d; ++e) q.set(b, i, h, e, seqs[static_cast<std::size_t>(b)].prefill.q.get(0, pos, h, e));
      }
    attnimpl::cache_attention_args a;
    a.hq = d.hq;
    a.lq = lq;
    a.q = q.in();
    a.o = o.out();
    a.lse = {lse.data(), {d.hq * lq, lq, 1}};
    ASSERT_TRUE(cache->attend(a, cache_cfg).ok());
    for (std::int64_t b : check) {
      const problem& ref = seqs[static_cast<std::size_t>(b)].prefill;
      for (std::int64_t i = 0; i < lq; ++i) {
        const std::int64_t pos = cache->length(b) - lq + i;
        for (std::int64_t h = 0; h < d.hq; ++h) {
          for (std::int64_t e = 0; e < d.dv; ++e)
            ASSERT_EQ(std::bit_cast<std::uint32_t>(o.get(b, i, h, e)), std::bit_cast<std::uint32_t>(ref.o.get(0, pos, h, e)))
                << ref.line() << " seq " << b << " position " << pos << " head " << h << " e " << e << " page_size "
                << sc.page_size << " k_tile " << sc.k_tile << " lq " << lq;
          ASSERT_EQ(std::bit_cast<std::uint32_t>(lse[static_cast<std::size_t>((b * d.hq + h) * lq + i)]),
                    std::bit_cast<std::uint32_t>(ref.lse[static_cast<std::size_t>(h * ref.dims.lq + pos)]))
              << ref.line() << " LSE seq " << b << " position " << pos;
        }
      }
    }
  };
  if (sc.head_start > 0) {
    push(1, sc.head_start);
    attend_and_check(sc.head_start, {1});
  }
  for (std::int64_t c : sc.chunks) {
    push(0, c);
    push(1, c);
    attend_and_check(c, {0, 1});
  }
}

TEST(kv_cache, prefill_equals_any_chunking_through_shuffled_pages) {
  std::uint64_t seed = 900;
  for (dtype t : {dtype::f32, dtype::bf16, dtype::f16})
    for (auto [page, tile] : {std::pair<std::int64_t, std::int64_t>{3, 2}, {5, 3}, {2, 3}, {7, 2}}) {
      for (const auto& chunks :
           std::vector<std::vector<std::int64_t>>{{13}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, {4, 1, 5, 1, 2}, {2, 7, 1, 3}}) {
        SCOPED_TRACE(::testing::Message() << "seed " << seed);
        check_schedule({page, tile, t, chunks, 4}, ++seed);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
}

TEST(kv_cache, production_pages_read_keys_across_equal_prefill) {
  // The cache keeps K transposed in its pages (keys across): runs of 8 keys
  // in one page take the no-transpose score path, runs a page boundary cuts
  // (page 12) are gathered first, more than 8 rows pack from the pages.
  // Every route must give the bits of the row-major prefill.
  std::uint64_t seed = 2000;
  for (dtype t : {dtype::f32, dtype::bf16, dtype::f16})
    for (auto [page, tile] : {std::pair<std::int64_t, std::int64_t>{16, 64}, {8, 16}, {12, 64}, {32, 24}})
      for (const heads& hd : {heads{8, 2, 64, 24}, heads{16, 2, 20, 16}, heads{3, 3, 9, 8}}) {
        SCOPED_TRACE(::testing::Message() << "seed " << seed << " page " << page << " tile " << tile << " d " << hd.d);
        check_schedule({page, tile, t, {70, 1, 1, 9, 1, 3}, 37, hd}, ++seed);
        if (::testing::Test::HasFatalFailure()) return;
      }
}

TEST(kv_cache, decode_split_over_threads_equals_prefill) {
  // Long rows, one query: split-KV chunks across threads, merged by LSE.
  check_schedule({16, 4, dtype::f32, {90, 1, 1, 1}, 37}, 77);
}

TEST(kv_cache, append_failures_change_nothing) {
  std::optional<attnimpl::paged_kv_cache> cache;
  ASSERT_TRUE(
      attnimpl::paged_kv_cache::create({.batch = 2, .hkv = 1, .d = 2, .dv = 2, .page_size = 2, .pages = 2}, {}, cache).ok());
  std::vector<float> kv(20, 1.0f);
  attnimpl::kv_tokens t{kv.data(), {2, 2, 1}, kv.data(), {2, 2, 1}};
  EXPECT_TRUE(cache->append(0, 3, t).ok());
  EXPECT_FALSE(cache->append(1, 1, t).ok()) << "pool has no page left";
  EXPECT_EQ(cache->length(1), 0);
  EXPECT_TRUE(cache->append(0, 1, t).ok()) << "the second page still has a slot";
  EXPECT_FALSE(cache->append(0, 1, t).ok());
  EXPECT_FALSE(cache->append(2, 1, t).ok());
  EXPECT_FALSE(cache->append(0, -1, t).ok());
  std::optional<attnimpl::paged_kv_cache> bad;
  EXPECT_FALSE(attnimpl::paged_kv_cache::create({.pages = 2}, {0, 0}, bad).ok());
  EXPECT_FALSE(attnimpl::paged_kv_cache::create({.page_size = 0, .pages = 2}, {}, bad).ok());
}

}  // namespace
