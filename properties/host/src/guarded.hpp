// The host's guarded-buffer core, shared by every call adapter: buffers with
// guard bands on both sides, the poison (sentinel) they are filled with, the
// write maps that say where a subject wrote outside a buffer, the output
// buffers of a forward call, and one call of a subject (under the watchdog,
// in its own forked child when calls are isolated).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "attncheck/case.hpp"
#include "attncheck/subject.h"
#include "attncheck/subject_host.hpp"

namespace attncheck::host {

constexpr std::size_t err_cap = ATTNCHECK_ERR_CAPACITY;

// Guard words on each side of every buffer handed to a subject: writes there
// are out of bounds; reads there meet NaN and show up in the result. Before a
// buffer: guard_elems. After it: as many elements as the buffer holds (at
// least guard_elems), so a subject that takes a 2-byte dtype for a 4-byte one
// (declares f16, reads and writes f32) stays inside the guards: the overrun
// is reported with a case that shrinks, not a heap it corrupts.
constexpr std::size_t guard_elems = 64;
inline std::size_t tail_guard(std::size_t payload) { return std::max(guard_elems, payload); }

/// The poison of a storage type: a quiet NaN with a payload nobody computes.
std::uint32_t sentinel_bits(dtype t);
/// t with every storage element (view and gaps) set to the sentinel, so that
/// unwritten elements and stray writes show.
tensor poisoned(tensor t);
/// n f32 elements between guard bands, every one of them the sentinel; the
/// payload starts at element guard_elems.
std::vector<float> guarded_floats(std::size_t n);

// Packed bytes of a tensor's storage with guard elements on both sides; the
// tensor's element 0 starts at data().
struct guarded_bytes {
  std::vector<unsigned char> bytes;
  std::size_t width = 4;
  std::size_t payload = 0;  // elements

  explicit guarded_bytes(const tensor& t);
  void put(std::size_t i, std::uint32_t v);
  std::uint32_t get(std::size_t i) const;
  unsigned char* data() { return bytes.data() + guard_elems * width; }
  std::size_t tail() const { return tail_guard(payload); }
  std::size_t elements() const { return guard_elems + payload + tail(); }
};

/// The view of t handed to a subject: t's strides over its guarded copy g.
attncheck_tensor view_of(guarded_bytes& g, const tensor& t);

// The header of a case without its tensors or mask: what make_output and
// fill_problem read. Copying a whole case per cache step copied all of K and V.
attn_case header_of(const attn_case& c, std::int64_t lq);

// One output a subject writes: the tensor in the case's layout, every storage
// element (view and gaps) and both guard bands poisoned with the sentinel, so
// that unwritten elements and stray writes show.
struct guarded_output {
  tensor t;
  guarded_bytes g;
  const char* label;  // how reports name it: "O", "dQ", ...

  guarded_output(tensor shape_and_layout, const char* what) : t(poisoned(std::move(shape_and_layout))), g(t), label(what) {}
  void* view() { return g.data() + static_cast<std::size_t>(t.offset) * g.width; }  // writable: view_of gives a const view
  std::span<std::byte> bytes() { return std::as_writable_bytes(std::span(g.bytes)); }
  // Copies the result into t; appends to `why` where the subject wrote outside
  // the view (a gap, before the start, past the end). True when it did.
  bool collect(std::ostringstream& why);
};

// The output handed to a forward call: O in the case's layout (guarded_output),
// and LSE dense (B, Hq, Lq) or strided, between guard bands of the sentinel.
struct output_buffers {
  guarded_output o;
  std::vector<float> lse;  // guard + storage + guard
  std::size_t lse_n = 0;   // storage elements
  std::int64_t b = 0, hq = 0, lq = 0;
  std::array<std::int64_t, 3> lse_stride{};  // over (b, h, i)

  output_buffers(const attn_case& c, std::int64_t lq_, bool want_lse, bool lse_strided = false);
  float* lse_data() { return lse.empty() ? nullptr : lse.data() + guard_elems; }
  std::span<std::byte> lse_bytes() { return std::as_writable_bytes(std::span(lse)); }
  std::size_t lse_index(std::int64_t bi, std::int64_t h, std::int64_t i) const {
    return static_cast<std::size_t>(bi * lse_stride[0] + h * lse_stride[1] + i * lse_stride[2]);
  }
  /// Points p's O and LSE at these buffers.
  void hand_over(attncheck_problem& p);
  // Copies the result back into subject_output and checks the guards.
  void collect(subject_output& out);
};

/// True when every storage element of t still holds the sentinel (a call
/// that wrote none of it), and likewise for f32 values.
bool unwritten(const tensor& t);
bool unwritten(const std::vector<float>& values);
/// True when a forward call wrote none of O and LSE (a decline must not).
inline bool unwritten(const subject_output& out) { return unwritten(out.o) && unwritten(out.lse); }

/// Ends a report of findings ("...; ...; ") without its last "; ".
std::string finished_report(const std::string& why);

/// What one call of a subject's entry point returned.
struct call_result {
  int status = 0;
  std::string error;  // its message when status != 0
};

/// Calls a subject's entry point (`call` writes its message into an error
/// buffer of err_cap bytes) under the per-call watchdog as `what`, with `work`
/// its size for the watchdog. Under call_isolation the call runs in its own
/// forked child, which sends back the status, the message and the bytes of
/// `outputs`, guards included; a child that dies is a failed call (status -1)
/// whose message says how it died.
call_result call_subject(const char* what, std::int64_t work, const std::function<int(char* err)>& call,
                         std::initializer_list<std::span<std::byte>> outputs);
/// One forward call: the subject's attend on p, whose O and LSE are ob's,
/// through call_subject; the case sizes it for the watchdog.
call_result call_attend(const attncheck_instance& inst, const attncheck_problem& p, output_buffers& ob, const attn_case& c);

}  // namespace attncheck::host
