// The guarded-buffer core (guarded.hpp): poison, guard bands, write maps, the
// output buffers of a forward call and the call of a subject's entry point.
#include "guarded.hpp"

#include <signal.h>
#include <sys/prctl.h>

#include <bit>
#include <cstdio>
#include <cstring>

#include "attncheck/isolate.hpp"

namespace attncheck::host {

namespace {

// "k of the n guard elements, storage elements a..b": where a subject wrote
// outside a buffer, from the written guard elements' storage offsets.
std::string write_map(const std::vector<std::int64_t>& written, std::size_t guard) {
  std::ostringstream m;
  m << written.size() << " of the " << guard << " guard elements, storage element" << (written.size() > 1 ? "s " : " ")
    << written.front();
  if (written.size() > 1) m << ".." << written.back();
  return m.str();
}

// Marks which storage elements of t its view covers.
std::vector<bool> covered(const tensor& t) {
  std::vector<bool> in(t.bits.size(), false);
  for (std::int64_t a = 0; a < t.shape[0]; ++a)
    for (std::int64_t b = 0; b < t.shape[1]; ++b)
      for (std::int64_t c = 0; c < t.shape[2]; ++c)
        for (std::int64_t d = 0; d < t.shape[3]; ++d) in[static_cast<std::size_t>(t.index(a, b, c, d))] = true;
  return in;
}

}  // namespace

// A quiet NaN with a payload nobody computes.
std::uint32_t sentinel_bits(dtype t) { return per_dtype(t, 0x7fc0deadu, 0x7e5au, 0x7fdau, 0x7fu, 0x7fu); }

tensor poisoned(tensor t) {
  std::fill(t.bits.begin(), t.bits.end(), sentinel_bits(t.type));
  return t;
}

bool unwritten(const tensor& t) {
  const std::uint32_t s = sentinel_bits(t.type);
  return std::all_of(t.bits.begin(), t.bits.end(), [s](std::uint32_t v) { return v == s; });
}

bool unwritten(const std::vector<float>& values) {
  const std::uint32_t s = sentinel_bits(dtype::f32);
  return std::all_of(values.begin(), values.end(), [s](float v) { return std::bit_cast<std::uint32_t>(v) == s; });
}

std::vector<float> guarded_floats(std::size_t n) {
  return std::vector<float>(guard_elems + n + tail_guard(n), std::bit_cast<float>(sentinel_bits(dtype::f32)));
}

guarded_bytes::guarded_bytes(const tensor& t) : width(size_of(t.type)), payload(t.bits.size()) {
  bytes.resize(elements() * width);
  const std::uint32_t s = sentinel_bits(t.type);
  for (std::size_t i = 0; i < elements(); ++i) put(i, s);
  const auto packed = t.packed_storage();
  if (!packed.empty()) std::memcpy(bytes.data() + guard_elems * width, packed.data(), packed.size());
}

void guarded_bytes::put(std::size_t i, std::uint32_t v) {
  if (width == 4) {
    std::memcpy(&bytes[i * 4], &v, 4);
  } else if (width == 1) {
    bytes[i] = static_cast<unsigned char>(v);
  } else {
    const auto h = static_cast<std::uint16_t>(v);
    std::memcpy(&bytes[i * 2], &h, 2);
  }
}

std::uint32_t guarded_bytes::get(std::size_t i) const {
  if (width == 4) {
    std::uint32_t v;
    std::memcpy(&v, &bytes[i * 4], 4);
    return v;
  }
  if (width == 1) return bytes[i];
  std::uint16_t h;
  std::memcpy(&h, &bytes[i * 2], 2);
  return h;
}

attncheck_tensor view_of(guarded_bytes& g, const tensor& t) {
  attncheck_tensor v{};
  v.data = g.data() + static_cast<std::size_t>(t.offset) * g.width;
  for (int a = 0; a < 4; ++a) v.stride[a] = t.stride[a];
  return v;
}

attn_case header_of(const attn_case& c, std::int64_t lq) {
  attn_case h;
  h.b = c.b, h.hq = c.hq, h.hkv = c.hkv, h.lq = lq, h.lk = c.lk, h.d = c.d, h.dv = c.dv;
  h.scale = c.scale;
  h.causal = c.causal;
  h.type = c.type;
  h.layout = c.layout;
  return h;
}

bool guarded_output::collect(std::ostringstream& why) {
  bool gap = false;
  const std::uint32_t s = sentinel_bits(t.type);
  const auto inside = covered(t);
  for (std::size_t i = 0; i < g.payload; ++i) {
    const std::uint32_t v = g.get(guard_elems + i);
    t.bits[i] = v;
    if (!inside[i] && v != s && !gap) {
      gap = true;
      why << "wrote the gap element " << i << " of " << label << "'s storage; ";
    }
  }
  // The write map outside the buffer: which guard elements, before and after, changed.
  std::vector<std::int64_t> before, after;
  for (std::size_t i = 0; i < guard_elems; ++i)
    if (g.get(i) != s) before.push_back(static_cast<std::int64_t>(i) - static_cast<std::int64_t>(guard_elems));
  for (std::size_t i = 0; i < g.tail(); ++i)
    if (g.get(guard_elems + g.payload + i) != s) after.push_back(static_cast<std::int64_t>(g.payload + i));
  if (!before.empty()) why << "wrote before the start of " << label << ": " << write_map(before, guard_elems) << "; ";
  if (!after.empty())
    why << "wrote past the end of " << label << " (" << g.payload << " storage element" << (g.payload == 1 ? "" : "s")
        << "): " << write_map(after, g.tail())
        << (after.back() >= static_cast<std::int64_t>(2 * g.payload) - 1 && t.type != dtype::f32
                ? " (as far as 4-byte elements would reach: a subject writing f32 into " + std::string(name(t.type)) + " " +
                      label + "?)"
                : "")
        << "; ";
  return gap || !before.empty() || !after.empty();
}

output_buffers::output_buffers(const attn_case& c, std::int64_t lq_, bool want_lse, bool lse_strided)
    : o(make_output(header_of(c, lq_)), "O"), b(c.b), hq(c.hq), lq(lq_) {
  if (want_lse) {
    // Dense (B, Hq, Lq), or (B, Lq, Hq) with a gap after every query
    // position and every batch element (non-dense strides, as a kernel
    // writing into a (B, Lq, Hq) slice of a bigger buffer sees them).
    lse_stride =
        lse_strided ? std::array<std::int64_t, 3>{lq * (hq + 1) + 2, 1, hq + 1} : std::array<std::int64_t, 3>{hq * lq, lq, 1};
    lse_n = static_cast<std::size_t>(b * lse_stride[0]);
    lse = guarded_floats(lse_n);
  }
}

void output_buffers::hand_over(attncheck_problem& p) {
  p.o = o.view();
  for (int a = 0; a < 4; ++a) p.o_stride[a] = o.t.stride[a];
  p.lse = lse_data();
  for (int a = 0; a < 3; ++a) p.lse_stride[a] = lse_stride[a];
}

void output_buffers::collect(subject_output& out) {
  std::ostringstream why;
  out.guard_violated = o.collect(why);
  out.o = o.t;
  if (!lse.empty()) {
    const auto fs = sentinel_bits(dtype::f32);
    std::vector<bool> in(lse_n, false);
    for (std::int64_t bi = 0; bi < b; ++bi)
      for (std::int64_t h = 0; h < hq; ++h)
        for (std::int64_t i = 0; i < lq; ++i) in[lse_index(bi, h, i)] = true;
    std::vector<std::int64_t> stray;
    for (std::size_t i = 0; i < lse.size(); ++i) {
      const bool view = i >= guard_elems && i < guard_elems + lse_n && in[i - guard_elems];
      if (!view && std::bit_cast<std::uint32_t>(lse[i]) != fs)
        stray.push_back(static_cast<std::int64_t>(i) - static_cast<std::int64_t>(guard_elems));
    }
    if (!stray.empty()) {
      out.guard_violated = true;
      why << "wrote outside LSE's view (" << lse_n << " storage elements, strides " << lse_stride[0] << "," << lse_stride[1]
          << "," << lse_stride[2] << "): " << stray.size() << " element" << (stray.size() > 1 ? "s" : "") << ", storage element"
          << (stray.size() > 1 ? "s " : " ") << stray.front();
      if (stray.size() > 1) why << ".." << stray.back();
      why << "; ";
    }
    out.lse.assign(static_cast<std::size_t>(b * hq * lq), 0.0f);
    for (std::int64_t bi = 0; bi < b; ++bi)
      for (std::int64_t h = 0; h < hq; ++h)
        for (std::int64_t i = 0; i < lq; ++i)
          out.lse[static_cast<std::size_t>((bi * hq + h) * lq + i)] = lse[guard_elems + lse_index(bi, h, i)];
  }
  out.guard_report = finished_report(why.str());
}

std::string finished_report(const std::string& why) { return why.size() >= 2 ? why.substr(0, why.size() - 2) : why; }

call_result call_subject(const char* what, std::int64_t work, const std::function<int(char* err)>& call,
                         std::initializer_list<std::span<std::byte>> outputs) {
  call_result r;
  char err[err_cap] = {0};
  {
    // The per-call watchdog times the subject's code alone, not the host's copies.
    const watched_call watch(what, work);
    if (call_isolation()) {
      std::size_t total = 0;
      for (const auto& o : outputs) total += o.size();
      const child_outcome co = run_isolated(
          [&] {
            prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the law's child
            const int rc = call(err);
            std::string payload(reinterpret_cast<const char*>(&rc), sizeof rc);
            payload.append(err, err_cap);
            for (const auto& o : outputs) payload.append(reinterpret_cast<const char*>(o.data()), o.size());
            return payload;
          },
          86400);  // the law's own time limit and the watchdog stop a hang
      if (!co.completed || co.payload.size() != sizeof(int) + err_cap + total) {
        std::snprintf(err, err_cap, "the call's own process was %s", co.describe().c_str());
        r.status = -1;
      } else {
        const char* at = co.payload.data();
        std::memcpy(&r.status, at, sizeof r.status);
        std::memcpy(err, at + sizeof r.status, err_cap);
        at += sizeof r.status + err_cap;
        for (const auto& o : outputs) {
          if (!o.empty()) std::memcpy(o.data(), at, o.size());
          at += o.size();
        }
      }
    } else {
      r.status = call(err);
    }
  }
  err[err_cap - 1] = 0;
  if (r.status != 0) r.error = err;
  return r;
}

call_result call_attend(const attncheck_instance& inst, const attncheck_problem& p, output_buffers& ob, const attn_case& c) {
  return call_subject("attend", c.b * c.hq * c.lq * c.lk * (c.d + c.dv),
                      [&](char* err) { return inst.attend(inst.state, &p, err, err_cap); }, {ob.o.bytes(), ob.lse_bytes()});
}

}  // namespace attncheck::host
