#include "attncheck/subject_host.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

namespace attncheck {

namespace {

// Guard words on each side of every buffer handed to a subject: writes there
// are out of bounds; reads there meet NaN and show up in the result.
constexpr std::size_t guard_elems = 64;

std::uint32_t sentinel_bits(dtype t) {
  switch (t) {
    case dtype::f32: return 0x7fc0deadu;  // a quiet NaN with a payload nobody computes
    case dtype::f16: return 0x7e5au;
    case dtype::bf16: return 0x7fdau;
  }
  return 0x7fc0deadu;
}

// Packed bytes of a tensor's storage with guard elements on both sides; the
// tensor's element 0 starts at data().
struct guarded_bytes {
  std::vector<unsigned char> bytes;
  std::size_t width = 4;
  std::size_t payload = 0;  // elements

  guarded_bytes(const tensor& t) : width(size_of(t.type)), payload(t.bits.size()) {
    bytes.resize((payload + 2 * guard_elems) * width);
    const std::uint32_t s = sentinel_bits(t.type);
    for (std::size_t i = 0; i < payload + 2 * guard_elems; ++i) put(i, s);
    const auto packed = t.packed_storage();
    if (!packed.empty()) std::memcpy(bytes.data() + guard_elems * width, packed.data(), packed.size());
  }
  void put(std::size_t i, std::uint32_t v) {
    if (width == 4) {
      std::memcpy(&bytes[i * 4], &v, 4);
    } else {
      const auto h = static_cast<std::uint16_t>(v);
      std::memcpy(&bytes[i * 2], &h, 2);
    }
  }
  std::uint32_t get(std::size_t i) const {
    if (width == 4) {
      std::uint32_t v;
      std::memcpy(&v, &bytes[i * 4], 4);
      return v;
    }
    std::uint16_t h;
    std::memcpy(&h, &bytes[i * 2], 2);
    return h;
  }
  unsigned char* data() { return bytes.data() + guard_elems * width; }
};

attncheck_dtype to_abi(dtype t) {
  switch (t) {
    case dtype::f32: return ATTNCHECK_F32;
    case dtype::f16: return ATTNCHECK_F16;
    case dtype::bf16: return ATTNCHECK_BF16;
  }
  return ATTNCHECK_F32;
}

attncheck_tensor view_of(guarded_bytes& g, const tensor& t) {
  attncheck_tensor v{};
  v.data = g.data() + static_cast<std::size_t>(t.offset) * g.width;
  for (int a = 0; a < 4; ++a) v.stride[a] = t.stride[a];
  return v;
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

// The output tensor handed to the subject: the case's layout, every element
// (view and gaps) set to the sentinel so unwritten outputs and stray writes show.
struct output_buffers {
  tensor o;
  guarded_bytes og;
  std::vector<float> lse;  // guard + (B,Hq,Lq) + guard
  std::size_t lse_n = 0;

  output_buffers(const attn_case& c, std::int64_t lq, bool want_lse)
      : o(make_output_rows(c, lq)), og(sentinel_fill(o)) {
    if (want_lse) {
      lse_n = static_cast<std::size_t>(c.b * c.hq * lq);
      lse.assign(lse_n + 2 * guard_elems, std::bit_cast<float>(sentinel_bits(dtype::f32)));
    }
  }
  static tensor make_output_rows(const attn_case& c, std::int64_t lq) {
    attn_case shaped = c;
    shaped.lq = lq;
    return make_output(shaped);
  }
  static tensor sentinel_fill(tensor& t) {
    std::fill(t.bits.begin(), t.bits.end(), sentinel_bits(t.type));
    return t;
  }
  float* lse_data() { return lse.empty() ? nullptr : lse.data() + guard_elems; }

  // Copies the result back into subject_output and checks the guards.
  void collect(subject_output& out, std::int64_t lq, std::int64_t hq, std::int64_t b) {
    out.o = o;
    std::ostringstream why;
    const std::uint32_t s = sentinel_bits(o.type);
    const auto inside = covered(o);
    for (std::size_t i = 0; i < og.payload; ++i) {
      const std::uint32_t v = og.get(guard_elems + i);
      out.o.bits[i] = v;
      if (!inside[i] && v != s) {
        out.guard_violated = true;
        why << "wrote the gap element " << i << " of O's storage; ";
        break;
      }
    }
    for (std::size_t i = 0; i < guard_elems; ++i) {
      if (og.get(i) != s) {
        out.guard_violated = true;
        why << "wrote " << (guard_elems - i) << " elements before O; ";
        break;
      }
      if (og.get(guard_elems + og.payload + i) != s) {
        out.guard_violated = true;
        why << "wrote past the end of O (element " << og.payload + i << "); ";
        break;
      }
    }
    if (!lse.empty()) {
      const auto fs = std::bit_cast<std::uint32_t>(lse[0]);
      for (std::size_t i = 0; i < guard_elems; ++i) {
        if (std::bit_cast<std::uint32_t>(lse[i]) != fs || std::bit_cast<std::uint32_t>(lse[guard_elems + lse_n + i]) != fs) {
          out.guard_violated = true;
          why << "wrote outside LSE; ";
          break;
        }
      }
      out.lse.assign(lse.begin() + guard_elems, lse.begin() + static_cast<std::ptrdiff_t>(guard_elems + lse_n));
    }
    (void)lq, (void)hq, (void)b;
    out.guard_report = why.str();
  }
};

void fill_problem(attncheck_problem& p, const attn_case& c, int threads) {
  p.struct_size = sizeof(attncheck_problem);
  p.dtype = to_abi(c.type);
  p.b = c.b, p.hq = c.hq, p.hkv = c.hkv, p.lq = c.lq, p.lk = c.lk, p.d = c.d, p.dv = c.dv;
  p.scale = c.effective_scale();
  p.causal = c.causal ? 1 : 0;
  p.threads = threads;
}

void set_output(attncheck_problem& p, output_buffers& ob) {
  p.o = ob.og.data() + static_cast<std::size_t>(ob.o.offset) * ob.og.width;
  for (int a = 0; a < 4; ++a) p.o_stride[a] = ob.o.stride[a];
  p.lse = ob.lse_data();
  p.lse_stride[0] = p.hq * p.lq;
  p.lse_stride[1] = p.lq;
  p.lse_stride[2] = 1;
}

constexpr std::size_t err_cap = 512;

}  // namespace

subject::subject(const attncheck_subject* desc, void* handle, std::string spec)
    : desc_(desc), handle_(handle), spec_(std::move(spec)) {}

subject::~subject() {
  if (handle_) dlclose(handle_);
}

std::shared_ptr<subject> subject::wrap(const attncheck_subject* desc, std::string spec) {
  if (!desc) throw input_error("subject", spec + " returned no descriptor");
  if (desc->abi_version != ATTNCHECK_SUBJECT_ABI_VERSION)
    throw input_error("subject", spec + " has ABI version " + std::to_string(desc->abi_version) +
                                     "; this attncheck takes version " + std::to_string(ATTNCHECK_SUBJECT_ABI_VERSION));
  if (!desc->attend) throw input_error("subject", spec + " has no attend entry point");
  if ((desc->features & ATTNCHECK_FEATURE_CACHE) &&
      !(desc->cache_create && desc->cache_append && desc->cache_attend && desc->cache_free))
    throw input_error("subject", spec + " declares a cache but lacks cache_* entry points");
  if (!(desc->compute_unit_roundoff > 0 && desc->compute_unit_roundoff < 0.5) || !(desc->exp_ulps >= 0))
    throw input_error("subject", spec + " declares compute_unit_roundoff or exp_ulps out of range");
  return std::shared_ptr<subject>(new subject(desc, nullptr, std::move(spec)));
}

std::shared_ptr<subject> subject::load(const std::string& spec) {
  if (spec == "builtin") {
    configure_builtin(0, 0, 0);
    return wrap(builtin_subject(), spec);
  }
  if (spec.rfind("builtin:", 0) == 0) {
    // builtin:q_tile=2,k_tile=3,split_keys=6 -- tiny tiles make tile edges show on small shapes.
    std::int64_t t[3] = {0, 0, 0};
    const char* names[3] = {"q_tile", "k_tile", "split_keys"};
    std::string rest = spec.substr(8);
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      const std::string item = rest.substr(0, comma);
      rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
      const auto eq = item.find('=');
      int which = -1;
      for (int i = 0; i < 3; ++i)
        if (eq != std::string::npos && item.substr(0, eq) == names[i]) which = i;
      std::int64_t v = -1;
      if (which >= 0) {
        const std::string num = item.substr(eq + 1);
        auto [ptr, ec] = std::from_chars(num.data(), num.data() + num.size(), v);
        if (ec != std::errc() || ptr != num.data() + num.size()) v = -1;
      }
      if (which < 0 || v < 1 || v > 4096)
        throw input_error("subject", "'" + item + "' in '" + spec + "': expected q_tile=N, k_tile=N or split_keys=N with N in [1, 4096]");
      t[which] = v;
    }
    configure_builtin(t[0], t[1], t[2]);
    return wrap(builtin_subject(), spec);
  }
  if (spec == "naive") return wrap(naive_subject(), spec);
  void* h = dlopen(spec.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    throw input_error("subject", "cannot load '" + spec + "': " + (e ? e : "unknown error") +
                                     " (expected builtin, naive or a path to a plugin .so)");
  }
  auto entry = reinterpret_cast<attncheck_subject_entry>(dlsym(h, ATTNCHECK_SUBJECT_ENTRY));
  if (!entry) {
    dlclose(h);
    throw input_error("subject", spec + " does not export " ATTNCHECK_SUBJECT_ENTRY);
  }
  try {
    auto s = wrap(entry(), spec);
    s->handle_ = h;
    return s;
  } catch (...) {
    dlclose(h);
    throw;
  }
}

std::string subject::cannot_take(const attn_case& c, bool want_lse) const {
  if (!(desc_->dtypes & (1u << static_cast<unsigned>(to_abi(c.type))))) return std::string("no ") + std::string(attncheck::name(c.type));
  if (c.causal && !has(ATTNCHECK_FEATURE_CAUSAL)) return "no causal mask";
  if (c.has_padding() && !has(ATTNCHECK_FEATURE_PADDING)) return "no key padding";
  if (c.has_mask() && !has(ATTNCHECK_FEATURE_MASK)) return "no boolean mask";
  if (want_lse && !has_lse()) return "no LSE";
  return {};
}

std::int64_t subject::key_blocks(const attn_case& c) const {
  if (!desc_->key_blocks) return 1;
  attncheck_problem p{};
  fill_problem(p, c, 0);
  return std::max<std::int64_t>(1, desc_->key_blocks(&p));
}

subject_output subject::attend(const attn_case& c, int threads) const {
  subject_output out;
  guarded_bytes qg(c.q), kg(c.k), vg(c.v);
  output_buffers ob(c, c.lq, has_lse());
  attncheck_problem p{};
  fill_problem(p, c, threads);
  p.q = view_of(qg, c.q);
  p.k = view_of(kg, c.k);
  p.v = view_of(vg, c.v);
  std::vector<std::int64_t> key_len = c.key_len;
  if (c.has_padding()) p.key_len = key_len.data();
  if (c.has_mask()) {
    p.mask = c.mask.data();
    const auto& ms = c.mask_shape;
    const std::int64_t s3 = 1, s2 = ms[3], s1 = ms[2] * ms[3], s0 = ms[1] * ms[2] * ms[3];
    p.mask_stride[0] = ms[0] == 1 ? 0 : s0;
    p.mask_stride[1] = ms[1] == 1 ? 0 : s1;
    p.mask_stride[2] = ms[2] == 1 ? 0 : s2;
    p.mask_stride[3] = ms[3] == 1 ? 0 : s3;
  }
  set_output(p, ob);
  char err[err_cap] = {0};
  out.status = desc_->attend(&p, err, err_cap);
  err[err_cap - 1] = 0;
  if (out.status != 0) out.error = err;
  ob.collect(out, c.lq, c.hq, c.b);
  return out;
}

subject_output subject::attend_cached(const attn_case& c, const cache_plan& plan, int threads) const {
  subject_output out;
  if (!has(ATTNCHECK_FEATURE_CACHE)) {
    out.status = -1;
    out.error = "subject has no cache";
    return out;
  }
  std::int64_t total_lq = 0;
  for (const auto& s : plan.steps) total_lq += s.lq;
  attn_case stacked = c;
  stacked.lq = total_lq;
  out.o = make_output(stacked);
  const bool want_lse = has_lse();
  if (want_lse) out.lse.assign(static_cast<std::size_t>(c.b * c.hq * total_lq), 0.0f);

  attncheck_cache_config cfg{};
  cfg.struct_size = sizeof cfg;
  cfg.dtype = to_abi(c.type);
  cfg.b = c.b, cfg.hkv = c.hkv, cfg.d = c.d, cfg.dv = c.dv;
  cfg.capacity = c.lk;
  cfg.page_size = plan.page_size;
  cfg.page_order = plan.page_order.empty() ? nullptr : plan.page_order.data();
  cfg.page_count = static_cast<std::int64_t>(plan.page_order.size());
  char err[err_cap] = {0};
  void* cache = desc_->cache_create(&cfg, err, err_cap);
  if (!cache) {
    out.status = -1;
    err[err_cap - 1] = 0;
    out.error = std::string("cache_create failed: ") + err;
    return out;
  }
  std::vector<std::int64_t> filled(static_cast<std::size_t>(c.b), 0);
  std::int64_t row0 = 0;
  for (const auto& step : plan.steps) {
    // New keys/values of this step, (B, c, Hkv, D) dense, copied from the case.
    const std::int64_t cmax = *std::max_element(step.append.begin(), step.append.end());
    const std::int64_t cn = std::max<std::int64_t>(cmax, 1);
    tensor kn = tensor::contiguous(c.type, {c.b, cn, c.hkv, c.d});
    tensor vn = tensor::contiguous(c.type, {c.b, cn, c.hkv, c.dv});
    for (std::int64_t bi = 0; bi < c.b; ++bi)
      for (std::int64_t t = 0; t < step.append[static_cast<std::size_t>(bi)]; ++t)
        for (std::int64_t g = 0; g < c.hkv; ++g) {
          const std::int64_t j = filled[static_cast<std::size_t>(bi)] + t;
          for (std::int64_t x = 0; x < c.d; ++x) kn.set_bits(bi, t, g, x, c.k.bits_at(bi, j, g, x));
          for (std::int64_t x = 0; x < c.dv; ++x) vn.set_bits(bi, t, g, x, c.v.bits_at(bi, j, g, x));
        }
    guarded_bytes kg(kn), vg(vn);
    attncheck_tensor kv = view_of(kg, kn), vv = view_of(vg, vn);
    if (desc_->cache_append(cache, &kv, &vv, cn, step.append.data(), err, err_cap) != 0) {
      out.status = -1;
      err[err_cap - 1] = 0;
      out.error = std::string("cache_append failed: ") + err;
      break;
    }
    for (std::int64_t bi = 0; bi < c.b; ++bi) filled[static_cast<std::size_t>(bi)] += step.append[static_cast<std::size_t>(bi)];
    // Queries: the last step.lq tokens of each sequence (rows that precede
    // the sequence start get zeros; they see nothing).
    tensor qn = tensor::contiguous(c.type, {c.b, step.lq, c.hq, c.d});
    for (std::int64_t bi = 0; bi < c.b; ++bi)
      for (std::int64_t i = 0; i < step.lq; ++i) {
        const std::int64_t pos = filled[static_cast<std::size_t>(bi)] - step.lq + i;
        // The case's Q rows are bottom-right aligned: row pos - n[b] + Lq holds position pos.
        const std::int64_t row = pos - c.valid_keys(bi) + c.lq;
        if (pos < 0 || row < 0 || row >= c.lq) continue;
        for (std::int64_t h = 0; h < c.hq; ++h)
          for (std::int64_t x = 0; x < c.d; ++x) qn.set_bits(bi, i, h, x, c.q.bits_at(bi, row, h, x));
      }
    guarded_bytes qg(qn);
    attn_case stepcase = c;
    stepcase.lq = step.lq;
    output_buffers ob(stepcase, step.lq, want_lse);
    attncheck_problem p{};
    fill_problem(p, stepcase, threads);
    p.q = view_of(qg, qn);
    set_output(p, ob);
    const int rc = desc_->cache_attend(cache, &p, err, err_cap);
    subject_output part;
    ob.collect(part, step.lq, c.hq, c.b);
    if (rc != 0 || part.guard_violated) {
      out.status = rc;
      err[err_cap - 1] = 0;
      out.error = rc ? std::string("cache_attend failed: ") + err : std::string();
      out.guard_violated = part.guard_violated;
      out.guard_report = part.guard_report;
      break;
    }
    for (std::int64_t bi = 0; bi < c.b; ++bi)
      for (std::int64_t i = 0; i < step.lq; ++i)
        for (std::int64_t h = 0; h < c.hq; ++h) {
          for (std::int64_t e = 0; e < c.dv; ++e) out.o.set_bits(bi, row0 + i, h, e, part.o.bits_at(bi, i, h, e));
          if (want_lse)
            out.lse[static_cast<std::size_t>((bi * c.hq + h) * total_lq + row0 + i)] =
                part.lse[static_cast<std::size_t>((bi * c.hq + h) * step.lq + i)];
        }
    row0 += step.lq;
  }
  desc_->cache_free(cache);
  return out;
}

}  // namespace attncheck
