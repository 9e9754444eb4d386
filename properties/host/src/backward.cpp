// The backward call adapter: subject::backward_blocks and subject::backward,
// dQ, dK, dV and d(sink) written into guarded outputs (guarded_output).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "attncheck/isolate.hpp"
#include "attncheck/subject_host.hpp"
#include "guarded.hpp"
#include "problem.hpp"

namespace attncheck {

using namespace host;

std::pair<std::int64_t, std::int64_t> subject::backward_blocks(const attn_case& c) const {
  std::int64_t dq = 1, dkv = 1;
  if (has_backward() && inst_->struct_size >= offsetof(attncheck_instance, backward_blocks) + sizeof inst_->backward_blocks &&
      inst_->backward_blocks) {
    attncheck_problem p{};
    fill_problem(p, c, 0);
    attncheck_backward_problem bp{};
    bp.struct_size = sizeof bp;
    bp.forward = &p;
    const watched_call watch("backward_blocks", 0);
    inst_->backward_blocks(inst_->state, &bp, &dq, &dkv);
  }
  const std::int64_t dq_cap = std::max<std::int64_t>(1, ATTNCHECK_MAX_KEY_BLOCKS_PER_KEY * c.lk);
  const std::int64_t dkv_cap = std::max<std::int64_t>(1, ATTNCHECK_MAX_KEY_BLOCKS_PER_KEY * c.group() * c.lq);
  return {std::clamp<std::int64_t>(dq, 1, dq_cap), std::clamp<std::int64_t>(dkv, 1, dkv_cap)};
}

backward_output subject::backward(const attn_case& given, const backward_inputs& in, int threads) const {
  decline_outside_limits(given);
  std::optional<attn_case> filled;
  const attn_case& c = handed_case(given, filled);
  backward_output out;
  if (!has_backward()) {
    out.status = -1;
    out.error = "subject declares no backward (FEATURE3_BACKWARD)";
    return out;
  }
  if (!c.form.dense()) {
    out.status = -1;
    out.error = "the backward entry point takes the dense form only (docs/abi.md)";
    return out;
  }
  if (c.variants.any() && !has_backward_variants()) {
    out.status = -1;
    out.error = "subject declares no backward under variants (FEATURE3_BACKWARD_VARIANTS)";
    return out;
  }
  if (in.o.shape != output_shape(c) || in.d_o.shape != output_shape(c) || in.o.type != c.type || in.d_o.type != c.type ||
      in.lse.size() != static_cast<std::size_t>(c.b * c.hq * c.lq))
    throw input_error("backward", "O, LSE and dO must have the case's shapes and storage type: " + to_line(c));
  case_inputs inputs(c);
  guarded_bytes og(in.o), dog(in.d_o);
  attncheck_problem p{};
  inputs.hand_over(p, c, threads);
  // LSE handed in dense (B, Hq, Lq) between guard bands of NaN.
  std::vector<float> lse = guarded_floats(in.lse.size());
  std::copy(in.lse.begin(), in.lse.end(), lse.begin() + guard_elems);
  guarded_output dq(make_tensor(c.type, c.q.shape, c.layout), "dQ"), dk(make_tensor(c.type, c.k.shape, c.layout), "dK"),
      dv(make_tensor(c.type, c.v.shape, c.layout), "dV");
  // d(sink): Hq f32 entries with sinks (a subject without BACKWARD_VARIANTS is never handed a variant).
  const bool sinks = c.variants.has_sinks();
  guarded_output ds(make_tensor(dtype::f32, dims4{sinks ? c.hq : 1, 1, 1, 1}, layout_kind::bshd), "d_sinks");
  attncheck_backward_problem bp{};
  bp.struct_size = sizeof bp;
  bp.forward = &p;
  bp.o = view_of(og, in.o);
  bp.lse = lse.data() + guard_elems;
  bp.lse_stride[0] = c.hq * c.lq, bp.lse_stride[1] = c.lq, bp.lse_stride[2] = 1;
  bp.d_o = view_of(dog, in.d_o);
  bp.dq = dq.view(), bp.dk = dk.view(), bp.dv = dv.view();
  if (sinks) bp.d_sinks = static_cast<float*>(ds.view());
  for (int a = 0; a < 4; ++a)
    bp.dq_stride[a] = dq.t.stride[a], bp.dk_stride[a] = dk.t.stride[a], bp.dv_stride[a] = dv.t.stride[a];
  const call_result r = call_subject("attend_backward", 3 * c.b * c.hq * c.lq * c.lk * (c.d + c.dv),
                                     [&](char* err) { return inst_->attend_backward(inst_->state, &bp, err, err_cap); },
                                     {dq.bytes(), dk.bytes(), dv.bytes(), ds.bytes()});
  out.status = r.status, out.error = r.error;
  std::ostringstream why;
  const bool v1 = dq.collect(why), v2 = dk.collect(why), v3 = dv.collect(why), v4 = ds.collect(why);
  out.guard_violated = v1 || v2 || v3 || v4;
  out.guard_report = finished_report(why.str());
  settle_decline(out.status, out.error,
                 out.guard_violated || !unwritten(dq.t) || !unwritten(dk.t) || !unwritten(dv.t) || !unwritten(ds.t));
  out.dq = std::move(dq.t), out.dk = std::move(dk.t), out.dv = std::move(dv.t);
  if (sinks)
    for (std::int64_t h = 0; h < c.hq; ++h) out.d_sinks.push_back(static_cast<float>(ds.t.at(h, 0, 0, 0)));
  return out;
}

}  // namespace attncheck
