// The backward group's sum laws (backward.cpp says where the rest lives): per
// batch element, KV head and column, dK summed over the keys is 0 and dV
// summed over the keys is dO summed over the rows that see a key.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "backward_support.hpp"
#include "registry.hpp"

namespace attncheck::laws {

namespace {

// Per (b, KV head g) and column: the sum over keys of the subject's dK (or dV)
// against its exact value, within the sum of the elements' bounds (each
// element within its bound of its truth) plus the law's own binary64 sums.
law_outcome gradient_sums(const subject& s, const attn_case& c, bool keys) {
  law_outcome o;
  const auto own = run_case_on_oracle(s, c, o);
  if (!own) return o;
  const tensor& d_o = own->d_o;
  const backward_result& r = own->run.r;
  const backward_output& out = own->run.out;
  comparison cmp;
  const std::int64_t width = keys ? c.d : c.dv;
  const std::vector<char> seen = seen_keys(c);
  bool any_seen = false;
  for (std::int64_t bi = 0; bi < c.b; ++bi)
    for (std::int64_t g = 0; g < c.hkv; ++g)
      for (std::int64_t x = 0; x < width; ++x) {
        double sum = 0, abs_sum = 0, bound = 0;
        for (std::int64_t j = 0; j < c.lk; ++j) {
          any_seen = any_seen || seen[static_cast<std::size_t>((bi * c.hkv + g) * c.lk + j)];
          const double got = keys ? out.dk.at(bi, j, g, x) : out.dv.at(bi, j, g, x);
          sum += got, abs_sum += std::fabs(got);
          bound += keys ? r.dk_bound[backward_result::index(r.dk_shape, bi, j, g, x)]
                        : r.dv_bound[backward_result::index(r.dv_shape, bi, j, g, x)];
        }
        // Keys: sum_j dK_j = scale sum_r Q_r sum_j dS_rj = 0, every row's dS
        // summing to 0 over the keys it sees. Values: sum_j dV_j = sum_r dO_r
        // sum_j P_rj, over the rows that see a key (their P sums to 1).
        double expected = 0, terms = static_cast<double>(c.lk);
        if (!keys)
          for (std::int64_t h = g * c.group(); h < (g + 1) * c.group(); ++h)
            for (std::int64_t i = 0; i < c.lq; ++i)
              if (row_sees_any(c, bi, h, i)) {
                const double v = d_o.at(bi, i, h, x);
                expected += v, abs_sum += std::fabs(v), terms += 1;
              }
        bound += terms * 0x1p-52 * abs_sum;
        char label[96];
        std::snprintf(label, sizeof label, "sum_j %s[b=%lld,j,g=%lld,%s=%lld]", keys ? "dK" : "dV", static_cast<long long>(bi),
                      static_cast<long long>(g), keys ? "d" : "e", static_cast<long long>(x));
        cmp.element(std::string(label) + (keys ? " (must be 0)" : " vs sum of dO over the rows that see a key"), expected, sum,
                    bound);
      }
  if (!any_seen) o.nothing_to_judge("no row sees a key");
  o.add(keys ? "sums of dK over the keys" : "sums of dV over the keys against sums of dO", cmp);
  return o;
}

}  // namespace

law_outcome key_gradients_sum_to_zero(const subject& s, const attn_case& c) { return gradient_sums(s, c, true); }

law_outcome value_gradients_sum(const subject& s, const attn_case& c) { return gradient_sums(s, c, false); }

}  // namespace attncheck::laws
