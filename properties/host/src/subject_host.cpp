#include "attncheck/subject_host.hpp"

#include <dlfcn.h>
#include <signal.h>
#include <sys/prctl.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <numeric>
#include <sstream>

#include "attncheck/isolate.hpp"
#include "attncheck/subject_registry.hpp"
#include "forms.hpp"
#include "guarded.hpp"
#include "problem.hpp"

namespace attncheck {

using namespace host;

subject_output subject::attend(const attn_case& c, int threads) const {
  call_layout how;
  how.threads = threads;
  return attend(c, how);
}

subject_output subject::attend(const attn_case& c, const call_layout& how) const {
  if (!c.form.dense()) {
    if (const std::string why = cannot_take(c); !why.empty()) {
      subject_output refused;
      refused.status = -1;
      refused.error = "the host does not hand this case to " + name() + ": " + why;
      return refused;
    }
    return host::attend_in_form(*inst_, c, how, has_lse());
  }
  subject_output out;
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
  return out;
}

subject_output subject::attend_cached(const attn_case& c, const cache_plan& plan, int threads) const {
  subject_output out;
  if (!c.form.dense()) {
    out.status = -1;
    out.error = "the cache path takes the dense form only: a paged or ragged case is handed to attend";
    return out;
  }
  if (!has(ATTNCHECK_FEATURE_CACHE)) {
    out.status = -1;
    out.error = "subject has no cache";
    return out;
  }
  std::int64_t total_lq = 0;
  for (const auto& s : plan.steps) total_lq += s.lq;
  out.o = make_output(header_of(c, std::max<std::int64_t>(1, total_lq)));
  const bool want_lse = has_lse();
  if (want_lse) out.lse.assign(static_cast<std::size_t>(c.b * c.hq * total_lq), 0.0f);

  attncheck_cache_config cfg{};
  cfg.struct_size = sizeof cfg;
  cfg.dtype = to_abi(c.type);
  cfg.b = c.b, cfg.hkv = c.hkv, cfg.d = c.d, cfg.dv = c.dv;
  cfg.capacity = c.lk;
  cfg.page_size = plan.page_size;
  cfg.page_order = plan.page_order.empty() ? nullptr : plan.page_order.data();
  cfg.page_count = static_cast<std::int64_t>(plan.page_order.size());
  // One watched call for the whole chunked run (its steps rename the entry in flight).
  const watched_call watch("attend_cached", c.b * c.hq * std::max<std::int64_t>(1, total_lq) * c.lk * (c.d + c.dv));
  char err[err_cap] = {0};
  void* cache = [&] {
    const watched_call step("cache_create", 0);
    return inst_->cache_create(inst_->state, &cfg, err, err_cap);
  }();
  if (!cache) {
    out.status = -1;
    err[err_cap - 1] = 0;
    out.error = std::string("cache_create failed: ") + err;
    return out;
  }
  std::vector<std::int64_t> filled(static_cast<std::size_t>(c.b), 0);
  std::int64_t row0 = 0;
  for (const auto& step : plan.steps) {
    // New keys/values of this step only, (B, c, Hkv, D) dense, copied from the case.
    const std::int64_t cmax = *std::max_element(step.append.begin(), step.append.end());
    const std::int64_t cn = std::max<std::int64_t>(cmax, 1);
    tensor kn = tensor::contiguous(c.type, {c.b, cn, c.hkv, c.d});
    tensor vn = tensor::contiguous(c.type, {c.b, cn, c.hkv, c.dv});
    for (std::int64_t bi = 0; bi < c.b; ++bi)
      for (std::int64_t t = 0; t < step.append[static_cast<std::size_t>(bi)]; ++t)
        for (std::int64_t g = 0; g < c.hkv; ++g) {
          const std::int64_t j = filled[static_cast<std::size_t>(bi)] + t;
          for (std::int64_t x = 0; x < c.d; ++x) kn.set_bits(bi, t, g, x, c.k.bits_at(bi, j, g, x));
          for (std::int64_t x = 0; x < c.dv; ++x) vn.set_bits(bi, t, g, x, c.v.bits_at(bi, j, g, x));
        }
    guarded_bytes kg(kn), vg(vn);
    attncheck_tensor kv = view_of(kg, kn), vv = view_of(vg, vn);
    const int appended = [&] {
      const watched_call in("cache_append", 0);
      return inst_->cache_append(inst_->state, cache, &kv, &vv, cn, step.append.data(), err, err_cap);
    }();
    if (appended != 0) {
      out.status = -1;
      err[err_cap - 1] = 0;
      out.error = std::string("cache_append failed: ") + err;
      break;
    }
    for (std::int64_t bi = 0; bi < c.b; ++bi) filled[static_cast<std::size_t>(bi)] += step.append[static_cast<std::size_t>(bi)];
    // Queries: the last step.lq tokens of each sequence (rows that precede
    // the sequence start, or whose position has no row in the case, get zeros).
    tensor qn = tensor::contiguous(c.type, {c.b, step.lq, c.hq, c.d});
    for (std::int64_t bi = 0; bi < c.b; ++bi)
      for (std::int64_t i = 0; i < step.lq; ++i) {
        const std::int64_t pos = filled[static_cast<std::size_t>(bi)] - step.lq + i;
        // The case's Q rows are bottom-right aligned: row pos - n[b] + Lq holds position pos.
        const std::int64_t row = pos - c.valid_keys(bi) + c.lq;
        if (pos < 0 || row < 0 || row >= c.lq) continue;
        for (std::int64_t h = 0; h < c.hq; ++h)
          for (std::int64_t x = 0; x < c.d; ++x) qn.set_bits(bi, i, h, x, c.q.bits_at(bi, row, h, x));
      }
    guarded_bytes qg(qn);
    attn_case stepcase = header_of(c, step.lq);
    // The variants travel with every step: positions are absolute, so windows,
    // chunks, ALiBi and sinks apply as in the one-shot call; a bias with a
    // query dim is cut to the step's rows (zero where a row has no query).
    stepcase.variants = c.variants;
    if (c.variants.has_bias() && c.variants.bias_shape[2] != 1) {
      const auto& bs = c.variants.bias_shape;
      tensor cut = tensor::contiguous(c.variants.bias_type, {c.b, bs[1], step.lq, bs[3]});
      for (std::int64_t bi = 0; bi < c.b; ++bi)
        for (std::int64_t i = 0; i < step.lq; ++i) {
          const std::int64_t row = filled[static_cast<std::size_t>(bi)] - step.lq + i - c.valid_keys(bi) + c.lq;
          if (row < 0 || row >= c.lq) continue;
          for (std::int64_t h = 0; h < bs[1]; ++h)
            for (std::int64_t j = 0; j < bs[3]; ++j)
              cut.set_bits(bi, h, i, j, c.variants.bias.bits_at(bs[0] == 1 ? 0 : bi, h, row, j));
        }
      stepcase.variants.bias_shape = cut.shape;
      stepcase.variants.bias = std::move(cut);
    }
    const variant_parts parts(stepcase);
    output_buffers ob(stepcase, step.lq, want_lse);
    attncheck_problem p{};
    fill_problem(p, stepcase, threads);
    p.variants = parts.handed();
    p.q = view_of(qg, qn);
    ob.hand_over(p);
    const int rc = [&] {
      const watched_call in("cache_attend", 0);
      return inst_->cache_attend(inst_->state, cache, &p, err, err_cap);
    }();
    subject_output part;
    ob.collect(part);
    if (rc != 0 || part.guard_violated) {
      out.status = rc;
      err[err_cap - 1] = 0;
      out.error = rc ? std::string("cache_attend failed: ") + err : std::string();
      out.guard_violated = part.guard_violated;
      out.guard_report = part.guard_report;
      break;
    }
    for (std::int64_t bi = 0; bi < c.b; ++bi)
      for (std::int64_t i = 0; i < step.lq; ++i)
        for (std::int64_t h = 0; h < c.hq; ++h) {
          for (std::int64_t e = 0; e < c.dv; ++e) out.o.set_bits(bi, row0 + i, h, e, part.o.bits_at(bi, i, h, e));
          if (want_lse)
            out.lse[static_cast<std::size_t>((bi * c.hq + h) * total_lq + row0 + i)] =
                part.lse[static_cast<std::size_t>((bi * c.hq + h) * step.lq + i)];
        }
    row0 += step.lq;
  }
  {
    const watched_call in("cache_free", 0);
    inst_->cache_free(inst_->state, cache);
  }
  return out;
}

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

backward_output subject::backward(const attn_case& c, const backward_inputs& in, int threads) const {
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
  out.dq = std::move(dq.t), out.dk = std::move(dk.t), out.dv = std::move(dv.t);
  if (sinks)
    for (std::int64_t h = 0; h < c.hq; ++h) out.d_sinks.push_back(static_cast<float>(ds.t.at(h, 0, 0, 0)));
  return out;
}

}  // namespace attncheck
