// The subjects attncheck ships, as kinds of the host's subject registry
// (subject_registry.hpp). This layer alone links the bundled kernel (impl/).
//   builtin[:q_tile=N,k_tile=N,split_keys=N,simd=auto|avx2|portable]
//                                       the bundled kernel (0 or absent: production tiles)
//   builtin:tiles=tiny                  the same with the named tiny tiles (tiny_tiles below)
//   naive                               the in-tree naive f32 kernel (no options)
//   python:MODULE:CALLABLE[:key=value,...]
//                                       a Python callable, through the bridge plugin
//                                       libattncheck_python.so (docs/python.md)
#pragma once

#include <cstddef>

#include "attncheck/subject.h"

namespace attncheck {

/// Registers builtin, naive and python (idempotent). The attncheck command,
/// the tests and the Python module call it; a program linking
/// attncheck::subjects calls it before loading one of them by name.
void register_bundled_subjects();

/// The named tiny-tile configuration of the bundled kernel: tiles so small
/// that tile edges, rescales and split merges show on the small shapes laws shrink to.
inline constexpr const char* tiny_tiles = "q_tile=2,k_tile=3,split_keys=6";
/// The builtin subject at tiny tiles: "builtin:tiles=tiny".
inline constexpr const char* builtin_tiny = "builtin:tiles=tiny";
/// The builtin subject forced onto its portable instruction set (no AVX2).
inline constexpr const char* builtin_portable = "builtin:simd=portable";

/// Makes an instance of the bundled implementation (properties/subjects/builtin)
/// from an option string; NULL and a message in err when the options are bad.
attncheck_instance* builtin_instance(const char* options, char* err, std::size_t err_len);
/// The in-tree naive f32 kernel's descriptor (properties/subjects/naive), ABI v1.
const attncheck_subject* naive_subject();
/// The same kernel as an ABI v3 instance with every contract 1.1 score variant;
/// options must be empty (NULL and a message in err otherwise).
attncheck_instance* naive_instance_v3(const char* options, char* err, std::size_t err_len);

}  // namespace attncheck
