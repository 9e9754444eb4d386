// The forward campaign's judging of one case: O and LSE against the oracle.
#include "attncheck/oracle.hpp"
#include "campaign_internal.hpp"

namespace attncheck::campaign_detail {

// The oracle is auto_tier: its fast binary64 tier where that tier's own error
// is at most 2^-20 of the bound on every element, mpfr50 otherwise
// (docs/oracle.md, "Tiers"); fast_tier_cases counts the cases the fast tier judged.
void judge_forward(const subject& s, const attn_case& c, case_tally& t) {
  const auto out = s.attend(c);
  attn_case dense = c;  // the oracle answers the dense problem the form hands over
  dense.form = input_form{};
  const oracle_result ref = reference(dense, oracle_options_for(s, dense, oracle_precision::auto_tier));
  if (ref.tier == oracle_tier::fast_binary64) ++t.st.fast_tier_cases;
  if (t.failed_to_run(out)) return;
  for (std::int64_t b = 0; b < c.b; ++b)
    for (std::int64_t i = 0; i < c.lq; ++i)
      for (std::int64_t h = 0; h < c.hq && c.row_in_problem(b, i); ++h) {
        for (std::int64_t e = 0; e < c.dv; ++e) {
          const auto x = ref.o_index(b, i, h, e);
          t.element([&] { return o_where(b, i, h, e); }, ref.o[x], out.o.at(b, i, h, e), ref.o_bound[x]);
        }
        if (!out.lse.empty())
          t.element([&] { return lse_where(b, h, i); }, ref.lse[ref.lse_index(b, h, i)],
                    out.lse[static_cast<std::size_t>((b * c.hq + h) * c.lq + i)], ref.lse_bound[ref.lse_index(b, h, i)]);
      }
}

}  // namespace attncheck::campaign_detail
