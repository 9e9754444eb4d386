// A C++ plugin whose entry point was defined without extern "C" (and without
// including attncheck/subject.h, which declares it so): the symbol is mangled,
// and the host's load error must name it and the fix.
#include <cstddef>

struct attncheck_instance;

__attribute__((visibility("default"))) attncheck_instance* attncheck_subject_v2(const char*, char* err, std::size_t len) {
  if (err && len) err[0] = 0;
  return nullptr;
}
