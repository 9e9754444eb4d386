// same_precision_backward() and the PyTorch and FlashAttention fudge-factor
// rules (attncheck/backward_fudge.hpp).
#include "attncheck/backward_fudge.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace attncheck {

namespace {

std::size_t z(std::int64_t x) { return static_cast<std::size_t>(x); }

double stored(dtype t, double x) { return decode(t, encode(t, x)); }

}  // namespace

gradient_values same_precision_backward(const attn_case& c, const tensor& d_o) {
  const float scale = c.effective_scale();
  const auto q = [&](std::int64_t bi, std::int64_t i, std::int64_t h, std::int64_t d) {
    return static_cast<float>(c.q.at(bi, i, h, d));
  };
  const auto k = [&](std::int64_t bi, std::int64_t j, std::int64_t g, std::int64_t d) {
    return static_cast<float>(c.k.at(bi, j, g, d));
  };
  const auto v = [&](std::int64_t bi, std::int64_t j, std::int64_t g, std::int64_t e) {
    return static_cast<float>(c.v.at(bi, j, g, e));
  };
  const auto dov = [&](std::int64_t bi, std::int64_t i, std::int64_t h, std::int64_t e) {
    return static_cast<float>(d_o.at(bi, i, h, e));
  };
  const auto score = [&](std::int64_t bi, std::int64_t h, std::int64_t i, std::int64_t j) {
    float s = 0;
    for (std::int64_t d = 0; d < c.d; ++d) s += q(bi, i, h, d) * k(bi, j, c.kv_head(h), d);
    return s * scale;
  };
  const auto dot_dp = [&](std::int64_t bi, std::int64_t h, std::int64_t i, std::int64_t j) {
    float dp = 0;
    for (std::int64_t e = 0; e < c.dv; ++e) dp += dov(bi, i, h, e) * v(bi, j, c.kv_head(h), e);
    return dp;
  };
  const std::size_t rows = z(c.b * c.hq * c.lq);
  const auto row_of = [&](std::int64_t bi, std::int64_t h, std::int64_t i) { return z((bi * c.hq + h) * c.lq + i); };
  // Per row: whether it sees a key, its maximum score, the softmax's sum and D.
  std::vector<char> sees(rows, 0);
  std::vector<float> big_d(rows, 0.f), row_max(rows, -std::numeric_limits<float>::infinity()), sum_w(rows, 0.f);
  const auto weight = [&](std::int64_t bi, std::int64_t h, std::int64_t i, float s) {
    const std::size_t r = row_of(bi, h, i);
    return std::exp(s - row_max[r]) / sum_w[r];
  };
  for (std::int64_t bi = 0; bi < c.b; ++bi)
    for (std::int64_t h = 0; h < c.hq; ++h)
      for (std::int64_t i = 0; i < c.lq; ++i) {
        const std::size_t r = row_of(bi, h, i);
        for (std::int64_t j = 0; j < c.lk; ++j)
          if (c.visible(bi, h, i, j)) {
            sees[r] = 1;
            row_max[r] = std::max(row_max[r], score(bi, h, i, j));
          }
        if (!sees[r]) continue;
        for (std::int64_t j = 0; j < c.lk; ++j)
          if (c.visible(bi, h, i, j)) sum_w[r] += std::exp(score(bi, h, i, j) - row_max[r]);
        float dd = 0;
        for (std::int64_t j = 0; j < c.lk; ++j)
          if (c.visible(bi, h, i, j)) dd += weight(bi, h, i, score(bi, h, i, j)) * dot_dp(bi, h, i, j);
        big_d[r] = dd;
      }

  std::vector<float> dq_acc(z(c.b * c.lq * c.hq * c.d), 0.f), dk_acc(z(c.b * c.lk * c.hkv * c.d), 0.f),
      dv_acc(z(c.b * c.lk * c.hkv * c.dv), 0.f);
  std::vector<float> dq_part(z(c.d)), dk_part, dv_part;
  for (std::int64_t bi = 0; bi < c.b; ++bi)
    for (std::int64_t g = 0; g < c.hkv; ++g)
      for (std::int64_t h = g * c.group(); h < (g + 1) * c.group(); ++h) {
        // One query head's share of the KV head's dK and dV, then added in.
        dk_part.assign(z(c.lk * c.d), 0.f);
        dv_part.assign(z(c.lk * c.dv), 0.f);
        for (std::int64_t i = 0; i < c.lq; ++i) {
          const std::size_t r = row_of(bi, h, i);
          if (!sees[r]) continue;
          std::fill(dq_part.begin(), dq_part.end(), 0.f);
          for (std::int64_t j = 0; j < c.lk; ++j) {
            if (!c.visible(bi, h, i, j)) continue;
            const float p = weight(bi, h, i, score(bi, h, i, j));
            const float ds = p * (dot_dp(bi, h, i, j) - big_d[r]);
            for (std::int64_t d = 0; d < c.d; ++d) {
              dq_part[z(d)] += ds * k(bi, j, g, d);
              dk_part[z(j * c.d + d)] += ds * q(bi, i, h, d);
            }
            for (std::int64_t e = 0; e < c.dv; ++e) dv_part[z(j * c.dv + e)] += p * dov(bi, i, h, e);
          }
          float* dq = &dq_acc[z(((bi * c.lq + i) * c.hq + h) * c.d)];
          for (std::int64_t d = 0; d < c.d; ++d) dq[d] += scale * dq_part[z(d)];
        }
        for (std::int64_t j = 0; j < c.lk; ++j) {
          for (std::int64_t d = 0; d < c.d; ++d) dk_acc[z(((bi * c.lk + j) * c.hkv + g) * c.d + d)] += dk_part[z(j * c.d + d)];
          for (std::int64_t e = 0; e < c.dv; ++e) dv_acc[z(((bi * c.lk + j) * c.hkv + g) * c.dv + e)] += dv_part[z(j * c.dv + e)];
        }
      }
  gradient_values out;
  out.dq.resize(dq_acc.size());
  out.dk.resize(dk_acc.size());
  out.dv.resize(dv_acc.size());
  for (std::size_t x = 0; x < dq_acc.size(); ++x) out.dq[x] = stored(c.type, dq_acc[x]);
  for (std::size_t x = 0; x < dk_acc.size(); ++x) out.dk[x] = stored(c.type, scale * dk_acc[x]);
  for (std::size_t x = 0; x < dv_acc.size(); ++x) out.dv[x] = stored(c.type, dv_acc[x]);
  return out;
}

bool pytorch_rule_accepts(const std::vector<double>& got, const std::vector<double>& ref, const std::vector<double>& exact) {
  double atol = 0, rtol = 0;
  for (std::size_t x = 0; x < got.size(); ++x) {
    const double dev = std::fabs(ref[x] - exact[x]);
    atol = std::max(atol, dev);
    double rel = dev / std::fabs(exact[x]);
    if (std::isnan(rel)) rel = 1.3e-6;
    rtol = std::max(rtol, rel);
  }
  atol = 180 * std::max(atol, 1e-5);
  rtol = 180 * std::max(rtol, 1.3e-6);
  if (rtol > 1e30) rtol = 1.3e-6;
  for (std::size_t x = 0; x < got.size(); ++x)
    if (!(std::fabs(got[x] - exact[x]) <= atol + rtol * std::fabs(exact[x]))) return false;
  return true;
}

bool flash_rule_accepts(const std::vector<double>& got, const std::vector<double>& ref, const std::vector<double>& exact) {
  double ref_err = 0, got_err = 0;
  for (std::size_t x = 0; x < got.size(); ++x) {
    ref_err = std::max(ref_err, std::fabs(ref[x] - exact[x]));
    const double e = std::fabs(got[x] - exact[x]);
    got_err = std::isnan(e) ? std::numeric_limits<double>::infinity() : std::max(got_err, e);
  }
  return got_err <= 2 * ref_err;
}

}  // namespace attncheck
