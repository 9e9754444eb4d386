// Contract 1.2's input forms through the host (docs/spec.md "Paged KV",
// "Ragged batches"; docs/abi.md): the host builds the arena, the block table
// and the packed tensors from a case, only for a subject that declared them;
// naive and builtin, which claim that the forms give the dense form's bits, give them
// on every row of the problem; a subject that writes the unused tail of a
// packed output, or the read-only arena, is caught.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "attncheck/subject_host.hpp"
#include "test_instance.hpp"

namespace attncheck {
namespace {

bool same_bits_or_both_nan(float a, float b) {
  return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b) || (std::isnan(a) && std::isnan(b));
}

// Every element of O and LSE on the rows of the problem has the dense call's bits
// (two NaNs count as equal, docs/spec.md); a ragged batch's other rows are
// the host's NaN sentinel (not written). Returns the rows compared.
int expect_dense_bits(const attn_case& c, const subject_output& form, const subject_output& dense) {
  int rows = 0;
  for (std::int64_t b = 0; b < c.b; ++b)
    for (std::int64_t i = 0; i < c.lq; ++i) {
      const bool in = c.row_in_problem(b, i);
      rows += in;
      for (std::int64_t h = 0; h < c.hq; ++h) {
        for (std::int64_t e = 0; e < c.dv; ++e) {
          const double got = form.o_at(b, i, h, e), want = dense.o_at(b, i, h, e);
          if (in) {
            EXPECT_TRUE(form.o.bits_at(b, i, h, e) == dense.o.bits_at(b, i, h, e) || (std::isnan(got) && std::isnan(want)))
                << to_line(c) << " O[b=" << b << ",i=" << i << ",h=" << h << ",e=" << e << "] " << got << " vs " << want;
          } else {
            EXPECT_TRUE(std::isnan(got)) << to_line(c) << " row " << i << " of sequence " << b << " is not in the problem";
          }
        }
        const std::size_t at = static_cast<std::size_t>((b * c.hq + h) * c.lq + i);
        if (form.lse.empty()) continue;
        if (in) {
          EXPECT_TRUE(same_bits_or_both_nan(form.lse[at], dense.lse[at])) << to_line(c) << " LSE row " << i;
        } else {
          EXPECT_TRUE(std::isnan(form.lse[at])) << to_line(c);
        }
      }
    }
  return rows;
}

TEST(paged_ragged_abi, naive_and_builtin_declare_both_forms_and_the_example_is_never_handed_them) {
  const auto naive = subject::load("naive");
  EXPECT_TRUE(naive->has_v3(ATTNCHECK_FEATURE3_PAGED));
  EXPECT_TRUE(naive->has_v3(ATTNCHECK_FEATURE3_RAGGED));
  EXPECT_TRUE(naive->claims_v3(ATTNCHECK_CLAIM3_PAGED_EQUALS_DENSE));
  const auto builtin = subject::load("builtin");
  EXPECT_TRUE(builtin->has_v3(ATTNCHECK_FEATURE3_PAGED));
  EXPECT_TRUE(builtin->has_v3(ATTNCHECK_FEATURE3_RAGGED));
  const auto example = subject::load(ATTNCHECK_EXAMPLE_PLUGIN);  // ABI version 2: no forms
  attn_case paged = parse_line("ATTN(b=2,hq=2,hkv=1,lq=1,lk=9,d=4,dv=4,pages=4,f32,seed=3)");
  attn_case ragged = parse_line("ATTN(b=2,hq=2,hkv=1,lq=3,lk=9,d=4,dv=4,ragged,qlen=[3,0],f32,seed=3)");
  EXPECT_EQ(example->cannot_take(paged), "no paged K/V");
  EXPECT_EQ(example->cannot_take(ragged), "no ragged batches");
  for (const auto* s : {&naive, &builtin}) {
    EXPECT_EQ((*s)->cannot_take(paged), "");
    EXPECT_EQ((*s)->cannot_take(ragged), "");
  }
  materialize(paged);
  const subject_output out = example->attend(paged);
  EXPECT_FALSE(out.ok());
  EXPECT_NE(out.error.find("no paged K/V"), std::string::npos) << out.error;
}

TEST(paged_ragged_abi, naive_and_builtin_give_the_dense_bits_in_every_form) {
  const auto s = subject::load("naive");
  const auto builtin = subject::load("builtin");
  int rows = 0, cases = 0;
  const char* bases[] = {
      // decode over many pages, pages that end exactly on, one before and one after n[b], an empty sequence
      "ATTN(b=4,hq=4,hkv=2,lq=1,lk=49,d=8,dv=5,kpad=[48,47,49,0]",
      // prefill, causal, uneven lengths, a boolean mask with a query dim
      "ATTN(b=3,hq=2,hkv=1,lq=6,lk=13,d=3,dv=4,causal,kpad=[13,6,1],mask=3x1x6x13",
      // variants: a window, sinks and a bias with query and key dims
      "ATTN(b=2,hq=3,hkv=3,lq=5,lk=11,d=4,dv=2,causal,kpad=[11,4],window=[3,0],sinks=mixed,bias=2x1x5x11",
      // one key, P larger than every sequence
      "ATTN(b=2,hq=1,hkv=1,lq=2,lk=1,d=2,dv=2,kpad=[1,0]",
  };
  const char* forms[] = {
      "pages=1",
      "pages=3",
      "pages=16,page_order=in_order",
      "pages=7,page_order=reversed,spare_pages=3,table_tail=invalid",
      "pages=5,spare_pages=2",
      "pages=4,shared_pages=1",
      "ragged",
      "ragged,qlen=QLEN",
      "pages=3,ragged,qlen=QLEN",
      "pages=2,shared_pages=2,table_tail=invalid,ragged,qlen=QLEN",
  };
  for (const char* base : bases)
    for (const char* form : forms)
      for (const char* rest : {"f32,seed=5", "f16,layout=bhsd,poison=nan,seed=6", "bf16,layout=padded,poison=big,seed=7"}) {
        attn_case dense = parse_line(std::string(base) + "," + rest + ")");
        std::string f = form;
        if (const auto at = f.find("QLEN"); at != std::string::npos) {
          // Uneven queries: all, none, one, and the rest in turn.
          std::string q = "[";
          for (std::int64_t b = 0; b < dense.b; ++b)
            q += (b ? "," : "") + std::to_string(b % 3 == 0 ? dense.lq : b % 3 == 1 ? 0 : 1);
          f.replace(at, 4, q + "]");
        }
        const std::string line = std::string(base) + "," + f + "," + rest + ")";
        attn_case c;
        try {
          c = parse_line(line);
        } catch (const input_error& e) {
          // shared_pages beyond ceil(lk / P) for the one-key base: that field's limit.
          EXPECT_EQ(e.field(), "shared_pages") << line << ": " << e.what();
          continue;
        }
        materialize(c);
        materialize(dense);
        if (c.form.shared_pages)
          dense = [&] {
            attn_case d = c;  // the same tensors (a shared prefix), in the dense form
            d.form = input_form{};
            return d;
          }();
        for (const auto* sub : {&s, &builtin}) {  // both claim the dense form's bits
          const subject_output got = (*sub)->attend(c), want = (*sub)->attend(dense);
          ASSERT_TRUE(got.ok()) << line << ": " << got.error << got.guard_report;
          ASSERT_TRUE(want.ok()) << line;
          rows += expect_dense_bits(c, got, want);
        }
        ++cases;
      }
  EXPECT_GE(cases, 110);
  EXPECT_GT(rows, 500);
}

// A version 3 subject declaring both forms that misbehaves as `how` says.
enum class misdeed { tail_row, arena_write, none };
struct evil_state {
  misdeed how;
};
int evil_attend(void* state, const attncheck_problem* p, char*, std::size_t) {
  const auto how = static_cast<evil_state*>(state)->how;
  if (p->ragged) {
    const std::int64_t total = p->ragged->total_q;
    // Zeros on every valid row, and on the first row past total_q for the tail misdeed.
    for (std::int64_t r = 0; r < total + (how == misdeed::tail_row ? 1 : 0); ++r)
      for (std::int64_t h = 0; h < p->hq; ++h)
        for (std::int64_t e = 0; e < p->dv; ++e)
          static_cast<float*>(p->o)[r * p->o_stride[1] + h * p->o_stride[2] + e * p->o_stride[3]] = 0.0f;
  }
  if (p->paged && how == misdeed::arena_write) const_cast<float*>(static_cast<const float*>(p->paged->k_pages.data))[0] = 1.0f;
  return 0;
}
void evil_destroy(attncheck_instance* self) {
  delete static_cast<evil_state*>(self->state);
  delete self;
}
std::shared_ptr<subject> evil(misdeed how) {
  auto* x = new attncheck_instance{f32_test_instance(ATTNCHECK_SUBJECT_ABI_VERSION_3, "evil")};
  x->features = ATTNCHECK_FEATURE_PADDING;
  x->state = new evil_state{how};
  x->attend = evil_attend;
  x->destroy = evil_destroy;
  x->features_v3 = ATTNCHECK_FEATURE3_PAGED | ATTNCHECK_FEATURE3_RAGGED;
  return subject::adopt(x, "evil");
}

TEST(paged_ragged_abi, writes_past_the_packed_rows_or_into_the_arena_are_caught) {
  attn_case c = parse_line("ATTN(b=3,hq=2,hkv=1,lq=2,lk=5,d=2,dv=3,kpad=[5,0,2],ragged,qlen=[2,0,1],f32,seed=1)");
  materialize(c);
  const subject_output fine = evil(misdeed::none)->attend(c);
  EXPECT_TRUE(fine.ok()) << fine.guard_report;
  const subject_output tail = evil(misdeed::tail_row)->attend(c);
  EXPECT_TRUE(tail.guard_violated);
  EXPECT_NE(tail.guard_report.find("unused tail of the packed O (row 3"), std::string::npos) << tail.guard_report;
  attn_case p = parse_line("ATTN(b=2,hq=1,hkv=1,lq=1,lk=5,d=2,dv=2,kpad=[5,3],pages=2,f32,seed=1)");
  materialize(p);
  const subject_output arena = evil(misdeed::arena_write)->attend(p);
  EXPECT_TRUE(arena.guard_violated);
  EXPECT_NE(arena.guard_report.find("K page arena"), std::string::npos) << arena.guard_report;
}

}  // namespace
}  // namespace attncheck
