// The main of every harness in an ordinary build (no libFuzzer): runs each
// file given, and every file under each folder given, through
// LLVMFuzzerTestOneInput once, so harnesses build and run with g++ too.
// Arguments starting with '-' (libFuzzer flags) and hidden files in folders
// (.gitkeep) are ignored.
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
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
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
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE_OR_FOLDER...  (replays inputs; build with -DATTNCHECK_LIBFUZZER=ON to fuzz)\n", argv[0]);
    return 2;
  }
  for (const auto& p : inputs) {
    std::ifstream f(p, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "replay: %s (%zu bytes)\n", p.c_str(), bytes.size());
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  }
  std::fprintf(stderr, "replayed %zu inputs without a finding\n", inputs.size());
  return 0;
}
