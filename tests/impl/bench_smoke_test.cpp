// The bench runs end to end on small shapes and prints every row of the
// issue-3 table; a bad option is refused. (Speed itself is not a test.)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench.hpp"

namespace {

int run_bench(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return attnimpl::bench::run(static_cast<int>(argv.size()), argv.data());
}

TEST(bench, quick_run_prints_probes_and_every_case) {
  ::testing::internal::CaptureStdout();
  const int rc = run_bench({"bench", "--quick", "--no-rss", "--reps", "1", "--threads", "2"});
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0);
  for (const char* line :
       {"probe: f32 FMA peak", "probe: memory read bandwidth", "prefill B=1 H=16 L=2048 D=128",
        "prefill causal B=1 H=16 L=2048 D=128", "prefill B=4 H=8 L=512 D=64", "decode GQA Hq=32 Hkv=8 Lk=512 D=128 f32",
        "decode GQA Hq=32 Hkv=8 Lk=4096 D=128 f32", "decode GQA Hq=32 Hkv=8 Lk=4096 D=128 bf16",
        "decode GQA Hq=32 Hkv=8 Lk=32768 D=128 f32", "decode GQA Hq=32 Hkv=8 Lk=32768 D=128 bf16",
        "decode GQA B=8 Hq=32 Hkv=8 Lk=4096 D=128 f32", "decode GQA B=8 Hq=32 Hkv=8 Lk=4096 D=128 bf16", "tok/s",
        // The backward pass, its GFLOP/s and share of the FMA probe.
        "backward: B=1 H=16 L=2048 D=128", "backward: causal B=1 H=16 L=2048 D=128", "backward FLOPs: 2.5 x",
        // The targets of docs/impl.md, as ratios within the run.
        "target: f32 decode Lk=32768 vs read probe", "target: bf16/f32 decode Lk=32768 tokens/s",
        "target: dense prefill B=1 H=16 L=2048 D=128 vs FMA probe", "target: causal prefill B=1 H=16 L=2048 D=128",
        "target: SWA prefill H=16 L=8192 W=1024 vs dense causal", "target: softcap=30 share of plain",
        "target: ALiBi share of plain", "target: sinks share of plain", "target: f32 bias (L x L) share of plain",
        "target: AVX-512 vs AVX2 prefill"})
    EXPECT_NE(out.find(line), std::string::npos) << "missing: " << line << "\n" << out;
}

TEST(bench, unknown_option_is_refused) {
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(run_bench({"bench", "--frobnicate"}), 2);
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("unknown option"), std::string::npos);
}

}  // namespace
