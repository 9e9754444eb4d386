// Writing case files: a validated case, every storage bit pattern in hex.
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "attncheck/case_file.hpp"

namespace attncheck {

namespace {

using ojson = nlohmann::ordered_json;

// 8 hex digits per f32 element, 4 per f16/bf16, lowercase.
std::string to_hex(const tensor& t) {
  static constexpr char digits[] = "0123456789abcdef";
  const int width = 2 * static_cast<int>(size_of(t.type));
  std::string s(t.bits.size() * static_cast<std::size_t>(width), '0');
  std::size_t pos = 0;
  for (std::uint32_t b : t.bits)
    for (int d = width - 1; d >= 0; --d) s[pos++] = digits[(b >> (4 * d)) & 0xfu];
  return s;
}

// A per-head f32 vector as 8 hex digits an entry, as tensors store f32.
std::string f32_hex(const std::vector<float>& v) {
  tensor t = tensor::contiguous(dtype::f32, {1, 1, 1, static_cast<std::int64_t>(v.size())});
  for (std::size_t h = 0; h < v.size(); ++h) t.set(0, 0, 0, static_cast<std::int64_t>(h), static_cast<double>(v[h]));
  return to_hex(t);
}

ojson tensor_json(const tensor& t) {
  ojson j;
  j["shape"] = t.shape;
  j["stride"] = t.stride;
  j["offset"] = t.offset;
  j["bits"] = to_hex(t);
  return j;
}

}  // namespace

std::string format_case_file(const case_record& r) {
  const attn_case& c = r.c;
  validate(c);
  ojson j;
  j["format"] = "attncheck-case";
  j["version"] = case_file_version;
  j["line"] = to_line(c);
  if (!r.law.empty()) j["law"] = r.law;
  if (!r.subject.empty()) j["subject"] = r.subject;
  if (!r.note.empty()) j["note"] = r.note;
  j["b"] = c.b;
  j["hq"] = c.hq;
  j["hkv"] = c.hkv;
  j["lq"] = c.lq;
  j["lk"] = c.lk;
  j["d"] = c.d;
  j["dv"] = c.dv;
  // float -> double is exact and the JSON number prints in shortest
  // round-trip form, so the same float comes back.
  if (c.scale) j["scale"] = static_cast<double>(*c.scale);
  j["causal"] = c.causal;
  if (c.has_padding()) j["key_len"] = c.key_len;
  if (c.has_mask()) {
    j["mask_shape"] = c.mask_shape;
    std::string bits(c.mask.size(), '0');
    for (std::size_t i = 0; i < c.mask.size(); ++i) bits[i] = c.mask[i] ? '1' : '0';
    j["mask"] = bits;
  }
  const score_variants& w = c.variants;
  if (w.has_window()) j["window"] = {w.window_left, w.window_right};
  if (w.has_chunk()) j["chunk"] = w.chunk;
  if (w.has_softcap()) j["softcap"] = static_cast<double>(w.softcap);
  if (w.has_sinks()) {
    j["sinks"] = name(w.sinks);
    j["sink_logits"] = f32_hex(w.sink_logits);  // hex bits: -inf has no JSON number
  }
  if (w.has_alibi()) {
    j["alibi"] = name(w.alibi);
    if (w.alibi_max_bias != 8) j["alibi_max_bias"] = static_cast<double>(w.alibi_max_bias);
    j["alibi_slopes"] = f32_hex(w.alibi_slopes);
  }
  if (w.has_bias()) {
    j["bias_shape"] = w.bias_shape;
    j["bias_type"] = name(w.bias_type);
    j["bias_values"] = name(w.bias_values);
    j["bias"] = tensor_json(w.bias);
  }
  const input_form& f = c.form;
  if (f.paged()) {
    j["pages"] = f.page_size;
    j["page_order"] = name(f.page_order);
    j["spare_pages"] = f.spare_pages;
    j["table_tail"] = name(f.table_tail);
    j["shared_pages"] = f.shared_pages;
  }
  if (f.ragged) j["ragged"] = true;
  if (!f.q_len.empty()) j["qlen"] = f.q_len;
  const quantization& z = c.quant;
  for (const fp8_input& x : fp8_inputs)
    if (z.*x.type) j[x.type_key] = name(*(z.*x.type));
  for (const fp8_input& x : fp8_inputs)
    if (z.*x.scale != descale_granularity::none) j[x.scale_key] = name(z.*x.scale);
  if (z.any()) j["descales"] = name(z.descales);
  j["dtype"] = name(c.type);
  j["values"] = name(c.values);
  j["layout"] = name(c.layout);
  j["poison"] = name(c.poison);
  if (c.grad) j["grad"] = name(*c.grad);  // a backward case's dO recipe (drawn from seed)
  j["seed"] = c.seed;
  j["q"] = tensor_json(c.q);
  j["k"] = tensor_json(c.k);
  j["v"] = tensor_json(c.v);
  for (const fp8_input& x : fp8_inputs)
    if (z.*x.scale != descale_granularity::none) j[x.descale_key] = f32_hex(z.*x.descale);
  // One field per line, each value compact: shapes stay readable and a diff
  // of two saved cases lines up. replace: free text with invalid UTF-8 must
  // not make saving throw.
  std::string text = "{\n";
  bool first = true;
  for (const auto& item : j.items()) {
    text += first ? "  " : ",\n  ";
    first = false;
    text += ojson(item.key()).dump() + ": " + item.value().dump(-1, ' ', false, ojson::error_handler_t::replace);
  }
  return text + "\n}\n";
}

void write_case_file(const std::string& path, const case_record& r) {
  const std::string text = format_case_file(r);
  // Write beside the target and rename over it: readers see the old file or
  // the whole new one, never a torn write.
  static std::atomic<unsigned> counter{0};  // threads of one process saving to one path
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw input_error(path, std::string("cannot create ") + tmp + ": " + std::strerror(errno));
  const bool wrote =
      std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
  const int write_errno = errno;
  const bool closed = std::fclose(f) == 0;
  if (!wrote || !closed) {
    std::remove(tmp.c_str());
    throw input_error(path, std::string("cannot write ") + tmp + ": " + std::strerror(wrote ? errno : write_errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    throw input_error(path, std::string("cannot rename ") + tmp + " over it: " + std::strerror(e));
  }
}

}  // namespace attncheck
