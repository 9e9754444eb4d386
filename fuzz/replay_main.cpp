// The main of every harness in an ordinary build (no libFuzzer): runs each
// file given, and every file under each folder given, through
// LLVMFuzzerTestOneInput once, so harnesses build and run with g++ too.
// Exit status: 0 when every input returned 0; 1 when one returned anything
// else (-1, "rejected": outside the harness's domain, fails too unless
// --allow-rejected is given; other values are reserved by libFuzzer); a
// finding aborts the process (non-zero as well); 2 on a usage error.
// Other arguments starting with '-' (libFuzzer flags) and hidden files in
// folders (.gitkeep) are ignored.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) __attribute__((weak));

// Harnesses with a custom mutator call libFuzzer's; replay never mutates.
extern "C" std::size_t LLVMFuzzerMutate(std::uint8_t*, std::size_t size, std::size_t) { return size; }

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  namespace fs = std::filesystem;
  std::vector<fs::path> inputs;
  bool allow_rejected = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--allow-rejected") {
      allow_rejected = true;
      continue;
    }
    if (arg.rfind("-", 0) == 0) continue;
    std::error_code ec;
    if (fs::is_directory(arg, ec)) {
      std::vector<fs::path> found;
      for (const auto& e : fs::recursive_directory_iterator(arg, ec))
        if (e.is_regular_file() && e.path().filename().string().rfind(".", 0) != 0) found.push_back(e.path());
      std::sort(found.begin(), found.end());  // a stable order: the same run every time
      inputs.insert(inputs.end(), found.begin(), found.end());
    } else if (fs::is_regular_file(arg, ec)) {
      inputs.emplace_back(arg);
    } else {
      std::fprintf(stderr, "%s: no such file or folder: %s\n", argv[0], arg.c_str());
      return 2;
    }
  }
  if (inputs.empty()) {
    std::fprintf(stderr,
                 "usage: %s [--allow-rejected] FILE_OR_FOLDER...  (replays inputs, at least one; build with "
                 "-DATTNCHECK_LIBFUZZER=ON to fuzz)\n",
                 argv[0]);
    return 2;
  }
  std::size_t passed = 0, rejected = 0, failed = 0;
  for (const auto& p : inputs) {
    std::ifstream f(p, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "replay: %s (%zu bytes)\n", p.c_str(), bytes.size());
    const int rc = LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    if (rc == 0) {
      ++passed;
    } else if (rc == -1) {
      ++rejected;
      std::fprintf(stderr, "replay: %s: rejected (-1: outside the harness's domain)%s\n", p.c_str(),
                   allow_rejected ? "" : "; a failure without --allow-rejected");
    } else {
      ++failed;
      std::fprintf(stderr, "replay: %s: the harness returned %d (libFuzzer allows 0 and -1)\n", p.c_str(), rc);
    }
  }
  const bool ok = failed == 0 && (allow_rejected || rejected == 0);
  std::fprintf(stderr, "replayed %zu inputs: %zu passed, %zu rejected, %zu failed: %s\n", inputs.size(), passed, rejected, failed,
               ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
