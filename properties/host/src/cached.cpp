// The cache call adapter: subject::attend_cached, a case run chunk by chunk
// through the subject's cache (cache_create, cache_append, cache_attend,
// cache_free), each step's output collected from guarded buffers.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attncheck/isolate.hpp"
#include "attncheck/subject_host.hpp"
#include "guarded.hpp"
#include "problem.hpp"

namespace attncheck {

using namespace host;

subject_output subject::attend_cached(const attn_case& given, const cache_plan& plan, int threads) const {
  decline_outside_limits(given);
  std::optional<attn_case> with_fill;
  const attn_case& c = handed_case(given, with_fill);
  subject_output out;
  out.empty_rows = empty_rows_;
  if (!c.form.dense()) {
    out.status = -1;
    out.error = "the cache path takes the dense form only: a paged or ragged case is handed to attend";
    return out;
  }
  if (c.quant.any()) {
    out.status = -1;
    out.error = "the cache path takes no fp8 inputs yet (cache_append_v4 is not built): an fp8 case is handed to attend";
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
  // A decline (version 4) of an append or of a step's attend ends the run;
  // the earlier steps' rows were written, the declining step's must not be.
  bool declined = false, declined_step_wrote = false;
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
      err[err_cap - 1] = 0;
      declined = may_decline() && appended == ATTNCHECK_DECLINED;
      out.status = declined ? appended : -1;
      out.error = declined ? std::string(err) : std::string("cache_append failed: ") + err;
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
      declined = may_decline() && rc == ATTNCHECK_DECLINED;
      declined_step_wrote = part.guard_violated || !unwritten(part);
      out.error = declined ? std::string(err) : rc ? std::string("cache_attend failed: ") + err : std::string();
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
  if (declined) settle_decline(out.status, out.error, declined_step_wrote);
  return out;
}

}  // namespace attncheck
