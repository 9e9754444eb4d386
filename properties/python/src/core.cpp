// attncheck._core: the compiled half of the attncheck Python package
// (properties/python/attncheck/__init__.py wraps it; docs/python.md, "attncheck from Python").
//   oracle_arrays / oracle_case   the high-precision oracle on numpy arrays or on a case
//   gate_callable                 the gate on a Python callable, in this process
//   Case                          the one-line form: parse, print, materialize
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <sstream>

#include "attncheck/bundled_subjects.hpp"
#include "attncheck/case.hpp"
#include "attncheck/case_file.hpp"
#include "attncheck/gate.hpp"
#include "attncheck/report.hpp"
#include "feature_table.hpp"
#include "attncheck/result_json.hpp"
#include "attncheck/oracle.hpp"
#include "attncheck/subject_host.hpp"
#include "py_subject.hpp"

namespace py = pybind11;

namespace attncheck {
namespace {

dtype dtype_named(const std::string& name) {
  if (name == "f32") return dtype::f32;
  if (name == "f16") return dtype::f16;
  if (name == "bf16") return dtype::bf16;
  throw input_error("dtype", "'" + name + "' is not f32, f16 or bf16");
}

// The storage dtype of q: float32 -> f32, float16 -> f16; uint16 (bf16 bits) only with dtype="bf16".
dtype dtype_of(const py::array& q, const std::string& declared) {
  if (!declared.empty()) return dtype_named(declared);
  const std::string kind = py::str(q.dtype());
  if (kind == "float32") return dtype::f32;
  if (kind == "float16") return dtype::f16;
  if (kind == "uint16") throw input_error("dtype", "uint16 arrays hold bf16 bits only when dtype='bf16' is given");
  throw input_error("q", "dtype " + kind + " is not a storage type (float32, float16, or uint16 bits with dtype='bf16')");
}

const char* numpy_name(dtype t) {
  return t == dtype::f32 ? "float32" : t == dtype::f16 ? "float16" : is_fp8(t) ? "uint8" : "uint16";
}

// A dense copy of a 4-d array of exactly the storage dtype.
tensor tensor_of(const py::array& in, dtype t, const char* name) {
  if (in.ndim() != 4) throw input_error(name, "expected 4 dimensions (B, L, H, D), got " + std::to_string(in.ndim()));
  if (std::string(py::str(in.dtype())) != numpy_name(t))
    throw input_error(
        name, std::string("dtype ") + std::string(py::str(in.dtype())) + "; the case's storage type needs " + numpy_name(t));
  const auto a = py::array::ensure(in, py::array::c_style);
  tensor x = tensor::contiguous(t, {a.shape(0), a.shape(1), a.shape(2), a.shape(3)});
  x.unpack_storage(static_cast<const unsigned char*>(a.data()), static_cast<std::size_t>(a.nbytes()));
  return x;
}

py::array_t<double> doubles(const std::vector<double>& v, std::vector<py::ssize_t> shape) {
  py::array_t<double> out(shape);
  if (!v.empty()) std::memcpy(out.mutable_data(), v.data(), v.size() * sizeof(double));
  return out;
}

oracle_options options_for(const attn_case& c, double u, double exp_ulps, std::int64_t key_blocks, double tanh_ulps = 1.0) {
  oracle_options opt;
  opt.bound.u_compute = u;
  opt.bound.exp_ulps = exp_ulps;
  opt.bound.tanh_ulps = tanh_ulps;
  opt.bound.key_blocks = key_blocks;
  opt.out_type = c.type;
  return opt;
}

py::dict result_of(const attn_case& c, const oracle_result& r) {
  py::dict d;
  d["o"] = doubles(r.o, {c.b, c.lq, c.hq, c.dv});
  d["lse"] = doubles(r.lse, {c.b, c.hq, c.lq});
  d["o_bound"] = doubles(r.o_bound, {c.b, c.lq, c.hq, c.dv});
  d["lse_bound"] = doubles(r.lse_bound, {c.b, c.hq, c.lq});
  return d;
}

// Hq float32 values (sinks or ALiBi slopes) from a 1-d array.
std::vector<float> per_head(const py::object& values, std::int64_t hq, const char* name) {
  const auto a = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(values);
  if (!a || a.ndim() != 1 || a.shape(0) != hq)
    throw input_error(name, "expected a float32 array of Hq = " + std::to_string(hq) + " values");
  return std::vector<float>(a.data(), a.data() + a.size());
}

// The contract 1.1 variants given as the keywords a subject receives (docs/python.md, "Variants").
void set_variants(attn_case& c, const py::object& window, const py::object& chunk, const py::object& softcap,
                  const py::object& sinks, const py::object& alibi_slopes, const py::object& bias) {
  score_variants& w = c.variants;
  if (!window.is_none()) {
    const auto lr = window.cast<std::pair<std::int64_t, std::int64_t>>();
    w.window_left = lr.first, w.window_right = lr.second;
  }
  if (!chunk.is_none()) w.chunk = chunk.cast<std::int64_t>();
  if (!softcap.is_none()) w.softcap = softcap.cast<float>();
  // Explicit values: the recipe tags only say the feature is on (the values are what the oracle reads).
  if (!sinks.is_none()) w.sinks = sink_kind::normal, w.sink_logits = per_head(sinks, c.hq, "sinks");
  if (!alibi_slopes.is_none()) w.alibi = alibi_kind::random, w.alibi_slopes = per_head(alibi_slopes, c.hq, "alibi_slopes");
  if (!bias.is_none()) {
    const py::array b = py::array::ensure(bias);
    if (!b) throw input_error("bias", "expected an array (B, Hq, Lq, Lk), each dim 1 or full");
    const std::string kind = py::str(b.dtype());
    const dtype t = kind == "float32" ? dtype::f32 : kind == "float16" ? dtype::f16 : dtype::bf16;
    if (kind != "float32" && kind != "float16" && kind != "uint16")
      throw input_error("bias", "dtype " + kind + " is not float32, float16 or uint16 (bf16 bits)");
    w.bias = tensor_of(b, t, "bias");
    w.bias_type = t;
    for (int a = 0; a < 4; ++a) w.bias_shape[static_cast<std::size_t>(a)] = b.shape(a);
  }
}

py::dict oracle_arrays(const py::array& q, const py::array& k, const py::array& v, py::object scale, bool causal,
                       py::object key_len, py::object mask, const std::string& dtype_name, double u, double exp_ulps,
                       std::int64_t key_blocks, py::object window, py::object chunk, py::object softcap, py::object sinks,
                       py::object alibi_slopes, py::object bias, double tanh_ulps) {
  attn_case c;
  c.type = dtype_of(q, dtype_name);
  c.q = tensor_of(q, c.type, "q");
  c.k = tensor_of(k, c.type, "k");
  c.v = tensor_of(v, c.type, "v");
  c.b = q.shape(0), c.lq = q.shape(1), c.hq = q.shape(2), c.d = q.shape(3);
  c.lk = k.shape(1), c.hkv = k.shape(2), c.dv = v.shape(3);
  if (!scale.is_none()) c.scale = scale.cast<float>();
  c.causal = causal;
  if (!key_len.is_none()) c.key_len = key_len.cast<std::vector<std::int64_t>>();
  if (!mask.is_none()) {
    const auto m = py::array_t<bool, py::array::c_style | py::array::forcecast>::ensure(mask);
    if (!m || m.ndim() != 4) throw input_error("mask", "expected a bool array of 4 dimensions, each 1 or full (B, Hq, Lq, Lk)");
    for (int a = 0; a < 4; ++a) c.mask_shape[static_cast<std::size_t>(a)] = m.shape(a);
    c.mask.assign(m.data(), m.data() + m.size());
  }
  set_variants(c, window, chunk, softcap, sinks, alibi_slopes, bias);
  validate(c);
  return result_of(c, reference(c, options_for(c, u, exp_ulps, key_blocks, tanh_ulps)));
}

attn_case case_of(const std::string& line_or_path) {
  if (line_or_path.rfind("ATTN(", 0) == 0) {
    attn_case c = parse_line(line_or_path);
    materialize(c);
    return c;
  }
  return read_case_file(line_or_path).c;
}

py::dict oracle_case(const std::string& line_or_path, double u, double exp_ulps, std::int64_t key_blocks, double tanh_ulps) {
  const attn_case c = case_of(line_or_path);
  return result_of(c, reference(c, options_for(c, u, exp_ulps, key_blocks, tanh_ulps)));
}

// The tensor as a dense numpy array of its storage type (bf16 as uint16 bits, fp8 as uint8 bits).
py::array array_of(const tensor& t) {
  py::array out(py::dtype(numpy_name(t.type)), std::vector<py::ssize_t>{t.shape[0], t.shape[1], t.shape[2], t.shape[3]});
  tensor dense = tensor::contiguous(t.type, t.shape);
  for (std::int64_t a = 0; a < t.shape[0]; ++a)
    for (std::int64_t b = 0; b < t.shape[1]; ++b)
      for (std::int64_t c = 0; c < t.shape[2]; ++c)
        for (std::int64_t d = 0; d < t.shape[3]; ++d) dense.set_bits(a, b, c, d, t.bits_at(a, b, c, d));
  const auto packed = dense.packed_storage();
  if (!packed.empty()) std::memcpy(out.mutable_data(), packed.data(), packed.size());
  return out;
}

py::dict materialized(attn_case c) {
  if (c.q.bits.empty()) materialize(c);
  py::dict d;
  d["q"] = array_of(c.q);
  d["k"] = array_of(c.k);
  d["v"] = array_of(c.v);
  d["scale"] = static_cast<double>(c.effective_scale());
  d["causal"] = c.causal;
  d["dtype"] = std::string(name(c.type));
  if (c.has_padding())
    d["key_len"] = py::array_t<std::int64_t>(static_cast<py::ssize_t>(c.key_len.size()), c.key_len.data());
  else
    d["key_len"] = py::none();
  if (c.has_mask()) {
    py::array_t<bool> m(std::vector<py::ssize_t>{c.b, c.hq, c.lq, c.lk});
    auto w = m.mutable_unchecked<4>();
    for (std::int64_t bi = 0; bi < c.b; ++bi)
      for (std::int64_t h = 0; h < c.hq; ++h)
        for (std::int64_t i = 0; i < c.lq; ++i)
          for (std::int64_t j = 0; j < c.lk; ++j) w(bi, h, i, j) = c.mask_allows(bi, h, i, j);
    d["mask"] = m;
  } else {
    d["mask"] = py::none();
  }
  // Contract 1.1 variants: the keywords a subject receives (docs/python.md,
  // "Variants"), only those the case uses.
  const score_variants& w = c.variants;
  if (w.has_window()) d["window"] = py::make_tuple(w.window_left, w.window_right);
  if (w.has_chunk()) d["chunk"] = w.chunk;
  if (w.has_softcap()) d["softcap"] = static_cast<double>(w.softcap);
  if (w.has_sinks()) d["sinks"] = py::array_t<float>(static_cast<py::ssize_t>(w.sink_logits.size()), w.sink_logits.data());
  if (w.has_alibi())
    d["alibi_slopes"] = py::array_t<float>(static_cast<py::ssize_t>(w.alibi_slopes.size()), w.alibi_slopes.data());
  if (w.has_bias())
    d["bias"] = py::module_::import("numpy").attr("broadcast_to")(array_of(w.bias), py::make_tuple(c.b, c.hq, c.lq, c.lk));
  // fp8 storage (docs/python.md "fp8 inputs"): each tensor's type and the descales it has, as a subject receives them.
  const quantization& z = c.quant;
  if (z.any()) {
    py::dict types;
    for (const fp8_input& x : fp8_inputs) types[py::str(std::string(1, x.type_key[0]))] = std::string(name((c.*x.values).type));
    types["o"] = std::string(name(c.type));
    d["dtypes"] = types;
    for (const fp8_input& x : fp8_inputs) {
      const descale_granularity g = z.*x.scale;
      if (g == descale_granularity::none) continue;
      const std::vector<py::ssize_t> shape =
          g == descale_granularity::tensor ? std::vector<py::ssize_t>{1} : std::vector<py::ssize_t>{c.b, x.query ? c.hq : c.hkv};
      d[x.descale_key] = py::array_t<float>(shape, (z.*x.descale).data());
    }
  }
  return d;
}

// A JSON value as the Python value json.loads would give.
py::object py_of(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null: return py::none();
    case nlohmann::json::value_t::boolean: return py::bool_(j.get<bool>());
    case nlohmann::json::value_t::number_integer: return py::int_(j.get<std::int64_t>());
    case nlohmann::json::value_t::number_unsigned: return py::int_(j.get<std::uint64_t>());
    case nlohmann::json::value_t::number_float: return py::float_(j.get<double>());
    case nlohmann::json::value_t::string: return py::str(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      py::list l;
      for (const auto& x : j) l.append(py_of(x));
      return l;
    }
    case nlohmann::json::value_t::object: {
      py::dict d;
      for (const auto& [k, v] : j.items()) d[py::str(k)] = py_of(v);
      return d;
    }
    default: throw std::runtime_error("a JSON value of no Python type");
  }
}

// The gate on a Python subject object (attncheck._bridge.Subject) in this
// process; the laws still run in forked children. The GIL is released while
// the gate runs: each call into the subject takes it again.
py::dict gate_subject(py::object subject_object, const std::string& spec, const std::string& config, const std::string& out_dir) {
  // The module's keyword arguments as the run codec's text, over the table's Python defaults.
  run_config run = parse_run_config(config, run_defaults(entry_point::python), "gate");
  if (!out_dir.empty()) run.out_dir = out_dir;  // a path may hold what the text form cannot
  subject_job job;
  job.subject = spec;
  job.instance = subject::adopt(python::make_instance(subject_object), spec);
  std::ostringstream text;
  gate_result g;
  {
    py::gil_scoped_release unlocked;
    console_sink console(text);
    result_files_sink files;
    g = run_gate(run, job, {&console, &files});
    job.instance.reset();  // destroyed with the GIL held below, not here
  }
  // Each row is the law as the gate's --json writes it (the result codec),
  // with the keys this module has always had: law, message (the failure's, or
  // why it was skipped), counterexample (None when there is none) and
  // max_ratio as a float (inf where the JSON writes null).
  py::list laws;
  for (const auto& r : g.reports) {
    py::dict row = py_of(to_json(r, json_numbers::public_numbers));
    row["law"] = r.law;
    row["max_ratio"] = r.max_ratio;
    row["message"] = r.v == verdict::skip ? r.skip_reason : r.failure.message;
    row["counterexample"] = r.counterexample ? py::object(py::str(to_line(*r.counterexample))) : py::object(py::none());
    laws.append(row);
  }
  py::dict d;
  d["laws"] = laws;
  d["saved"] = g.saved;
  d["failed"] = g.failed();
  d["unjudged"] = g.unjudged();
  d["seconds"] = g.seconds;
  d["text"] = text.str();
  return d;
}

}  // namespace
}  // namespace attncheck

PYBIND11_MODULE(_core, m) {
  attncheck::register_bundled_subjects();
  using namespace attncheck;
  m.doc() = "attncheck's compiled half: the oracle, the gate on a callable, the one-line case form";
  py::register_exception<input_error>(m, "InputError", PyExc_ValueError);
  m.def("oracle_arrays", &oracle_arrays, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("scale") = py::none(),
        py::arg("causal") = false, py::arg("key_len") = py::none(), py::arg("mask") = py::none(), py::arg("dtype") = "",
        py::arg("u") = 0x1p-24, py::arg("exp_ulps") = 1.0, py::arg("key_blocks") = 1, py::arg("window") = py::none(),
        py::arg("chunk") = py::none(), py::arg("softcap") = py::none(), py::arg("sinks") = py::none(),
        py::arg("alibi_slopes") = py::none(), py::arg("bias") = py::none(), py::arg("tanh_ulps") = 1.0);
  m.def("oracle_case", &oracle_case, py::arg("line_or_path"), py::arg("u") = 0x1p-24, py::arg("exp_ulps") = 1.0,
        py::arg("key_blocks") = 1, py::arg("tanh_ulps") = 1.0);
  m.def(
      "oracle_of",
      [](attn_case c, double u, double exp_ulps, std::int64_t key_blocks, double tanh_ulps) {
        if (c.q.bits.empty()) materialize(c);
        return result_of(c, reference(c, options_for(c, u, exp_ulps, key_blocks, tanh_ulps)));
      },
      py::arg("case"), py::arg("u") = 0x1p-24, py::arg("exp_ulps") = 1.0, py::arg("key_blocks") = 1, py::arg("tanh_ulps") = 1.0);
  m.def("contract_features", &python::contract_feature_dicts,
        "The contract's features (attncheck/features.hpp): name, kind, abi_word, bit, python_declarable, python_keywords");
  m.def("gate_subject", &gate_subject, py::arg("subject"), py::arg("spec"), py::arg("config"), py::arg("out"));
  m.def(
      "run_defaults", [] { return minimal_string(run_defaults(entry_point::python)); },
      "The run settings gate() uses where no keyword is given, as the gate's --run text");
  py::class_<attn_case>(m, "Case", "One attention problem in its one-line form, ATTN(b=..,hq=..,...)")
      .def(py::init([](const std::string& line) { return parse_line(line); }), py::arg("line"))
      .def_static(
          "parse", [](const std::string& line) { return parse_line(line); }, py::arg("line"))
      .def_static(
          "from_file", [](const std::string& path) { return read_case_file(path).c; }, py::arg("path"))
      .def("__str__", [](const attn_case& c) { return to_line(c); })
      .def("__repr__", [](const attn_case& c) { return "Case('" + to_line(c) + "')"; })
      .def("__eq__", [](const attn_case& a, const attn_case& b) { return to_line(a) == to_line(b); })
      .def("materialize", &materialized,
           "q, k, v (storage dtype, bf16 as uint16 bits, fp8 as uint8 bits), scale, causal, key_len, mask, dtype; with fp8 "
           "inputs dtypes and the descales")
      .def_readonly("b", &attn_case::b)
      .def_readonly("hq", &attn_case::hq)
      .def_readonly("hkv", &attn_case::hkv)
      .def_readonly("lq", &attn_case::lq)
      .def_readonly("lk", &attn_case::lk)
      .def_readonly("d", &attn_case::d)
      .def_readonly("dv", &attn_case::dv)
      .def_readonly("causal", &attn_case::causal)
      .def_readonly("seed", &attn_case::seed)
      .def_readonly("key_len", &attn_case::key_len)
      .def_property_readonly("dtype", [](const attn_case& c) { return std::string(name(c.type)); })
      .def_property_readonly("scale", [](const attn_case& c) { return static_cast<double>(c.effective_scale()); });
}
