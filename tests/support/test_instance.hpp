// The declaration the in-process test subjects start from: an f32 subject of
// one ABI version, u = 2^-24, exp within 1 ulp, no entry point yet. Each test
// adds the entry points, features and state its subject needs.
#pragma once

#include <cstdint>

#include "attncheck/subject.h"

namespace attncheck {

inline attncheck_instance f32_test_instance(std::uint32_t abi_version, const char* name) {
  attncheck_instance d{};
  d.abi_version = abi_version;
  d.struct_size = sizeof d;
  d.name = name;
  d.dtypes = 1u << ATTNCHECK_F32;
  d.compute_unit_roundoff = 0x1p-24;
  d.exp_ulps = 1;
  return d;
}

}  // namespace attncheck
