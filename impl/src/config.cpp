// Defaults of the tuning knobs and the numbers the SPEC bound needs from us.
#include <cmath>
#include <thread>

#include "attnimpl/attention.hpp"

namespace attnimpl {

float default_scale(std::int64_t d) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(d))); }

config resolve(const config& cfg) {
  config r = cfg;
  if (r.threads <= 0) {
    unsigned hw = std::thread::hardware_concurrency();
    r.threads = hw == 0 ? 1 : static_cast<int>(hw);
  }
  r.simd = resolve_isa(r.simd);
  if (r.k_tile <= 0) r.k_tile = 64;
  if (r.split_keys <= 0) r.split_keys = 1024;
  // Split boundaries must be block boundaries: chunks are whole blocks.
  r.split_keys = (r.split_keys + r.k_tile - 1) / r.k_tile * r.k_tile;
  return r;
}

std::int64_t key_blocks(std::int64_t lk, const config& cfg) {
  if (lk <= 0) return 0;
  config r = resolve(cfg);
  std::int64_t blocks = (lk + r.k_tile - 1) / r.k_tile;
  std::int64_t chunks = (lk + r.split_keys - 1) / r.split_keys;
  return blocks + (chunks - 1);
}

}  // namespace attnimpl
