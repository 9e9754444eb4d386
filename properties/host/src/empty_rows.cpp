// Rows that give no key and no sink any weight, and an unspecified empty-row
// convention read as the contract's (docs/abi.md "Conventions").
#include <cmath>
#include <limits>

#include "attncheck/subject_host.hpp"

namespace attncheck {

bool every_visible_score_is_minus_inf(const attn_case& c, std::int64_t b, std::int64_t h, std::int64_t i) {
  const double scale = c.effective_scale();
  bool any = false;
  for (std::int64_t j = 0; j < c.lk; ++j) {
    if (!c.visible(b, h, i, j)) continue;
    double dot = 0;
    for (std::int64_t x = 0; x < c.d; ++x) dot += c.q_value(b, i, h, x) * c.k_value(b, j, c.kv_head(h), x);
    if (!(scale * dot == -std::numeric_limits<double>::infinity())) return false;
    any = true;
  }
  return any;
}

bool row_has_no_mass(const attn_case& c, std::int64_t bi, std::int64_t h, std::int64_t i) {
  if (!(c.sink_of(h) == -std::numeric_limits<double>::infinity())) return false;
  for (std::int64_t j = 0; j < c.lk; ++j)
    if (c.visible(bi, h, i, j)) return every_visible_score_is_minus_inf(c, bi, h, i);
  return true;
}

void read_unspecified_as_contract(const attn_case& c, subject_output& out) {
  const empty_row_convention& e = out.empty_rows;
  if (!e.any_unspecified() || out.status != 0 || out.o.shape[1] != c.lq) return;
  const bool o = e.o == empty_row_convention::o_kind::unspecified;
  const bool lse = e.lse == empty_row_convention::lse_kind::unspecified && !out.lse.empty();
  for (std::int64_t bi = 0; bi < c.b; ++bi)
    for (std::int64_t h = 0; h < c.hq; ++h)
      for (std::int64_t i = 0; i < c.lq; ++i) {
        if (!c.row_in_problem(bi, i) || !row_has_no_mass(c, bi, h, i)) continue;
        if (o)
          for (std::int64_t x = 0; x < c.dv; ++x) out.o.set(bi, i, h, x, 0.0);
        if (lse) out.lse[static_cast<std::size_t>((bi * c.hq + h) * c.lq + i)] = -std::numeric_limits<float>::infinity();
      }
}

}  // namespace attncheck
