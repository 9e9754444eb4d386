// Building a subject's problem from a case (problem.hpp), and the subject's
// questions about a case: whether it can take it (cannot_take) and its key
// blocks on it (key_blocks).
#include "problem.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "attncheck/features.hpp"
#include "attncheck/isolate.hpp"
#include "attncheck/subject_host.hpp"

namespace attncheck {

namespace host {

attncheck_dtype to_abi(dtype t) {
  switch (t) {
    case dtype::f32: return ATTNCHECK_F32;
    case dtype::f16: return ATTNCHECK_F16;
    case dtype::bf16: return ATTNCHECK_BF16;
    case dtype::e4m3: return ATTNCHECK_E4M3;
    case dtype::e5m2: return ATTNCHECK_E5M2;
  }
  return ATTNCHECK_F32;
}

void fill_problem(attncheck_problem& p, const attn_case& c, int threads) {
  p.struct_size = sizeof(attncheck_problem);
  p.dtype = to_abi(c.q_type());  // O's type is in quant->o_dtype when Q is fp8
  p.b = c.b, p.hq = c.hq, p.hkv = c.hkv, p.lq = c.lq, p.lk = c.lk, p.d = c.d, p.dv = c.dv;
  p.scale = c.effective_scale();
  p.causal = c.causal ? 1 : 0;
  p.threads = threads;
}

variant_parts::variant_parts(const attn_case& c) : any(c.variants.any()) {
  const score_variants& w = c.variants;
  v.struct_size = sizeof v;
  v.window_left = w.window_left;
  v.window_right = w.window_right;
  v.chunk = w.chunk;
  v.softcap = w.softcap;
  v.sinks = w.has_sinks() ? w.sink_logits.data() : nullptr;
  v.alibi = w.has_alibi() ? w.alibi_slopes.data() : nullptr;
  v.bias_dtype = to_abi(w.bias_type);
  if (w.has_bias()) {
    bias = w.bias.packed_storage();
    v.bias = bias.data();
    const auto& bs = w.bias_shape;
    const std::int64_t dense[4] = {bs[1] * bs[2] * bs[3], bs[2] * bs[3], bs[3], 1};
    for (int a = 0; a < 4; ++a) v.bias_stride[a] = bs[a] == 1 ? 0 : dense[a];
  }
}

quant_parts::quant_parts(const attn_case& c) : any(c.quant.any()) {
  const quantization& x = c.quant;
  q.struct_size = sizeof q;
  q.q_dtype = to_abi(c.q_type()), q.k_dtype = to_abi(c.k_type()), q.v_dtype = to_abi(c.v_type());
  q.o_dtype = to_abi(c.type);
  q.q_granularity = static_cast<std::uint32_t>(x.q_scale);
  q.k_granularity = static_cast<std::uint32_t>(x.k_scale);
  q.v_granularity = static_cast<std::uint32_t>(x.v_scale);
  q.q_descale = x.q_scale == descale_granularity::none ? nullptr : x.q_descale.data();
  q.k_descale = x.k_scale == descale_granularity::none ? nullptr : x.k_descale.data();
  q.v_descale = x.v_scale == descale_granularity::none ? nullptr : x.v_descale.data();
  q.o_scale = 1.0f;
}

void case_inputs::hand_over(attncheck_problem& p, const attn_case& c, int threads) {
  fill_problem(p, c, threads);
  p.q = view_of(q, c.q);
  p.k = view_of(k, c.k);
  p.v = view_of(v, c.v);
  if (c.has_padding()) p.key_len = key_len.data();
  if (c.has_mask()) {
    const auto& ms = c.mask_shape;
    p.mask = c.mask.data();
    const std::int64_t dense[4] = {ms[1] * ms[2] * ms[3], ms[2] * ms[3], ms[3], 1};
    for (int a = 0; a < 4; ++a) p.mask_stride[a] = ms[a] == 1 ? 0 : dense[a];
  }
  p.variants = parts.handed();
  p.quant = quant.handed();
}

}  // namespace host

std::string subject::cannot_take(const attn_case& c, bool want_lse) const {
  for (const dtype t : {c.type, c.q_type(), c.k_type(), c.v_type()})
    if (!(inst_->dtypes & (1u << static_cast<unsigned>(host::to_abi(t)))))
      return std::string("no ") + std::string(attncheck::name(t));
  // Every contract feature the case uses, and LSE when the law wants it, in
  // the table's order: a variant or input form only to a version 3 subject
  // that declared it.
  for (const contract_feature& f : contract_features()) {
    const bool declared = f.abi_word == 1 ? has(f.bit) : f.abi_word == 3 ? has_v3(f.bit) : has_v4(f.bit);
    if (f.present && f.present(c) && !declared) return f.cannot_take;
    if (f.abi_word == 1 && f.bit == ATTNCHECK_FEATURE_LSE && want_lse && !has_lse()) return f.cannot_take;
  }
  return {};
}

std::int64_t subject::key_blocks(const attn_case& c) const {
  if (!inst_->key_blocks) return 1;
  attncheck_problem p{};
  host::fill_problem(p, c, 0);
  const host::variant_parts parts(c);
  p.variants = parts.handed();
  const std::int64_t cap = std::max<std::int64_t>(1, ATTNCHECK_MAX_KEY_BLOCKS_PER_KEY * c.lk);
  const watched_call watch("key_blocks", 0);
  return std::clamp<std::int64_t>(inst_->key_blocks(inst_->state, &p), 1, cap);
}

}  // namespace attncheck
