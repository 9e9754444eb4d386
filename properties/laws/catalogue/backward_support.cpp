// The backward laws' shared support (backward_support.hpp).
#include "backward_support.hpp"

#include <algorithm>

#include "attncheck/case_space.hpp"

namespace attncheck::laws {

std::string takes_backward(const subject& s) {
  return s.has_backward() ? "" : "subject does not declare backward (ABI v3 FEATURE3_BACKWARD)";
}

void resync(attn_case& c) {
  if (c.has_padding()) {
    c.key_len.resize(static_cast<std::size_t>(c.b), c.lk);
    for (auto& n : c.key_len) n = std::min(n, c.lk);
  }
  if (c.has_mask()) {
    const dims4 full{c.b, c.hq, c.lq, c.lk};
    for (int a = 0; a < 4; ++a)
      if (c.mask_shape[a] != 1) c.mask_shape[a] = full[a];
    c.mask.clear();  // materialize() draws it again for the new shape
  }
}

void cut_to(attn_case& c, std::int64_t cap) {
  const auto half = [](std::int64_t& x) { x = std::max<std::int64_t>(1, (x + 1) / 2); };
  while (case_work(c) > cap) {
    std::int64_t g = c.group();
    if (c.b > 1) {
      half(c.b);
    } else if (c.hkv > 1) {
      half(c.hkv);
    } else if (g > 2) {
      half(g);
    } else if (c.d > 16 || c.dv > 16) {
      if (c.d >= c.dv)
        half(c.d);
      else
        half(c.dv);
    } else if (c.lq > 4 && c.lq >= c.lk / 4) {
      half(c.lq);
    } else if (c.lk > 4) {
      half(c.lk);
    } else if (c.d > 1 || c.dv > 1) {
      if (c.d >= c.dv)
        half(c.d);
      else
        half(c.dv);
    } else if (g > 1) {
      g = 1;
    } else if (c.lq > 1) {
      half(c.lq);
    } else {
      half(c.lk);
    }
    c.hq = c.hkv * g;
    resync(c);
  }
}

void draw_grad_recipe(attn_case& c) {
  if (!c.grad) c.grad = static_cast<grad_kind>(c.seed % 3);
}

// far_below and far_above offset every score of a row by 8e3 .. 1e30 (f32,
// bf16), and masked_lead does where no mask hides the lead. An f32 score then
// carries an error of u |s| >> 1 for most offsets, and the backward bound
// (docs/bound.md "Backward") is +inf on every element a row that sees a key
// feeds: such a case judges only the rows a mask empties. On a subject that
// takes no mask the oracle law judged nothing, about a quarter of its cases
// (numpy float64 gradients declared f32 without masks: 802 of 1000 judged,
// below the 90% floor), though the kernel was right. Those value kinds become
// large_logits, the largest scores the bound still covers.
void keep_values_bounded(attn_case& c) {
  if (c.values == value_kind::far_below || c.values == value_kind::far_above ||
      (c.values == value_kind::masked_lead && !c.has_mask()))
    c.values = value_kind::large_logits;
}

void prepare_backward(attn_case& c, const subject&) {
  c.variants = {};
  cut_to(c, backward_max_work);
  draw_grad_recipe(c);
}

void prepare_gradients(attn_case& c, const subject& s) {
  prepare_backward(c, s);
  keep_values_bounded(c);
}

std::vector<char> seen_keys(const attn_case& c) {
  std::vector<char> seen(static_cast<std::size_t>(c.b * c.hkv * c.lk), 0);
  for (std::int64_t bi = 0; bi < c.b; ++bi)
    for (std::int64_t h = 0; h < c.hq; ++h)
      for (std::int64_t i = 0; i < c.lq; ++i)
        for (std::int64_t j = 0; j < c.lk; ++j)
          if (sees(c, bi, h, i, j)) seen[static_cast<std::size_t>((bi * c.hkv + c.kv_head(h)) * c.lk + j)] = 1;
  return seen;
}

const tensor& grad_tensor(const backward_output& out, int which) { return which == 0 ? out.dq : which == 1 ? out.dk : out.dv; }
const std::vector<double>& grad_values(const backward_result& r, int which) {
  return which == 0 ? r.dq : which == 1 ? r.dk : r.dv;
}
const std::vector<double>& grad_bounds(const backward_result& r, int which) {
  return which == 0 ? r.dq_bound : which == 1 ? r.dk_bound : r.dv_bound;
}

backward_run run_on_oracle(const subject& s, const attn_case& c, const tensor& d_o) {
  backward_run run;
  run.r = reference_backward(c, d_o, backward_bound_for(s, c));
  run.out = s.backward(c, handed_inputs(c, run.r.o, run.r.lse, d_o));
  return run;
}

std::optional<own_backward_run> run_case_on_oracle(const subject& s, const attn_case& c, law_outcome& o) {
  own_backward_run own;
  own.d_o = draw_grad_output(c, grad_of(c));
  own.run = run_on_oracle(s, c, own.d_o);
  if (run_failed(own.run.out, o, "backward")) return std::nullopt;
  return own;
}

}  // namespace attncheck::laws
