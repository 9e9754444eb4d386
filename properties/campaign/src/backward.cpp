// The backward campaign's judging of one case: dQ, dK, dV (and d(sink))
// against the backward oracle, then the fudge-factor rules beside the bound.
#include <vector>

#include "attncheck/backward_fudge.hpp"
#include "attncheck/backward_inputs.hpp"
#include "attncheck/backward_oracle.hpp"
#include "campaign_internal.hpp"

namespace attncheck::campaign_detail {

// dQ, dK and dV against the backward oracle within the backward bound, the
// subject handed the oracle's O (storage type) and LSE (f32), as the law
// hands them; then the fudge-factor rules on the same gradients. The
// backward oracle is mpfr50 on every case.
void judge_backward(const subject& s, const attn_case& c, case_tally& t, std::map<std::string, campaign_stats>& grads) {
  const tensor d_o = draw_grad_output(c, c.grad.value_or(grad_kind::normal));
  const backward_result r = reference_backward(c, d_o, backward_bound_for(s, c));
  const auto out = s.backward(c, handed_inputs(c, r.o, r.lse, d_o));
  if (t.failed_to_run(out)) return;
  // Each gradient, dense row-major as the oracle's, judged element by element.
  struct one_gradient {
    const char* name;
    const tensor& got;
    const std::vector<double>& exact;
    const std::vector<double>& bound;
    const dims4& shape;
  };
  // d(sink) (Hq entries, f32 whatever the storage type) as a fourth, with sinks.
  tensor d_sinks = make_tensor(
      dtype::f32, dims4{std::max<std::int64_t>(1, static_cast<std::int64_t>(out.d_sinks.size())), 1, 1, 1}, layout_kind::bshd);
  for (std::size_t h = 0; h < out.d_sinks.size(); ++h) d_sinks.set(static_cast<std::int64_t>(h), 0, 0, 0, out.d_sinks[h]);
  const dims4 sink_shape{c.hq, 1, 1, 1};
  const one_gradient all[4] = {{"dQ", out.dq, r.dq, r.dq_bound, r.dq_shape},
                               {"dK", out.dk, r.dk, r.dk_bound, r.dk_shape},
                               {"dV", out.dv, r.dv, r.dv_bound, r.dv_shape},
                               {"dSink", d_sinks, r.d_sinks, r.d_sinks_bound, sink_shape}};
  gradient_values got;
  std::vector<double> got_sinks;
  std::vector<double>* got_of[4] = {&got.dq, &got.dk, &got.dv, &got_sinks};
  bool every_judged = true;
  for (int k = 0; k < (r.d_sinks.empty() ? 3 : 4); ++k) {
    const one_gradient& g = all[k];
    campaign_stats& gs = grads[g.name];
    comparison gw;
    gw.overflow_threshold = t.worst.overflow_threshold;
    gs.cases = 1;
    std::vector<double>& values = *got_of[k];
    values.reserve(g.exact.size());
    for (std::int64_t x0 = 0; x0 < g.shape[0]; ++x0)
      for (std::int64_t x1 = 0; x1 < g.shape[1]; ++x1)
        for (std::int64_t x2 = 0; x2 < g.shape[2]; ++x2)
          for (std::int64_t x3 = 0; x3 < g.shape[3]; ++x3) {
            const std::size_t x = backward_result::index(g.shape, x0, x1, x2, x3);
            const double v = g.got.at(x0, x1, x2, x3);
            values.push_back(v);
            every_judged = every_judged && std::isfinite(g.bound[x]);
            const auto where = [&] { return element_where(k == 3 ? sink_where(x0) : gradient_where(k, x0, x1, x2, x3)); };
            t.element(where, g.exact[x], v, g.bound[x], &gs, &gw, k == 3 ? overflow_threshold(dtype::f32) : 0.0);
          }
    gs.max_ratio_case = to_line(c) + "  " + gw.worst.describe();
    if (gs.violations) {
      gs.violating_cases = 1;
      gs.first_violation = to_line(c) + "  " + gw.failure;
      gs.violating.push_back({0, gs.first_violation.substr(0, 2000)});  // index set by the caller
    }
  }
  // The fudge-factor rules, on the cases whose every element the bound judges
  // (their same-precision reference covers contract 1.0 cases only).
  if (!every_judged || c.variants.any()) return;
  const gradient_values ref = same_precision_backward(c, d_o);
  t.st.fudge_cases = 1;
  t.st.bound_accepts = t.violated ? 0 : 1;
  t.st.pytorch_accepts = pytorch_rule_accepts(got.dq, ref.dq, r.dq) && pytorch_rule_accepts(got.dk, ref.dk, r.dk) &&
                         pytorch_rule_accepts(got.dv, ref.dv, r.dv);
  t.st.flash_accepts = flash_rule_accepts(got.dq, ref.dq, r.dq) && flash_rule_accepts(got.dk, ref.dk, r.dk) &&
                       flash_rule_accepts(got.dv, ref.dv, r.dv);
}

}  // namespace attncheck::campaign_detail
