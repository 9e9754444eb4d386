// Everything the kernel's headers include from outside the kernel, included
// by each ISA translation unit BEFORE it switches its instruction set on.
// Functions defined in these headers (the standard library's templates, the
// shared inline helpers) are emitted as weak symbols that every object file
// may provide; compiled here for the baseline, they stay safe whichever copy
// the linker keeps. The kernel's own headers are TU-local (anonymous
// namespaces) and come after the switch. tests/impl/isa_symbols_test.sh checks
// that no weak symbol of kernel_avx2.cpp.o holds a VEX instruction.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#include "attnimpl/attention.hpp"
#include "convert.hpp"
#include "engine.hpp"
#include "mutation.hpp"
#include "thread_pool.hpp"
