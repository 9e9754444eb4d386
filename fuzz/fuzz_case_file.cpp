// fuzz_case_file: arbitrary bytes through the case-file reader and the
// one-line parser. input_error is the only allowed outcome for bad input;
// anything else (a crash, another exception, a huge allocation, a hang) is a
// finding. A case that parses must print and parse back to the same case.
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "attncheck/case_file.hpp"
#include "fuzz_support.hpp"

namespace {

using namespace attncheck;

// Limits a reader must honour with hostile input: 1 MiB of buffers is far
// beyond any byte string a fuzzer writes, so a larger allocation is a finding.
case_limits small_limits() {
  case_limits l;
  l.max_elements = 1 << 18;
  l.max_bytes = 1 << 20;
  l.max_pairs = 1 << 20;
  return l;
}

[[noreturn]] void finding(const char* what, const std::string& detail) {
  std::fprintf(stderr, "FAIL case reader (fuzz): %s: %s\n", what, detail.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // An input larger than 64 KiB exercises no parser path a smaller one cannot.
  if (size > 65536) return -1;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const case_limits limits = small_limits();
  try {
    const case_record r = parse_case_file(text, limits);
    // Round trip: what the writer prints, the reader takes back unchanged.
    const case_record again = parse_case_file(format_case_file(r), limits);
    if (fingerprint(again.c) != fingerprint(r.c) || again.law != r.law || again.subject != r.subject || again.note != r.note)
      finding("round trip changed the case", to_line(r.c));
  } catch (const input_error&) {
  } catch (const std::exception& e) {
    finding("parse_case_file threw something other than input_error", e.what());
  }
  try {
    const attn_case c = parse_line(text, limits);
    const std::string line = to_line(c);
    if (to_line(parse_line(line, limits)) != line) finding("one-line form does not round-trip", line);
  } catch (const input_error&) {
  } catch (const std::exception& e) {
    finding("parse_line threw something other than input_error", e.what());
  }
  return 0;
}
