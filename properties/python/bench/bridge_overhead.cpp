// Measures what one call through a subject costs, for comparing the Python
// bridge with a C plugin on the same case (docs/python.md, "Overhead").
// Usage: attncheck_bridge_overhead SUBJECT CASE_LINE [CALLS]
//   e.g. attncheck_bridge_overhead 'python:tests/python/subjects.py:noop' 'ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1,f32)' 20000
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "attncheck/subject_host.hpp"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s SUBJECT CASE_LINE [CALLS]\n", argv[0]);
    return 2;
  }
  try {
    const auto subject = attncheck::subject::load(argv[1]);
    attncheck::attn_case c = attncheck::parse_line(argv[2]);
    attncheck::materialize(c);
    const long calls = argc > 3 ? std::atol(argv[3]) : 10000;
    if (calls < 1) throw attncheck::input_error("CALLS", "must be at least 1");
    // One warm-up call: imports, first allocations, caches.
    if (const auto first = subject->attend(c); !first.ok()) {
      std::fprintf(stderr, "the subject failed: %s%s\n", first.error.c_str(), first.guard_report.c_str());
      return 1;
    }
    const auto start = std::chrono::steady_clock::now();
    for (long n = 0; n < calls; ++n) (void)subject->attend(c);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("%s  %s  %ld calls  %.2f us/call (host buffers and guard checks included)\n", subject->name().c_str(),
                attncheck::to_line(c).c_str(), calls, 1e6 * s / static_cast<double>(calls));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}
