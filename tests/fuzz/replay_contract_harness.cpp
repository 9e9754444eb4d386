// A harness whose verdict is its input's first byte, linked with
// fuzz/replay_main.cpp: lets replay_exit_test.sh check the replay's exit
// status for every outcome a real harness can have.
//   'p' returns 0 (passed), 'r' returns -1 (rejected), 'x' returns 7
//   (reserved by libFuzzer), 'a' aborts (a finding, as fuzz::expect_pass does).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  switch (size ? data[0] : 'p') {
    case 'r': return -1;
    case 'x': return 7;
    case 'a': std::fprintf(stderr, "FAIL replay.contract (fuzz)\n"); std::abort();
    default: return 0;
  }
}
