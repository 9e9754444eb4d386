// Runtime dispatch between the kernel's three builds, and the instruction-set
// queries of attention.hpp. Compiled for the baseline: it may run anywhere.
#include "engine.hpp"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "attnimpl/exp.hpp"

namespace attnimpl {
namespace {

bool cpu_has_avx2() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  // libgcc/compiler-rt count AVX features only where the OS saves YMM state.
  // F16C from CPUID itself: clang 14's __builtin_cpu_supports does not know it.
  static const bool has = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    const bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
  }();
  return has;
#else
  return false;
#endif
}

bool cpu_has_avx512() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  // libgcc/compiler-rt count AVX-512 features only where the OS saves ZMM
  // and mask state (XCR0), as for AVX above.
  static const bool has = cpu_has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl");
  return has;
#else
  return false;
#endif
}

}  // namespace

bool isa_supported(isa which) {
  if (which == isa::avx2) return cpu_has_avx2();
  if (which == isa::avx512) return cpu_has_avx512();
  return true;
}

namespace {
// The ISAs by name ("auto" also parses from "").
constexpr std::pair<isa, const char*> isa_names[] = {
    {isa::automatic, "auto"}, {isa::avx2, "avx2"}, {isa::portable, "portable"}, {isa::avx512, "avx512"}};
}  // namespace

const char* isa_name(isa which) {
  for (const auto& [k, n] : isa_names)
    if (k == which) return n;
  return "?";
}

std::optional<isa> parse_isa(std::string_view name) {
  if (name.empty()) return isa::automatic;
  for (const auto& [k, n] : isa_names)
    if (name == n) return k;
  return std::nullopt;
}

// The kernel reads no environment: its caller chooses (the suite's builtin
// subject maps the variable ATTNIMPL_ISA onto config.simd).
status check_isa(isa requested) {
  const isa which = resolve_isa(requested);
  if (which == isa::avx512 && !isa_supported(which))
    return status::invalid("config.simd = avx512 needs a CPU with AVX-512 F, BW and VL, AVX2, FMA and F16C; this one lacks them");
  if (!isa_supported(which))
    return status::invalid("config.simd = avx2 needs a CPU with AVX2, FMA and F16C; this one lacks them");
  return status::success();
}

isa resolve_isa(isa requested) {
  if (requested == isa::automatic) return cpu_has_avx512() ? isa::avx512 : cpu_has_avx2() ? isa::avx2 : isa::portable;
  return requested;
}

bool exp_kernel(const float* x, float* y, std::size_t n, isa which) {
  which = resolve_isa(which);
  if (!isa_supported(which)) return false;
  engine::exp_array(x, y, n, which);
  return true;
}

bool tanh_kernel(const float* x, float* y, std::size_t n, isa which) {
  which = resolve_isa(which);
  if (!isa_supported(which)) return false;
  engine::tanh_array(x, y, n, which);
  return true;
}

bool fma_kernel(const float* a, const float* b, const float* c, float* out, std::size_t n, isa which) {
  which = resolve_isa(which);
  if (!isa_supported(which)) return false;
  engine::build_for(which).fma_array(a, b, c, out, n);
  return true;
}

namespace engine {

const isa_build& build_for([[maybe_unused]] isa which) {
#if defined(__x86_64__)
  if (which == isa::avx512) return avx512::entry_points;
  if (which == isa::avx2) return avx2::entry_points;
#endif
  return portable::entry_points;
}

void run(const problem& p, const config& cfg) { build_for(cfg.simd).run(p, cfg); }

void exp_array(const float* x, float* y, std::size_t n, isa which) { build_for(which).exp_array(x, y, n); }

void tanh_array(const float* x, float* y, std::size_t n, isa which) { build_for(which).tanh_array(x, y, n); }

}  // namespace engine
}  // namespace attnimpl
