// Laws that need no tolerance: thread-count invariance, batch invariance,
// masked-value independence (NaN in masked slots changes nothing).
#include <gtest/gtest.h>

#include "support.hpp"

namespace {

using namespace attnimpl_test;

std::vector<problem_spec> varied_specs() {
  std::vector<problem_spec> out;
  std::uint64_t seed = 500;
  for (int mask = 0; mask < 4; ++mask)
    for (bool causal : {false, true})
      for (dtype t : {dtype::f32, dtype::bf16, dtype::f16}) {
        out.push_back(grid_spec({.b = 3, .hq = 6, .hkv = 2, .lq = 5, .lk = 11, .d = 5, .dv = 3}, causal, mask, t, ++seed));
      }
  return out;
}

TEST(bitwise, thread_count_never_changes_bits) {
  for (const problem_spec& s : varied_specs()) {
    // split_keys 4 with few units makes some thread counts split the keys.
    const attnimpl::config base{.threads = 1, .q_tile = 2, .k_tile = 2, .split_keys = 4};
    problem p = make_problem(s);
    run(p, base);
    const auto expected = output_bits(p);
    for (int threads : {2, 3, 8}) {
      attnimpl::config cfg = base;
      cfg.threads = threads;
      problem again = make_problem(s);
      run(again, cfg);
      ASSERT_EQ(output_bits(again), expected) << again.line() << " threads=" << threads;
    }
  }
}

TEST(bitwise, split_kv_across_threads_equals_sequential_chunks) {
  // One unit, many chunks: 8 threads take the split path, 1 thread folds in place.
  problem_spec s;
  s.dims = {.b = 1, .hq = 4, .hkv = 1, .lq = 1, .lk = 97, .d = 17, .dv = 9};
  s.seed = 3;
  for (int threads : {1, 8}) {
    problem p = make_problem(s);
    run(p, {.threads = threads, .k_tile = 3, .split_keys = 9});
    static std::vector<std::uint32_t> first;
    if (threads == 1)
      first = output_bits(p);
    else
      ASSERT_EQ(output_bits(p), first) << p.line();
  }
}

TEST(bitwise, a_row_alone_equals_it_inside_a_batch) {
  for (const problem_spec& s : varied_specs()) {
    const attnimpl::config cfg{.threads = 2, .q_tile = 3, .k_tile = 2, .split_keys = 4};
    problem batch = make_problem(s);
    run(batch, cfg);
    const auto& d = s.dims;
    if (batch.mask_dims[0] > 1) continue;  // per-batch masks would need slicing; the others broadcast
    for (std::int64_t b = 0; b < d.b; ++b)
      for (std::int64_t i = 0; i < d.lq; ++i) {
        // One batch element, one query row: keys keep their positions, the
        // causal offset is kept by giving the row's own Lq = 1 and trimming keys.
        problem alone = batch;
        alone.dims.b = 1;
        alone.dims.lq = 1;
        const std::int64_t n = batch.key_len.empty() ? d.lk : batch.key_len[static_cast<std::size_t>(b)];
        std::int64_t keys = batch.causal ? std::max<std::int64_t>(0, n - d.lq + i + 1) : n;
        alone.key_len = {keys};
        alone.q = buffer::make(s.type, {1, 1, d.hq, d.d}, layout::dense);
        alone.k = buffer::make(s.type, {1, d.lk, d.hkv, d.d}, layout::dense);
        alone.v = buffer::make(s.type, {1, d.lk, d.hkv, d.dv}, layout::dense);
        alone.o = buffer::make(s.type, {1, 1, d.hq, d.dv}, layout::dense);
        alone.lse.assign(static_cast<std::size_t>(d.hq), 0.0f);
        for (std::int64_t h = 0; h < d.hq; ++h)
          for (std::int64_t e = 0; e < d.d; ++e) alone.q.set(0, 0, h, e, batch.q.get(b, i, h, e));
        for (std::int64_t j = 0; j < d.lk; ++j)
          for (std::int64_t g = 0; g < d.hkv; ++g) {
            for (std::int64_t e = 0; e < d.d; ++e) alone.k.set(0, j, g, e, batch.k.get(b, j, g, e));
            for (std::int64_t e = 0; e < d.dv; ++e) alone.v.set(0, j, g, e, batch.v.get(b, j, g, e));
          }
        if (alone.mask_dims[0]) {
          // broadcast masks: keep row i's slice (dims 1 x 1 x 1 x lk)
          std::vector<std::uint8_t> row;
          for (std::int64_t j = 0; j < d.lk; ++j) row.push_back(batch.visible(b, 0, i, j) || j >= keys ? 1 : 0);
          // visible() also applies causal/padding; those are re-applied by key_len, so only the mask bits matter
          alone.mask_dims = {1, 1, 1, d.lk};
          alone.mask.clear();
          for (std::int64_t j = 0; j < d.lk; ++j) {
            const std::int64_t mj = batch.mask_dims[3] == 1 ? 0 : j;
            const std::int64_t mi = batch.mask_dims[2] == 1 ? 0 : i;
            alone.mask.push_back(batch.mask[static_cast<std::size_t>(mi * batch.mask_dims[3] + mj)]);
          }
        }
        alone.causal = false;  // keys beyond the row's position are cut by key_len instead
        run(alone, cfg);
        for (std::int64_t h = 0; h < d.hq; ++h) {
          for (std::int64_t e = 0; e < d.dv; ++e)
            ASSERT_EQ(std::bit_cast<std::uint32_t>(alone.o.get(0, 0, h, e)),
                      std::bit_cast<std::uint32_t>(batch.o.get(b, i, h, e)))
                << batch.line() << " b=" << b << " i=" << i << " h=" << h << " e=" << e;
          ASSERT_EQ(std::bit_cast<std::uint32_t>(alone.lse[static_cast<std::size_t>(h)]),
                    std::bit_cast<std::uint32_t>(batch.lse[static_cast<std::size_t>((b * d.hq + h) * d.lq + i)]))
              << batch.line() << " b=" << b << " i=" << i << " h=" << h;
        }
      }
  }
}

TEST(bitwise, memory_layout_never_changes_bits) {
  // Dense f32 takes the in-register transpose and in-place V rows; padded
  // (dim stride 2) and head-major take the converting copies; keys-across K
  // (sequence stride 1) takes the no-transpose scores (q_tile 3: 6 rows) or
  // packs from the rows' runs (q_tile 8: 16 rows).
  for (dtype t : {dtype::f32, dtype::bf16})
    for (std::int64_t dv : {8, 16, 5})
      for (std::int64_t q_tile : {3, 8}) {
        problem_spec s;
        s.dims = {.b = 2, .hq = 4, .hkv = 2, .lq = 9, .lk = 37, .d = 19, .dv = dv};
        s.causal = true;
        s.type = t;
        s.seed = 11 + static_cast<std::uint64_t>(dv);
        const attnimpl::config cfg{.threads = 2, .q_tile = q_tile, .k_tile = 16, .split_keys = 16};
        std::vector<std::uint32_t> first;
        for (layout l : {layout::dense, layout::padded, layout::head_major, layout::keys_across}) {
          s.lay = l;
          problem p = make_problem(s);
          run(p, cfg);
          if (first.empty())
            first = output_bits(p);
          else
            ASSERT_EQ(output_bits(p), first) << p.line() << " layout " << static_cast<int>(l);
        }
      }
}

TEST(bitwise, every_instruction_set_gives_the_same_bits) {
  // Portable, AVX2 and AVX-512 over every layout, with tiles wide enough for
  // the AVX-512 build's 16-lane products (32-column scores, 4..6-vector P.V
  // slices with an odd vector left: dv 72) and the decode rows (q_tile 1).
  const bool avx512 = attnimpl::isa_supported(attnimpl::isa::avx512);
  for (dtype t : {dtype::f32, dtype::bf16, dtype::f16})
    for (std::int64_t q_tile : {1, 20}) {
      problem_spec s;
      s.dims = {.b = 1, .hq = 4, .hkv = 2, .lq = 40, .lk = 77, .d = 40, .dv = 72};
      s.causal = true;
      s.type = t;
      s.seed = 71 + static_cast<std::uint64_t>(q_tile);
      for (layout l : {layout::dense, layout::padded, layout::head_major, layout::keys_across}) {
        s.lay = l;
        attnimpl::config cfg{.threads = 2, .q_tile = q_tile, .k_tile = 48, .split_keys = 96, .simd = attnimpl::isa::portable};
        problem want = make_problem(s);
        run(want, cfg);
        for (attnimpl::isa which : {attnimpl::isa::avx2, attnimpl::isa::avx512}) {
          if (!attnimpl::isa_supported(which)) continue;
          cfg.simd = which;
          problem p = make_problem(s);
          run(p, cfg);
          ASSERT_EQ(output_bits(p), output_bits(want))
              << p.line() << " layout " << static_cast<int>(l) << " isa " << attnimpl::isa_name(which);
        }
      }
    }
  if (!avx512) GTEST_SKIP() << "this CPU has no AVX-512 F+BW+VL: compared on the portable and AVX2 paths only";
}

TEST(bitwise, row_slices_of_a_large_unit_never_change_bits) {
  // A unit of more than 128 rows goes through each block's scores, softmax
  // and P.V a slice of 128 rows at a time (the default q_tile gives 512-row
  // units); 300 rows make slices of 128, 128 and 44. Each row must come out
  // as it does from 2-position units.
  for (int mask : {0, 1})
    for (bool causal : {false, true})
      for (dtype t : {dtype::f32, dtype::bf16}) {
        problem_spec s;
        s.dims = {.b = 1, .hq = 4, .hkv = 2, .lq = 160, .lk = 150, .d = 9, .dv = 11};
        s.causal = causal;
        s.padding = mask == 1;
        s.mask = mask;
        s.type = t;
        s.seed = 31 + static_cast<std::uint64_t>(mask);
        problem small = make_problem(s);
        run(small, {.threads = 2, .q_tile = 2, .k_tile = 16, .split_keys = 64});
        problem large = make_problem(s);
        run(large, {.threads = 2, .q_tile = 150, .k_tile = 16, .split_keys = 64});
        ASSERT_EQ(output_bits(large), output_bits(small)) << large.line();
      }
}

TEST(bitwise, nan_in_masked_slots_changes_nothing) {
  for (const problem_spec& s : varied_specs()) {
    const attnimpl::config cfg{.threads = 2, .q_tile = 2, .k_tile = 3, .split_keys = 6};
    problem clean = make_problem(s);
    run(clean, cfg);
    problem poisoned = make_problem(s);
    poison_masked(poisoned);
    run(poisoned, cfg);
    ASSERT_EQ(output_bits(poisoned), output_bits(clean)) << clean.line();
  }
}

}  // namespace
