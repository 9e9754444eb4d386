// The per-row sum budget gamma_(n+nb+1) and the probabilistic bound beside the
// sound one (docs/bound.md, "Sums" and "The probabilistic bound").
#include <gtest/gtest.h>

#include <cmath>

#include "attncheck/oracle.hpp"

namespace attncheck {
namespace {

oracle_result bounds_of(const std::string& line, double u, std::int64_t nb, oracle_precision p = oracle_precision::binary64) {
  attn_case c = parse_line(line);
  materialize(c);
  oracle_options o;
  o.precision = p;
  o.out_type = c.type;
  o.bound.u_compute = u;
  o.bound.key_blocks = nb;
  return reference(c, o);
}

// An f16 accumulator (u = 2^-11) at Lk = 4096: gamma_(n+nb+1) is undefined,
// every sound bound +inf and useless; the probabilistic one is finite.
TEST(ProbBound, FiniteWhereTheSoundBoundIsInfinite) {
  const oracle_result r = bounds_of("ATTN(b=1,hq=1,hkv=1,lq=2,lk=4096,d=8,dv=4,f16,values=normal,seed=3)", 0x1p-11, 64);
  ASSERT_EQ(r.o_pbound.size(), r.o_bound.size());
  for (std::size_t k = 0; k < r.o.size(); ++k) {
    EXPECT_EQ(r.o_bound[k], INFINITY);
    EXPECT_EQ(r.o_sound_useless[k], 1);
    EXPECT_TRUE(std::isfinite(r.o_pbound[k]) && r.o_pbound[k] > 0) << k << ": " << r.o_pbound[k];
  }
  for (std::size_t k = 0; k < r.lse.size(); ++k) {
    EXPECT_EQ(r.lse_sound_useless[k], 1);
    EXPECT_TRUE(std::isfinite(r.lse_pbound[k]) && r.lse_pbound[k] > 0) << k;
  }
}

// A padded row sees 1000 of Lk = 2100 keys: its sums pass at most 999
// additions, so its sound bound is finite although Lk + nb + 1 > 1 / u.
TEST(ProbBound, SumBudgetCountsTheRowsVisibleKeys) {
  const oracle_result r =
      bounds_of("ATTN(b=2,hq=1,hkv=1,lq=2,lk=2100,d=8,dv=4,kpad=[1000,2100],f16,values=normal,seed=4)", 0x1p-11, 33);
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t e = 0; e < 4; ++e) {
      EXPECT_TRUE(std::isfinite(r.o_bound[r.o_index(0, i, 0, e)])) << "padded row " << i;
      EXPECT_EQ(r.o_bound[r.o_index(1, i, 0, e)], INFINITY) << "full row " << i;
    }
}

// Where the sound bound is useful the probabilistic one repeats it; elsewhere
// it is never above it (min(gamma, gamma~) <= gamma), on MPFR and on the
// fast tier alike.
TEST(ProbBound, NeverAboveTheSoundBound) {
  for (const char* line : {"ATTN(b=1,hq=2,hkv=1,lq=3,lk=700,d=16,dv=3,causal,f16,values=large_logits,seed=5)",
                           "ATTN(b=1,hq=1,hkv=1,lq=3,lk=300,d=96,dv=3,bf16,values=normal,seed=6)",
                           "ATTN(b=2,hq=1,hkv=1,lq=2,lk=1500,d=4,dv=2,kpad=[1500,40],f16,values=dominant,seed=7)"}) {
    for (double u : {0x1p-11, 0x1p-8}) {
      for (oracle_precision p : {oracle_precision::binary64, oracle_precision::auto_tier}) {
        const oracle_result r = bounds_of(line, u, 12, p);
        int useless = 0;
        for (std::size_t k = 0; k < r.o.size(); ++k) {
          if (std::isnan(r.o_bound[k])) continue;
          EXPECT_LE(r.o_pbound[k], r.o_bound[k]) << line << " u " << u << " element " << k;
          if (!r.o_sound_useless[k]) {
            EXPECT_EQ(r.o_pbound[k], r.o_bound[k]) << line << " element " << k;
          }
          useless += r.o_sound_useless[k];
        }
        for (std::size_t k = 0; k < r.lse.size(); ++k) {
          if (!std::isnan(r.lse_bound[k])) {
            EXPECT_LE(r.lse_pbound[k], r.lse_bound[k]) << line << " LSE " << k;
          }
        }
        std::printf("%s u=2^%.0f: %d of %zu O elements with a useless sound bound\n", line, std::log2(u), useless, r.o.size());
      }
    }
  }
}

}  // namespace
}  // namespace attncheck
