// A decode step allocates nothing: once the per-thread workspaces have grown
// (one call of the same shape), paged-cache attend() and attention() with
// Lq = 1 run on memory they already hold, whatever the thread count and
// whether split-KV runs in parallel. Counted by replacing the global
// operator new of this test binary.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <optional>
#include <vector>

#include "attnimpl/attention.hpp"
#include "attnimpl/kv_cache.hpp"

// The replacements pair malloc with free; GCC's -Wmismatched-new-delete sees
// through the inlined operators at -O2 and misreads that (a false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace {
std::atomic<long> allocations{0};
}  // namespace

void* operator new(std::size_t n) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace {

using attnimpl::dtype;

/// Allocations made by `calls` calls of f after one warm-up call.
template <class F>
long allocations_after_warm_up(F&& f, int calls) {
  const long seen = allocations.load();
  ::operator delete(::operator new(16));  // a direct call: not elided like a new-expression
  EXPECT_GT(allocations.load(), seen) << "the counting operator new is not in effect";
  f();
  const long before = allocations.load();
  for (int i = 0; i < calls; ++i) f();
  return allocations.load() - before;
}

struct cache_case {
  dtype type;
  int threads;
  std::int64_t page_size;
};

// B = 2, Hq = 8, Hkv = 2, D = 64, lengths 2500 and 1700: 4 units and 3 split
// chunks, so 3 threads take the parallel split path and 1 or 2 the in-place fold.
void check_cache_decode(const cache_case& c) {
  const std::int64_t b = 2, hq = 8, hkv = 2, d = 64, lengths[] = {2500, 1700};
  const std::int64_t pages = 2 * (2500 / c.page_size + 1);
  std::optional<attnimpl::paged_kv_cache> cache;
  ASSERT_TRUE(attnimpl::paged_kv_cache::create(
                  {.batch = b, .hkv = hkv, .d = d, .dv = d, .type = c.type, .page_size = c.page_size, .pages = pages}, {}, cache)
                  .ok());
  const std::int64_t es = c.type == dtype::f32 ? 4 : 2;
  std::vector<unsigned char> kv(static_cast<std::size_t>(2500 * hkv * d * es), 0x3c);
  for (std::int64_t s = 0; s < b; ++s)
    ASSERT_TRUE(cache->append(s, lengths[s], {kv.data(), {hkv * d, d, 1}, kv.data(), {hkv * d, d, 1}}).ok());
  std::vector<float> q(static_cast<std::size_t>(b * hq * d), 0.25f), o(q.size()), lse(static_cast<std::size_t>(b * hq));
  attnimpl::cache_attention_args a;
  a.hq = hq;
  a.lq = 1;
  a.q = {q.data(), dtype::f32, {hq * d, hq * d, d, 1}};
  a.o = {o.data(), dtype::f32, {hq * d, hq * d, d, 1}};
  a.lse = {lse.data(), {hq, 1, 1}};
  const attnimpl::config cfg{.threads = c.threads};
  bool ok = true;
  EXPECT_EQ(allocations_after_warm_up([&] { ok = ok && cache->attend(a, cfg).ok(); }, 10), 0)
      << "threads " << c.threads << " page_size " << c.page_size << " type " << static_cast<int>(c.type);
  EXPECT_TRUE(ok);
}

TEST(decode_allocation, paged_cache_decode_allocates_nothing_per_call) {
  for (dtype t : {dtype::f32, dtype::bf16, dtype::f16})
    for (int threads : {1, 2, 3})
      for (std::int64_t page : {16, 7}) check_cache_decode({t, threads, page});
}

TEST(decode_allocation, attention_with_one_query_allocates_nothing_per_call) {
  const std::int64_t hq = 32, hkv = 8, lk = 3000, d = 128;
  std::vector<float> q(static_cast<std::size_t>(hq * d), 0.1f), k(static_cast<std::size_t>(lk * hkv * d), 0.2f),
      v(k.size(), 0.3f), o(q.size());
  attnimpl::attention_args a;
  a.dims = {1, hq, hkv, 1, lk, d, d};
  a.q = {q.data(), dtype::f32, {hq * d, hq * d, d, 1}};
  a.k = {k.data(), dtype::f32, {lk * hkv * d, hkv * d, d, 1}};
  a.v = {v.data(), dtype::f32, {lk * hkv * d, hkv * d, d, 1}};
  a.o = {o.data(), dtype::f32, {hq * d, hq * d, d, 1}};
  for (int threads : {1, 2, 5}) {
    bool ok = true;
    EXPECT_EQ(allocations_after_warm_up([&] { ok = ok && attnimpl::attention(a, {.threads = threads}).ok(); }, 10), 0)
        << "threads " << threads;
    EXPECT_TRUE(ok);
  }
}

}  // namespace
