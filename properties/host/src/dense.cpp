// The dense call adapter: subject::attend on a case in the dense form, its
// buffers laid out as a call_layout says; a case in another form goes to
// attend_in_form (forms.hpp).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attncheck/masked_fill.hpp"
#include "attncheck/subject_host.hpp"
#include "forms.hpp"
#include "guarded.hpp"
#include "problem.hpp"

namespace attncheck {

using namespace host;

const attn_case& subject::handed_case(const attn_case& c, std::optional<attn_case>& filled) const {
  if (!masked_by_zero_) return c;
  filled = with_finite_unused(c);
  return *filled;
}

subject_output subject::attend(const attn_case& c, int threads) const {
  call_layout how;
  how.threads = threads;
  return attend(c, how);
}

subject_output subject::attend(const attn_case& given, const call_layout& how) const {
  decline_outside_limits(given);
  std::optional<attn_case> filled;
  const attn_case& c = handed_case(given, filled);
  if (!c.form.dense()) {
    if (const std::string why = cannot_take(c); !why.empty()) {
      subject_output refused;
      refused.status = -1;
      refused.error = "the host does not hand this case to " + name() + ": " + why;
      return refused;
    }
    subject_output out = host::attend_in_form(*inst_, c, how, has_lse(), masked_by_zero_);
    out.empty_rows = empty_rows_;
    settle_decline(out.status, out.error, out.guard_violated || !unwritten(out));
    read_unspecified_as_contract(given, out);
    return out;
  }
  subject_output out;
  out.empty_rows = empty_rows_;
  case_inputs inputs(c);
  output_buffers ob(c, c.lq, has_lse(), how.lse_strided);
  attncheck_problem p{};
  inputs.hand_over(p, c, how.threads);
  std::vector<std::uint8_t> mask;
  if (c.has_mask() && how.mask_expanded) {
    // The broadcast mask written out in full (no zero strides), keys outer
    // and queries inner with a gap after every key column; gaps alternate
    // 1 and 0, so reading one changes the answer somewhere.
    const std::int64_t s2 = 1, s3 = c.lq + 1, s1 = c.lk * s3, s0 = c.hq * s1;
    mask.resize(static_cast<std::size_t>(c.b * s0));
    for (std::size_t x = 0; x < mask.size(); ++x) mask[x] = static_cast<std::uint8_t>(x & 1);
    for (std::int64_t bi = 0; bi < c.b; ++bi)
      for (std::int64_t h = 0; h < c.hq; ++h)
        for (std::int64_t i = 0; i < c.lq; ++i)
          for (std::int64_t j = 0; j < c.lk; ++j)
            mask[static_cast<std::size_t>(bi * s0 + h * s1 + i * s2 + j * s3)] = c.mask_allows(bi, h, i, j) ? 1 : 0;
    p.mask = mask.data();
    p.mask_stride[0] = s0, p.mask_stride[1] = s1, p.mask_stride[2] = s2, p.mask_stride[3] = s3;
  }
  ob.hand_over(p);
  const call_result r = call_attend(*inst_, p, ob, c);
  out.status = r.status, out.error = r.error;
  ob.collect(out);
  settle_decline(out.status, out.error, out.guard_violated || !unwritten(out));
  read_unspecified_as_contract(given, out);
  return out;
}

}  // namespace attncheck
