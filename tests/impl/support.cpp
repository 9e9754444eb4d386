#include "support.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>

#include "attncheck/dtype.hpp"

namespace attnimpl_test {

std::uint16_t bits16(dtype t, float x) {
  // f16 through the contract's exact encoder: independent of the kernel's.
  if (t == dtype::f16) return static_cast<std::uint16_t>(attncheck::encode(attncheck::dtype::f16, static_cast<double>(x)));
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

float from_bits16(dtype t, std::uint16_t b) {
  if (t == dtype::f16) return static_cast<float>(attncheck::decode(attncheck::dtype::f16, b));
  std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

float round_to(dtype t, float x) { return t == dtype::f32 ? x : from_bits16(t, bits16(t, x)); }

buffer buffer::make(dtype t, std::array<std::int64_t, 4> dims, layout l) {
  buffer b;
  b.type = t;
  b.dims = dims;
  std::int64_t size = 0;
  switch (l) {
    case layout::dense:
      b.stride = {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
      size = dims[0] * dims[1] * dims[2] * dims[3];
      break;
    case layout::head_major:  // (b, h, s, d) in memory
      b.stride = {dims[1] * dims[2] * dims[3], dims[3], dims[1] * dims[3], 1};
      size = dims[0] * dims[1] * dims[2] * dims[3];
      break;
    case layout::keys_across:  // (b, h, d, s) in memory
      b.stride = {dims[1] * dims[2] * dims[3], 1, dims[3] * dims[1], dims[1]};
      size = dims[0] * dims[1] * dims[2] * dims[3];
      break;
    case layout::padded: {  // gaps everywhere, a non-unit dim stride and an offset
      const std::int64_t sd = 2, sh = dims[3] * sd + 3, ss = dims[2] * sh + 5, sb = dims[1] * ss + 7;
      b.stride = {sb, ss, sh, sd};
      b.offset = 11;
      size = b.offset + dims[0] * sb;
      break;
    }
  }
  b.bytes.assign(static_cast<std::size_t>(size * b.elem()), 0);
  return b;
}

float buffer::get(std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d) const {
  const std::int64_t at = index(a, b, c, d);
  if (type == dtype::f32) {
    float f;
    std::memcpy(&f, bytes.data() + at * 4, 4);
    return f;
  }
  std::uint16_t h;
  std::memcpy(&h, bytes.data() + at * 2, 2);
  return from_bits16(type, h);
}

void buffer::set(std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d, float v) {
  const std::int64_t at = index(a, b, c, d);
  if (type == dtype::f32) {
    std::memcpy(bytes.data() + at * 4, &v, 4);
    return;
  }
  const std::uint16_t h = bits16(type, v);
  std::memcpy(bytes.data() + at * 2, &h, 2);
}

std::string problem::line() const {
  std::ostringstream s;
  s << "IMPL(b=" << dims.b << ",hq=" << dims.hq << ",hkv=" << dims.hkv << ",lq=" << dims.lq << ",lk=" << dims.lk
    << ",d=" << dims.d << ",dv=" << dims.dv << (causal ? ",causal" : "") << ",type="
    << (type == dtype::f32   ? "f32"
        : type == dtype::f16 ? "f16"
                             : "bf16");
  if (!key_len.empty()) {
    s << ",kpad=[";
    for (std::size_t i = 0; i < key_len.size(); ++i) s << (i ? "," : "") << key_len[i];
    s << "]";
  }
  if (mask_dims[0]) s << ",mask=" << mask_dims[0] << "x" << mask_dims[1] << "x" << mask_dims[2] << "x" << mask_dims[3];
  s << ",seed=" << seed << ")";
  return s.str();
}

bool problem::visible(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) const {
  const std::int64_t n = key_len.empty() ? dims.lk : key_len[static_cast<std::size_t>(b)];
  if (j >= n) return false;
  if (causal && j > n - dims.lq + i) return false;
  if (mask_dims[0]) {
    const auto at = [&](int axis, std::int64_t x) { return mask_dims[axis] == 1 ? 0 : x; };
    const std::int64_t idx = ((at(0, b) * mask_dims[1] + at(1, h)) * mask_dims[2] + at(2, i)) * mask_dims[3] + at(3, j);
    if (!mask[static_cast<std::size_t>(idx)]) return false;
  }
  return true;
}

attnimpl::attention_args problem::args() {
  attnimpl::attention_args a;
  a.dims = dims;
  a.q = q.in();
  a.k = k.in();
  a.v = v.in();
  a.o = o.out();
  a.lse.data = lse.data();
  a.lse.stride = {dims.hq * dims.lq, dims.lq, 1};
  if (scale != 0.0f) a.scale = scale;
  a.causal = causal;
  a.key_len = key_len.empty() ? nullptr : key_len.data();
  if (mask_dims[0]) {
    a.mask.data = mask.data();
    const std::int64_t sj = 1, si = mask_dims[3], sh = si * mask_dims[2], sb = sh * mask_dims[1];
    a.mask.stride = {mask_dims[0] == 1 ? 0 : sb, mask_dims[1] == 1 ? 0 : sh, mask_dims[2] == 1 ? 0 : si,
                     mask_dims[3] == 1 ? 0 : sj};
  }
  return a;
}

problem make_problem(const problem_spec& s) {
  problem p;
  p.dims = s.dims;
  p.type = s.type;
  p.causal = s.causal;
  p.seed = s.seed;
  std::mt19937_64 rng(s.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const auto& d = s.dims;
  p.q = buffer::make(s.type, {d.b, d.lq, d.hq, d.d}, s.lay);
  p.k = buffer::make(s.type, {d.b, d.lk, d.hkv, d.d}, s.lay);
  p.v = buffer::make(s.type, {d.b, d.lk, d.hkv, d.dv}, s.lay);
  p.o = buffer::make(s.type, {d.b, d.lq, d.hq, d.dv}, s.lay);
  p.lse.assign(static_cast<std::size_t>(d.b * d.hq * d.lq), 0.0f);
  const auto fill = [&](buffer& t) {
    for (std::int64_t a = 0; a < t.dims[0]; ++a)
      for (std::int64_t b = 0; b < t.dims[1]; ++b)
        for (std::int64_t c = 0; c < t.dims[2]; ++c)
          for (std::int64_t e = 0; e < t.dims[3]; ++e) t.set(a, b, c, e, normal(rng));
  };
  fill(p.q);
  fill(p.k);
  fill(p.v);
  if (s.padding) {
    std::uniform_int_distribution<std::int64_t> len(0, d.lk);
    for (std::int64_t b = 0; b < d.b; ++b) p.key_len.push_back(b == 0 ? d.lk : len(rng));
  }
  if (s.mask) {
    switch (s.mask) {
      case 1: p.mask_dims = {d.b, d.hq, d.lq, d.lk}; break;
      case 2: p.mask_dims = {1, 1, d.lq, d.lk}; break;
      default: p.mask_dims = {1, 1, 1, d.lk}; break;
    }
    const std::int64_t n = p.mask_dims[0] * p.mask_dims[1] * p.mask_dims[2] * p.mask_dims[3];
    std::bernoulli_distribution allowed(0.75);
    for (std::int64_t i = 0; i < n; ++i) p.mask.push_back(allowed(rng) ? 1 : 0);
  }
  return p;
}

void run(problem& p, const attnimpl::config& cfg) {
  const attnimpl::status st = attnimpl::attention(p.args(), cfg);
  ASSERT_TRUE(st.ok()) << st.message << " for " << p.line();
}

std::vector<std::uint32_t> output_bits(const problem& p) {
  std::vector<std::uint32_t> bits;
  for (std::int64_t b = 0; b < p.dims.b; ++b)
    for (std::int64_t i = 0; i < p.dims.lq; ++i)
      for (std::int64_t h = 0; h < p.dims.hq; ++h)
        for (std::int64_t e = 0; e < p.dims.dv; ++e) {
          const float f = p.o.get(b, i, h, e);
          std::uint32_t u;
          std::memcpy(&u, &f, 4);
          bits.push_back(u);
        }
  for (float f : p.lse) {
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    bits.push_back(u);
  }
  return bits;
}

void poison_masked(problem& p) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto& d = p.dims;
  const std::int64_t group = d.hq / d.hkv;
  for (std::int64_t b = 0; b < d.b; ++b) {
    std::vector<char> key_used(static_cast<std::size_t>(d.lk * d.hkv), 0);
    for (std::int64_t h = 0; h < d.hq; ++h)
      for (std::int64_t i = 0; i < d.lq; ++i) {
        bool row_used = false;
        for (std::int64_t j = 0; j < d.lk; ++j)
          if (p.visible(b, h, i, j)) {
            row_used = true;
            key_used[static_cast<std::size_t>(j * d.hkv + h / group)] = 1;
          }
        if (!row_used)
          for (std::int64_t e = 0; e < d.d; ++e) p.q.set(b, i, h, e, nan);
      }
    for (std::int64_t j = 0; j < d.lk; ++j)
      for (std::int64_t g = 0; g < d.hkv; ++g) {
        if (key_used[static_cast<std::size_t>(j * d.hkv + g)]) continue;
        for (std::int64_t e = 0; e < d.d; ++e) p.k.set(b, j, g, e, nan);
        for (std::int64_t e = 0; e < d.dv; ++e) p.v.set(b, j, g, e, nan);
      }
  }
}

}  // namespace attnimpl_test
