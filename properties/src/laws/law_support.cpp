#include "law_support.hpp"

namespace attncheck {

void law_outcome::fail(const std::string& why) {
  if (v != verdict::fail) message = why;
  v = verdict::fail;
}

void law_outcome::add(const std::string& label, const comparison& c) {
  if (!c.pass) fail(label + ": " + c.failure);
  compared += c.compared;
  if (c.max_ratio > max_ratio || (worst.where.empty() && !c.worst.where.empty())) {
    if (c.max_ratio >= max_ratio) {
      max_ratio = c.max_ratio;
      worst = c.worst;
    }
  }
}

namespace laws {

oracle_result fast_bound(const subject& s, const attn_case& c) {
  return reference(c, oracle_options_for(s, c, oracle_precision::binary64));
}

tensor remake(dtype t, dims4 shape, layout_kind layout,
              const std::function<std::uint32_t(std::int64_t, std::int64_t, std::int64_t, std::int64_t)>& bits_of) {
  tensor x = make_tensor(t, shape, layout);
  for (std::int64_t a = 0; a < shape[0]; ++a)
    for (std::int64_t b = 0; b < shape[1]; ++b)
      for (std::int64_t c = 0; c < shape[2]; ++c)
        for (std::int64_t d = 0; d < shape[3]; ++d) x.set_bits(a, b, c, d, bits_of(a, b, c, d));
  return x;
}

attn_case relayout(const attn_case& c, layout_kind layout) {
  attn_case r = c;
  r.layout = layout;
  for (auto* t : {&r.q, &r.k, &r.v}) {
    const tensor src = *t;
    *t = remake(src.type, src.shape, layout, [&](auto a, auto b, auto cc, auto d) { return src.bits_at(a, b, cc, d); });
  }
  return r;
}

comparison compare_within_bounds(const attn_case& c, const subject_output& a, const oracle_result& ra,
                                 const subject_output& b, const oracle_result& rb) {
  comparison r;
  r.overflow_threshold = overflow_threshold(c.type);
  if (!r.runs_ok({&a, &b})) return r;
  const std::int64_t lq = a.o.shape[1];
  for (std::int64_t bi = 0; bi < c.b; ++bi)
    for (std::int64_t i = 0; i < lq; ++i)
      for (std::int64_t h = 0; h < c.hq; ++h) {
        for (std::int64_t e = 0; e < c.dv; ++e) {
          const auto ka = ra.o_index(bi, i, h, e), kb = rb.o_index(bi, i, h, e);
          if (std::isnan(ra.o[ka]) || std::isnan(rb.o[kb])) continue;
          const double x = a.o.at(bi, i, h, e);
          if (std::isnan(x)) r.fail("NaN in the first run at " + o_where(bi, i, h, e));
          const double y = b.o.at(bi, i, h, e);
          if (r.overflowed(o_where(bi, i, h, e), ra.o[ka], ra.o_bound[ka] + rb.o_bound[kb], x, y)) continue;
          r.element(o_where(bi, i, h, e), x, y, ra.o_bound[ka] + rb.o_bound[kb]);
        }
        if (!a.lse.empty() && !b.lse.empty()) {
          const auto ka = ra.lse_index(bi, h, i), kb = rb.lse_index(bi, h, i);
          if (std::isnan(ra.lse[ka]) || std::isnan(rb.lse[kb])) continue;
          const auto k = static_cast<std::size_t>((bi * c.hq + h) * lq + i);
          if (std::isnan(a.lse[k])) r.fail("NaN in the first run at " + lse_where(bi, h, i));
          r.element(lse_where(bi, h, i), a.lse[k], b.lse[k], ra.lse_bound[ka] + rb.lse_bound[kb]);
        }
      }
  return r;
}

comparison compare_claimed(const subject& s, std::uint32_t claim, const attn_case& c, const subject_output& a,
                           const subject_output& b) {
  if (s.claims(claim)) return compare_bitwise(c, a, b);
  const oracle_result ref = fast_bound(s, c);
  return compare_within_bounds(c, a, ref, b, ref);
}

bool run_failed(const subject_output& out, law_outcome& o, const std::string& label) {
  if (out.ok()) return false;
  o.fail(label + ": " +
         (out.status ? "subject returned " + std::to_string(out.status) + ": " + out.error
                     : "subject wrote outside its output: " + out.guard_report));
  return true;
}

}  // namespace laws
}  // namespace attncheck
