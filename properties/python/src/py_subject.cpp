#include "py_subject.hpp"

#include <pybind11/numpy.h>

#include <cstddef>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace py = pybind11;

namespace attncheck::python {

namespace {

struct py_state {
  attncheck_instance desc{};  // first: &desc is the instance
  py::object subject;
  std::string name;
  attncheck_profile profile{};          // desc.profile points here when the subject declares one
  attncheck_conventions conventions{};  // desc.conventions likewise
  attncheck_limits limits{};            // desc.limits likewise
};

py_state* of(void* state) { return static_cast<py_state*>(state); }

std::size_t width_of(attncheck_dtype t) { return t == ATTNCHECK_F32 ? 4 : (t == ATTNCHECK_E4M3 || t == ATTNCHECK_E5M2) ? 1 : 2; }

py::dtype numpy_storage(attncheck_dtype t) {
  // numpy has no bfloat16: bf16 travels as its bits (docs/python.md).
  switch (t) {
    case ATTNCHECK_F32: return py::dtype("float32");
    case ATTNCHECK_F16: return py::dtype("float16");
    case ATTNCHECK_BF16: return py::dtype("uint16");
    case ATTNCHECK_E4M3:  // fp8 travels as its bits too (docs/abi.md "Python")
    case ATTNCHECK_E5M2: return py::dtype("uint8");
  }
  return py::dtype("float32");
}

// A zero-copy numpy view of host memory with the host's strides (elements);
// inputs are read-only. The capsule only marks the array as not owning its data.
py::array view(const void* data, const py::dtype& dt, std::size_t width, const std::vector<py::ssize_t>& shape,
               const std::int64_t* stride, bool writeable) {
  static int anchor = 0;
  std::vector<py::ssize_t> bytes(shape.size());
  for (std::size_t a = 0; a < shape.size(); ++a)
    bytes[a] = static_cast<py::ssize_t>(stride[a] * static_cast<std::int64_t>(width));
  py::capsule base(data ? const_cast<void*>(data) : static_cast<void*>(&anchor), [](void*) {});
  py::array a(dt, shape, bytes, data, base);
  if (!writeable) a.attr("setflags")(py::arg("write") = false);
  return a;
}

py::array tensor_view(const attncheck_tensor& t, attncheck_dtype dt, std::int64_t n0, std::int64_t n1, std::int64_t n2,
                      std::int64_t n3) {
  return view(t.data, numpy_storage(dt), width_of(dt), {n0, n1, n2, n3}, t.stride, false);
}

py::object output_view(const attncheck_problem& p, attncheck_dtype dt) {
  return view(p.o, numpy_storage(dt), width_of(dt), {p.b, p.lq, p.hq, p.dv}, p.o_stride, true);
}
py::object output_view(const attncheck_problem& p) { return output_view(p, p.dtype); }

py::object lse_view(const attncheck_problem& p) {
  if (!p.lse) return py::none();
  return view(p.lse, py::dtype("float32"), 4, {p.b, p.hq, p.lq}, p.lse_stride, true);
}

void report(char* err, std::size_t len, const std::string& what) {
  if (err && len) std::snprintf(err, len, "%s", what.c_str());
}

// Runs one entry point with the GIL held; a Python exception becomes the
// subject's error message (the law then fails naming it and the case).
template <class F>
int guarded(char* err, std::size_t len, F&& body) {
  py::gil_scoped_acquire gil;
  try {
    body();
    return 0;
  } catch (py::error_already_set& e) {
    // attncheck.Declined: the case is outside what the subject computes.
    if (e.matches(py::module_::import("attncheck").attr("Declined"))) {
      report(err, len, py::str(e.value()).cast<std::string>());
      return ATTNCHECK_DECLINED;
    }
    report(err, len, describe(e));
  } catch (const std::exception& e) {
    report(err, len, std::string("python bridge: ") + e.what());
  }
  return 1;
}

std::int64_t key_blocks(void* st, const attncheck_problem* p) {
  py::gil_scoped_acquire gil;
  try {
    return of(st)->subject.attr("key_blocks")(p->lk).cast<std::int64_t>();
  } catch (py::error_already_set& e) {
    std::fprintf(stderr, "attncheck: key_blocks of %s failed (%s); using 1\n", of(st)->name.c_str(), describe(e).c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attncheck: key_blocks of %s failed (%s); using 1\n", of(st)->name.c_str(), e.what());
  }
  return 1;
}

// The contract 1.1 variants the problem uses, as a dict holding only those
// parts (attncheck._bridge.Subject.attend turns them into keywords), or None:
// window (left, right), chunk, softcap, sinks and alibi (float32 copies of
// Hq values), bias (a read-only view with the host's strides, 0 broadcasting).
py::object variants_of(const attncheck_problem& p) {
  const bool holds = p.struct_size >= offsetof(attncheck_problem, variants) + sizeof p.variants;
  if (!holds || !p.variants) return py::none();
  const attncheck_variants& v = *p.variants;
  py::dict out;
  if (v.window_left >= 0 || v.window_right >= 0) out["window"] = py::make_tuple(v.window_left, v.window_right);
  if (v.chunk > 0) out["chunk"] = v.chunk;
  if (v.softcap != 0) out["softcap"] = static_cast<double>(v.softcap);
  if (v.sinks) out["sinks"] = py::array_t<float>(p.hq, v.sinks);
  if (v.alibi) out["alibi"] = py::array_t<float>(p.hq, v.alibi);
  if (v.bias)
    out["bias"] =
        view(v.bias, numpy_storage(v.bias_dtype), width_of(v.bias_dtype), {p.b, p.hq, p.lq, p.lk}, v.bias_stride, false);
  if (out.empty()) return py::none();
  return out;
}

// The problem's fp8 storage (attncheck_quant), where its struct_size covers it.
const attncheck_quant* quant_of(const attncheck_problem& p) {
  const bool holds = p.struct_size >= offsetof(attncheck_problem, quant) + sizeof p.quant;
  return holds ? p.quant : nullptr;
}

// fp8 storage as a dict (docs/python.md "fp8 inputs"), or None: q_dtype,
// k_dtype, v_dtype, o_dtype (ABI codes) and each descale present (float32
// copies: one value per tensor, or (B, Hq) for Q and (B, Hkv) for K and V per head).
py::object quant_dict(const attncheck_problem& p) {
  const attncheck_quant* z = quant_of(p);
  if (!z) return py::none();
  py::dict out;
  out["q_dtype"] = z->q_dtype, out["k_dtype"] = z->k_dtype, out["v_dtype"] = z->v_dtype, out["o_dtype"] = z->o_dtype;
  const auto descale = [&](const char* key, const float* d, std::uint32_t g, std::int64_t heads) {
    if (!d || g == ATTNCHECK_DESCALE_NONE) return;
    if (g == ATTNCHECK_DESCALE_TENSOR)
      out[key] = py::array_t<float>(std::vector<py::ssize_t>{1}, d);
    else
      out[key] = py::array_t<float>(std::vector<py::ssize_t>{p.b, heads}, d);
  };
  descale("q_descale", z->q_descale, z->q_granularity, p.hq);
  descale("k_descale", z->k_descale, z->k_granularity, p.hkv);
  descale("v_descale", z->v_descale, z->v_granularity, p.hkv);
  return out;
}

// The problem's paged and ragged parts, where its struct_size covers them.
const attncheck_paged_kv* paged_of(const attncheck_problem& p) {
  const bool holds = p.struct_size >= offsetof(attncheck_problem, paged) + sizeof p.paged;
  return holds ? p.paged : nullptr;
}

const attncheck_ragged* ragged_of(const attncheck_problem& p) {
  const bool holds = p.struct_size >= offsetof(attncheck_problem, ragged) + sizeof p.ragged;
  return holds ? p.ragged : nullptr;
}

// The contract 1.2 input forms the problem uses (docs/python.md "Paged K/V
// and ragged batches"), or None: k_pages and v_pages (read-only views of the
// arenas, (num_pages, P, Hkv, D) and (num_pages, P, Hkv, Dv), the host's
// strides), block_table (a read-only int32 view, (B, max_pages), its row
// stride), page_size; cu_seqlens_q and cu_seqlens_k (int64 copies of B + 1
// offsets; cu_seqlens_k None with paged K/V).
py::object form_of(const attncheck_problem& p) {
  const attncheck_paged_kv* pk = paged_of(p);
  const attncheck_ragged* rg = ragged_of(p);
  if (!pk && !rg) return py::none();
  py::dict out;
  if (pk) {
    out["k_pages"] = view(pk->k_pages.data, numpy_storage(p.dtype), width_of(p.dtype), {pk->num_pages, pk->page_size, p.hkv, p.d},
                          pk->k_pages.stride, false);
    out["v_pages"] = view(pk->v_pages.data, numpy_storage(p.dtype), width_of(p.dtype),
                          {pk->num_pages, pk->page_size, p.hkv, p.dv}, pk->v_pages.stride, false);
    const std::int64_t table_stride[2] = {pk->block_table_stride, 1};
    out["block_table"] = view(pk->block_table, py::dtype("int32"), 4, {p.b, pk->max_pages}, table_stride, false);
    out["page_size"] = pk->page_size;
  }
  if (rg) {
    out["cu_seqlens_q"] = py::array_t<std::int64_t>(p.b + 1, rg->cu_seqlens_q);
    out["cu_seqlens_k"] = rg->cu_seqlens_k ? py::object(py::array_t<std::int64_t>(p.b + 1, rg->cu_seqlens_k)) : py::none();
  }
  return out;
}

int attend(void* st, const attncheck_problem* p, char* err, std::size_t len) {
  return guarded(err, len, [&] {
    py::object key_len = py::none(), mask = py::none();
    if (p->key_len) key_len = py::array_t<std::int64_t>(p->b, p->key_len);
    if (p->mask) mask = view(p->mask, py::dtype("bool"), 1, {p->b, p->hq, p->lq, p->lk}, p->mask_stride, false);
    const attncheck_paged_kv* pk = paged_of(*p);
    const attncheck_ragged* rg = ragged_of(*p);
    // O's type: the problem's, or with fp8 inputs the quant's o_dtype.
    const attncheck_dtype out_type = quant_of(*p) ? static_cast<attncheck_dtype>(quant_of(*p)->o_dtype) : p->dtype;
    py::object q, k = py::none(), v = py::none(), o, lse = py::none();
    if (rg) {
      // Packed: Q and O (total_q, Hq, *) along stride[1..3], K and V (total_k, Hkv, *)
      // unless paged, LSE (Hq, total_q) along lse_stride[1..2].
      q = view(p->q.data, numpy_storage(p->dtype), width_of(p->dtype), {rg->total_q, p->hq, p->d}, p->q.stride + 1, false);
      if (!pk) {
        k = view(p->k.data, numpy_storage(p->dtype), width_of(p->dtype), {rg->total_k, p->hkv, p->d}, p->k.stride + 1, false);
        v = view(p->v.data, numpy_storage(p->dtype), width_of(p->dtype), {rg->total_k, p->hkv, p->dv}, p->v.stride + 1, false);
      }
      o = view(p->o, numpy_storage(p->dtype), width_of(p->dtype), {rg->total_q, p->hq, p->dv}, p->o_stride + 1, true);
      if (p->lse) lse = view(p->lse, py::dtype("float32"), 4, {p->hq, rg->total_q}, p->lse_stride + 1, true);
    } else {
      // fp8 (dense only): each input in its own type, O in o_dtype.
      const attncheck_quant* z = quant_of(*p);
      const auto type = [&](std::int32_t t) { return z ? static_cast<attncheck_dtype>(t) : p->dtype; };
      q = tensor_view(p->q, type(z ? z->q_dtype : 0), p->b, p->lq, p->hq, p->d);
      if (!pk) {
        k = tensor_view(p->k, type(z ? z->k_dtype : 0), p->b, p->lk, p->hkv, p->d);
        v = tensor_view(p->v, type(z ? z->v_dtype : 0), p->b, p->lk, p->hkv, p->dv);
      }
      o = output_view(*p, out_type);
      lse = lse_view(*p);
    }
    of(st)->subject.attr("attend")(static_cast<int>(out_type), q, k, v, static_cast<double>(p->scale), p->causal != 0, key_len,
                                   mask, p->threads, o, lse, variants_of(*p), form_of(*p), quant_dict(*p));
  });
}

// The backward problem (docs/python.md "Backward"): the forward's dense Q, K,
// V, masks and scale, O, LSE (B, Hq, Lq) and dO handed in read-only, dQ, dK
// and dV as writable views with the host's strides.
int attend_backward(void* st, const attncheck_backward_problem* bp, char* err, std::size_t len) {
  return guarded(err, len, [&] {
    const attncheck_problem& p = *bp->forward;
    py::object key_len = py::none(), mask = py::none(), lse = py::none();
    if (p.key_len) key_len = py::array_t<std::int64_t>(p.b, p.key_len);
    if (p.mask) mask = view(p.mask, py::dtype("bool"), 1, {p.b, p.hq, p.lq, p.lk}, p.mask_stride, false);
    if (bp->lse) lse = view(bp->lse, py::dtype("float32"), 4, {p.b, p.hq, p.lq}, bp->lse_stride, false);
    const py::dtype dt = numpy_storage(p.dtype);
    const std::size_t w = width_of(p.dtype);
    // d(sink): Hq float32 entries, writable, with sinks (FEATURE3_BACKWARD_VARIANTS).
    const std::int64_t one = 1;
    py::object d_sinks = py::none();
    if (bp->d_sinks) d_sinks = view(bp->d_sinks, py::dtype("float32"), 4, {p.hq}, &one, true);
    of(st)->subject.attr("backward")(
        static_cast<int>(p.dtype), tensor_view(p.q, p.dtype, p.b, p.lq, p.hq, p.d),
        tensor_view(p.k, p.dtype, p.b, p.lk, p.hkv, p.d), tensor_view(p.v, p.dtype, p.b, p.lk, p.hkv, p.dv),
        tensor_view(bp->o, p.dtype, p.b, p.lq, p.hq, p.dv), lse, tensor_view(bp->d_o, p.dtype, p.b, p.lq, p.hq, p.dv),
        static_cast<double>(p.scale), p.causal != 0, key_len, mask, p.threads,
        view(bp->dq, dt, w, {p.b, p.lq, p.hq, p.d}, bp->dq_stride, true),
        view(bp->dk, dt, w, {p.b, p.lk, p.hkv, p.d}, bp->dk_stride, true),
        view(bp->dv, dt, w, {p.b, p.lk, p.hkv, p.dv}, bp->dv_stride, true), variants_of(p), d_sinks);
  });
}

// A cache lives as a Python object (the subject's cache class instance); the
// host holds it with the sizes its views need.
struct py_cache {
  py::object obj;
  attncheck_dtype dtype;
  std::int64_t b, hkv, d, dv;
};

void* cache_create(void* st, const attncheck_cache_config* cfg, char* err, std::size_t len) {
  py_cache* cache = nullptr;
  const int rc = guarded(err, len, [&] {
    py::object order = py::none();
    if (cfg->page_order) order = py::array_t<std::int64_t>(cfg->page_count, cfg->page_order);
    py::object c = of(st)->subject.attr("cache_create")(static_cast<int>(cfg->dtype), cfg->b, cfg->hkv, cfg->d, cfg->dv,
                                                        cfg->capacity, cfg->page_size, order);
    cache = new py_cache{std::move(c), cfg->dtype, cfg->b, cfg->hkv, cfg->d, cfg->dv};
  });
  return rc == 0 ? cache : nullptr;
}

int cache_append(void* st, void* cache, const attncheck_tensor* k, const attncheck_tensor* v, std::int64_t c,
                 const std::int64_t* count, char* err, std::size_t len) {
  return guarded(err, len, [&] {
    const py_cache& x = *static_cast<py_cache*>(cache);
    of(st)->subject.attr("cache_append")(x.obj, static_cast<int>(x.dtype), tensor_view(*k, x.dtype, x.b, c, x.hkv, x.d),
                                         tensor_view(*v, x.dtype, x.b, c, x.hkv, x.dv), py::array_t<std::int64_t>(x.b, count));
  });
}

int cache_attend(void* st, void* cache, const attncheck_problem* p, char* err, std::size_t len) {
  return guarded(err, len, [&] {
    of(st)->subject.attr("cache_attend")(static_cast<py_cache*>(cache)->obj, static_cast<int>(p->dtype),
                                         tensor_view(p->q, p->dtype, p->b, p->lq, p->hq, p->d), static_cast<double>(p->scale),
                                         p->causal != 0, p->threads, output_view(*p), lse_view(*p), variants_of(*p));
  });
}

void cache_free(void*, void* cache) {
  py::gil_scoped_acquire gil;
  delete static_cast<py_cache*>(cache);
}

void destroy(attncheck_instance* self) {
  py::gil_scoped_acquire gil;
  delete reinterpret_cast<py_state*>(self);
}

template <class T>
T field(const py::object& o, const char* name) {
  try {
    return o.attr(name).cast<T>();
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("declaration field ") + name + " does not convert: " + e.what());
  }
}

}  // namespace

std::string describe(py::error_already_set& e) {
  try {
    // pybind11 keeps the traceback beside the exception; hand it over so the
    // verdict can name the subject's frame.
    if (e.trace() && e.value()) PyException_SetTraceback(e.value().ptr(), e.trace().ptr());
    return py::module_::import("attncheck._bridge").attr("describe_exception")(e.value()).cast<std::string>();
  } catch (const std::exception&) {
    return std::string("python raised ") + e.what();
  }
}

attncheck_instance* make_instance(py::object subject) {
  auto self = std::make_unique<py_state>();
  self->subject = subject;
  self->name = field<std::string>(subject, "name");
  attncheck_instance& d = self->desc;
  // Every Python subject is a version 4 instance: the bridge is built with
  // the host, so it may decline a case (attncheck.Declined) and make the
  // version 4 claims; what it does not declare reads as the contract's default.
  const auto features_v3 = field<std::uint32_t>(subject, "feature3_bits");
  const auto claims_v4 = field<std::uint32_t>(subject, "claim4_bits");
  d.abi_version = ATTNCHECK_SUBJECT_ABI_VERSION_4;
  d.struct_size = sizeof d;
  d.features_v3 = features_v3;
  d.features_v4 = field<std::uint32_t>(subject, "feature4_bits");
  d.invariances_v3 = field<std::uint32_t>(subject, "claim3_bits");
  d.invariances_v4 = claims_v4;
  d.tanh_ulps = field<double>(subject, "tanh_ulps");
  d.name = self->name.c_str();
  d.dtypes = field<std::uint32_t>(subject, "dtype_bits");
  d.features = field<std::uint32_t>(subject, "feature_bits");
  d.invariances = field<std::uint32_t>(subject, "claim_bits");
  d.compute_unit_roundoff = field<double>(subject, "u");
  d.exp_ulps = field<double>(subject, "exp_ulps");
  // The profile: _bridge.py turned its names into the C values; the host checks their ranges.
  if (const py::object prof = subject.attr("profile"); !prof.is_none()) {
    const py::dict pd = prof;
    attncheck_profile& p = self->profile;
    p.struct_size = sizeof p;
    const auto get = [&](const char* key, auto& slot) {
      if (pd.contains(key)) slot = pd[key].cast<std::remove_reference_t<decltype(slot)>>();
    };
    get("qk_product_u", p.qk_product_u), get("qk_accum_u", p.qk_accum_u), get("scale_mode", p.scale_mode);
    get("exp_ulps", p.exp_ulps), get("rescale_u", p.rescale_u), get("p_format", p.p_format), get("p_factor", p.p_factor);
    get("p_factor_log2", p.p_factor_log2), get("row_sum", p.row_sum), get("p_saturates", p.p_saturates);
    get("pv_accum_u", p.pv_accum_u), get("lse_u", p.lse_u);
    d.profile = &p;
  }
  if (const py::object conv = subject.attr("conventions"); !conv.is_none()) {
    const py::dict cd = conv;
    attncheck_conventions& c = self->conventions;
    c.struct_size = sizeof c;
    for (auto [key, slot] : {std::pair{"empty_row_o", &c.empty_row_o}, std::pair{"empty_row_lse", &c.empty_row_lse},
                             std::pair{"masked_slots", &c.masked_slots}, std::pair{"flush", &c.flush}})
      if (cd.contains(key)) *slot = cd[key].cast<std::uint32_t>();
    d.conventions = &c;
  }
  if (const py::object lim = subject.attr("limits"); !lim.is_none()) {
    const py::dict ld = lim;
    attncheck_limits& l = self->limits;
    l.struct_size = sizeof l;
    for (auto [key, slot] : {std::pair{"max_head_dim", &l.max_head_dim}, std::pair{"head_dim_multiple", &l.head_dim_multiple},
                             std::pair{"min_lk", &l.min_lk}, std::pair{"max_group", &l.max_group},
                             std::pair{"alibi_max_distance", &l.alibi_max_distance}})
      if (ld.contains(key)) *slot = ld[key].cast<std::int64_t>();
    for (auto [key, slot] :
         {std::pair{"dv_equals_d", &l.dv_equals_d}, std::pair{"causal_lq_at_most_lk", &l.causal_lq_at_most_lk}})
      if (ld.contains(key)) *slot = ld[key].cast<std::int32_t>();
    if (ld.contains("scale_signs")) l.scale_signs = ld["scale_signs"].cast<std::uint32_t>();
    if (ld.contains("bias_dtypes")) l.bias_dtypes = ld["bias_dtypes"].cast<std::uint32_t>();
    if (ld.contains("alibi_slopes")) l.alibi_slopes = ld["alibi_slopes"].cast<std::uint32_t>();
    if (ld.contains("alibi_max_bias")) l.alibi_max_bias = ld["alibi_max_bias"].cast<double>();
    if (ld.contains("head_dims")) {
      const py::list dims = ld["head_dims"];
      for (std::size_t i = 0; i < dims.size() && i < ATTNCHECK_SIZE_HINT_SLOTS; ++i)
        l.head_dims[i] = dims[i].cast<std::int64_t>();
    }
    d.limits = &l;
  }
  const py::dict hints = subject.attr("hints");
  const auto hint = [&](const char* key) {
    try {
      return hints[key].cast<std::int64_t>();
    } catch (const std::exception& e) {
      throw std::runtime_error(std::string("declaration field hints.") + key + " does not convert: " + e.what());
    }
  };
  d.hints.q_tile = hint("q_tile");
  d.hints.k_tile = hint("k_tile");
  d.hints.split_keys = hint("split_keys");
  const auto fill_list = [&](const char* key, std::int64_t* slots) {
    int n = 0;
    for (const auto item : hints[key].cast<py::list>()) {
      if (n == ATTNCHECK_SIZE_HINT_SLOTS) throw std::runtime_error(std::string("hints.") + key + ": more than 8 entries");
      slots[n++] = item.cast<std::int64_t>();
    }
  };
  fill_list("lengths", d.hints.lengths);
  fill_list("head_dims", d.hints.head_dims);
  d.state = self.get();
  d.key_blocks = key_blocks;
  d.attend = attend;
  if (d.features & ATTNCHECK_FEATURE_CACHE) {
    d.cache_create = cache_create;
    d.cache_append = cache_append;
    d.cache_attend = cache_attend;
    d.cache_free = cache_free;
  }
  if (d.features_v3 & ATTNCHECK_FEATURE3_BACKWARD) d.attend_backward = attend_backward;
  d.destroy = destroy;
  return &self.release()->desc;
}

}  // namespace attncheck::python
