// The kernel on fixed problems, any machine: prints an FNV-1a hash of O's bits
// per case and over all, and the largest difference from a binary64 loop.
// ci/aarch64 runs it on x86-64 (avx512, avx2, portable) and on aarch64 under qemu:
// the hashes must agree (the portable path computes the AVX2 path's bits).
// Usage: isa_hash avx512|avx2|portable
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "attnimpl/attention.hpp"

using namespace attnimpl;

namespace {

std::uint64_t state = 88172645463325252ull;

/// xorshift64: the same values everywhere, multiples of 2^-21 in [-4, 4).
float draw() {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return static_cast<float>(static_cast<std::int64_t>(state >> 40) - (1 << 23)) / (1 << 21);
}

struct fnv {
  std::uint64_t h = 1469598103934665603ull;
  void add(float x) {
    std::uint32_t u;
    std::memcpy(&u, &x, 4);
    h = (h ^ u) * 1099511628211ull;
  }
};

}  // namespace

int main(int argc, char** argv) {
  const isa which = argc > 1 && !std::strcmp(argv[1], "avx2")     ? isa::avx2
                    : argc > 1 && !std::strcmp(argv[1], "avx512") ? isa::avx512
                                                                  : isa::portable;
  fnv all;
  double worst = 0;
  for (int c = 0; c < 12; ++c) {
    const std::int64_t b = 1 + c % 2, hkv = 1 + c % 3, group = 1 + c % 4, hq = hkv * group, lq = 1 + (c * 7) % 40,
                       lk = lq + (c * 13) % 300, d = 8 + (c * 17) % 130, dv = 3 + (c * 5) % 70;
    std::vector<float> q(b * lq * hq * d), k(b * lk * hkv * d), v(b * lk * hkv * dv), o(b * lq * hq * dv);
    for (auto* t : {&q, &k, &v})
      for (float& x : *t) x = draw();
    attention_args a;
    a.dims = {b, hq, hkv, lq, lk, d, dv};
    a.q = {q.data(), dtype::f32, {lq * hq * d, hq * d, d, 1}};
    a.k = {k.data(), dtype::f32, {lk * hkv * d, hkv * d, d, 1}};
    a.v = {v.data(), dtype::f32, {lk * hkv * dv, hkv * dv, dv, 1}};
    a.o = {o.data(), dtype::f32, {lq * hq * dv, hq * dv, dv, 1}};
    a.causal = c % 2 == 1;
    config cfg;
    cfg.threads = 2;
    cfg.simd = which;
    if (c % 3 == 2) cfg.q_tile = 2, cfg.k_tile = 3, cfg.split_keys = 6;
    if (const status s = attention(a, cfg); !s.ok()) {
      std::printf("error: %s\n", s.message.c_str());
      return 1;
    }
    fnv one;
    for (float x : o) one.add(x), all.add(x);
    // Every element against a binary64 loop (a sanity check; the gate judges).
    const double scale = default_scale(d);
    for (std::int64_t bi = 0; bi < b; ++bi)
      for (std::int64_t i = 0; i < lq; ++i)
        for (std::int64_t h = 0; h < hq; ++h) {
          const std::int64_t g = h / group, pos = lk - lq + i;
          std::vector<double> s(static_cast<std::size_t>(lk));
          double m = -INFINITY, l = 0;
          for (std::int64_t j = 0; j < lk; ++j) {
            double acc = 0;
            for (std::int64_t e = 0; e < d; ++e)
              acc += static_cast<double>(q[((bi * lq + i) * hq + h) * d + e]) * k[((bi * lk + j) * hkv + g) * d + e];
            s[j] = a.causal && j > pos ? -INFINITY : acc * scale;
            m = std::max(m, s[j]);
          }
          for (double& x : s) l += (x = std::exp(x - m));
          for (std::int64_t e = 0; e < dv; ++e) {
            double acc = 0;
            for (std::int64_t j = 0; j < lk; ++j) acc += s[j] * v[((bi * lk + j) * hkv + g) * dv + e];
            worst = std::max(worst, std::fabs(acc / l - o[((bi * lq + i) * hq + h) * dv + e]));
          }
        }
    std::printf("case %2d on %s: O bits fnv %016llx\n", c, isa_name(resolve_isa(which)), static_cast<unsigned long long>(one.h));
  }
  std::printf("all cases: fnv %016llx, max |O - binary64 loop| %.3g\n", static_cast<unsigned long long>(all.h), worst);
  return worst < 1e-3 ? 0 : 1;
}
