// Defaults of the tuning knobs and the numbers the bound of docs/bound.md needs from us.
#include <algorithm>
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

std::int64_t q_tile_for(const shape& s, const config& cfg) {
  if (cfg.q_tile > 0) return cfg.q_tile;
  const std::int64_t group = s.hkv > 0 ? std::max<std::int64_t>(1, s.hq / s.hkv) : 1;
  const std::int64_t lowest = std::max<std::int64_t>(1, 128 / group);
  const std::int64_t wanted = 8 * std::int64_t{resolve(cfg).threads};
  std::int64_t q_tile = std::max<std::int64_t>(1, 512 / group);
  // Larger units pack each K and V block for more rows (their slices of 128
  // share it); smaller ones keep every thread busy. b and hkv are each up to
  // 2^30: their product is compared first, so no product overflows.
  const std::int64_t heads = s.b * std::max<std::int64_t>(1, s.hkv);
  if (heads >= wanted) return q_tile;
  while (q_tile > lowest && heads * ((s.lq + q_tile - 1) / q_tile) < wanted) q_tile = std::max(lowest, q_tile / 2);
  return q_tile;
}

std::int64_t key_blocks(std::int64_t lk, const config& cfg) {
  if (lk <= 0) return 0;
  config r = resolve(cfg);
  std::int64_t blocks = (lk + r.k_tile - 1) / r.k_tile;
  std::int64_t chunks = (lk + r.split_keys - 1) / r.split_keys;
  return blocks + (chunks - 1);
}

std::int64_t key_blocks(std::int64_t lk, const config& cfg, const variants& var) {
  return key_blocks(lk, cfg) + (var.sinks ? 1 : 0);
}

}  // namespace attnimpl
