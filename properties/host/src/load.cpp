// Loading a subject and checking what it declares: the spec grammar
// (split_spec), dlopen and the entry points (subject::load, make_v2), the
// ABI v1 adapter (wrap), version 2 to 4 instances (adopt), the declaration
// checks (check_declaration, read_v3 and read_v4 with their checks) and the declared
// numbers as the gate prints them (subject::declared).
#include <dlfcn.h>

#include <cctype>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>

#include "attncheck/v4_declaration.hpp"
#include "attncheck/suggest.hpp"
#include "attncheck/subject_host.hpp"
#include "attncheck/subject_registry.hpp"
#include "guarded.hpp"

namespace attncheck {

using host::err_cap;

namespace {

// ---- Version 1 plugins, adapted to a version 2 instance ---------------------
namespace v1 {
const attncheck_subject* of(void* state) { return static_cast<const attncheck_subject*>(state); }
std::int64_t key_blocks(void* st, const attncheck_problem* p) { return of(st)->key_blocks ? of(st)->key_blocks(p) : 1; }
int attend(void* st, const attncheck_problem* p, char* err, std::size_t len) { return of(st)->attend(p, err, len); }
void* cache_create(void* st, const attncheck_cache_config* cfg, char* err, std::size_t len) {
  return of(st)->cache_create(cfg, err, len);
}
int cache_append(void* st, void* cache, const attncheck_tensor* k, const attncheck_tensor* v, std::int64_t c,
                 const std::int64_t* count, char* err, std::size_t len) {
  return of(st)->cache_append(cache, k, v, c, count, err, len);
}
int cache_attend(void* st, void* cache, const attncheck_problem* p, char* err, std::size_t len) {
  return of(st)->cache_attend(cache, p, err, len);
}
void cache_free(void* st, void* cache) { of(st)->cache_free(cache); }
void destroy(attncheck_instance* self) { delete self; }

attncheck_instance* adapt(const attncheck_subject* d) {
  auto* x = new attncheck_instance{};
  x->abi_version = ATTNCHECK_SUBJECT_ABI_VERSION_2;
  x->struct_size = sizeof *x;
  x->name = d->name;
  x->dtypes = d->dtypes, x->features = d->features, x->invariances = d->invariances;
  x->compute_unit_roundoff = d->compute_unit_roundoff, x->exp_ulps = d->exp_ulps;
  x->state = const_cast<attncheck_subject*>(d);
  x->key_blocks = key_blocks;
  x->attend = d->attend ? attend : nullptr;
  if (d->cache_create) x->cache_create = cache_create;
  if (d->cache_append) x->cache_append = cache_append;
  if (d->cache_attend) x->cache_attend = cache_attend;
  if (d->cache_free) x->cache_free = cache_free;
  x->destroy = destroy;
  return x;
}
}  // namespace v1

// Common production sizes, for a subject that declares none: tiles and
// split-KV chunks of widely used kernels sit at these.
constexpr std::int64_t production_lengths[] = {16, 32, 64, 128, 256, 512, 1024};

// Checks the declared numbers; throws input_error naming the field and the limit.
void check_declaration(const attncheck_instance& d, const std::string& spec) {
  if (!d.attend) throw input_error("subject", spec + " has no attend entry point");
  if ((d.features & ATTNCHECK_FEATURE_CACHE) && !(d.cache_create && d.cache_append && d.cache_attend && d.cache_free))
    throw input_error("subject", spec + " declares a cache but lacks cache_* entry points");
  const double u = d.compute_unit_roundoff;
  // The limits as subject.h names them: 2^-64 and 2^-8, 4096, 2^20.
  const auto power = [](double x) { return "2^" + std::to_string(std::ilogb(x)); };
  if (!(u >= ATTNCHECK_MIN_UNIT_ROUNDOFF && u <= ATTNCHECK_MAX_UNIT_ROUNDOFF))
    throw input_error("subject.compute_unit_roundoff", spec + " declares u = " + std::to_string(u) + "; it must lie in [" +
                                                           power(ATTNCHECK_MIN_UNIT_ROUNDOFF) + ", " +
                                                           power(ATTNCHECK_MAX_UNIT_ROUNDOFF) + "] (2^-24 for f32 compute)");
  if (!(d.exp_ulps >= 0 && d.exp_ulps <= ATTNCHECK_MAX_EXP_ULPS))
    throw input_error("subject.exp_ulps", spec + " declares exp_ulps = " + std::to_string(d.exp_ulps) + "; it must lie in [0, " +
                                              std::to_string(static_cast<long long>(ATTNCHECK_MAX_EXP_ULPS)) + "] ulps");
  const auto hint_ok = [](std::int64_t h) { return h >= 0 && h <= ATTNCHECK_MAX_SIZE_HINT; };
  bool ok = hint_ok(d.hints.q_tile) && hint_ok(d.hints.k_tile) && hint_ok(d.hints.split_keys);
  for (int i = 0; i < ATTNCHECK_SIZE_HINT_SLOTS; ++i) ok = ok && hint_ok(d.hints.lengths[i]) && hint_ok(d.hints.head_dims[i]);
  if (!ok) throw input_error("subject.hints", spec + " declares a size hint outside [0, " + power(ATTNCHECK_MAX_SIZE_HINT) + "]");
}

// The version 3 fields a version 3 instance declares, read only where its
// struct_size holds them (docs/abi.md: one that ends before features_v3
// loads with no version 3 feature).
struct v3_declaration {
  std::uint32_t features = 0, invariances = 0;
  double tanh_ulps = 0;
  bool backward = false;  // attend_backward set
};

// Whether instance d's struct_size covers its field (the plugin's header had it).
#define ATTNCHECK_COVERS(d, field) ((d).struct_size >= offsetof(attncheck_instance, field) + sizeof(d).field)

v3_declaration read_v3(const attncheck_instance& d) {
  v3_declaration v;
  if (d.abi_version < ATTNCHECK_SUBJECT_ABI_VERSION_3) return v;
  if (ATTNCHECK_COVERS(d, invariances_v3)) v.features = d.features_v3, v.invariances = d.invariances_v3;
  if (ATTNCHECK_COVERS(d, tanh_ulps)) v.tanh_ulps = d.tanh_ulps;
  if (ATTNCHECK_COVERS(d, attend_backward)) v.backward = d.attend_backward != nullptr;
  return v;
}

// The version 4 fields a version 4 instance declares, read only where its
// struct_size holds them (one that ends before features_v4 loads as version 3).
struct v4_declaration {
  std::uint32_t features = 0, invariances = 0;
  const attncheck_profile* profile = nullptr;
  const attncheck_conventions* conventions = nullptr;
  const attncheck_limits* limits = nullptr;
  const char* unbuilt = nullptr;  // the first designed-but-unbuilt part it sets, by field name
};

v4_declaration read_v4(const attncheck_instance& d) {
  v4_declaration v;
  if (d.abi_version < ATTNCHECK_SUBJECT_ABI_VERSION_4) return v;
  if (ATTNCHECK_COVERS(d, invariances_v4)) v.features = d.features_v4, v.invariances = d.invariances_v4;
  if (ATTNCHECK_COVERS(d, profile)) v.profile = d.profile;
  if (ATTNCHECK_COVERS(d, conventions)) v.conventions = d.conventions;
  if (ATTNCHECK_COVERS(d, limits)) v.limits = d.limits;
  if (ATTNCHECK_COVERS(d, cache_append_v4) && d.cache_append_v4) v.unbuilt = "cache_append_v4";
  return v;
}

std::string hex_bits(std::uint32_t x) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%x", x);
  return buf;
}

// Refuses the bits of a feature word (feature) or claim word outside `known`,
// naming the field, the bits and what this attncheck knows.
void refuse_unknown_bits(const char* field, std::uint32_t bits, std::uint32_t known, bool feature, const std::string& spec) {
  if (const std::uint32_t unknown = bits & ~known)
    throw input_error(std::string("subject.") + field,
                      spec + (feature ? " declares unknown bit(s) " : " declares unknown claim bit(s) ") + hex_bits(unknown) +
                          " (this attncheck knows " + hex_bits(known) + ")" +
                          (feature ? ": a feature it cannot judge is refused, never silently passed" : ""));
}

// Checks a version 4 declaration (docs/abi.md "Version 4"): unknown bits and
// the parts this attncheck does not build yet are refused, naming the field,
// never loaded and left unjudged.
void check_v4_declaration(const v4_declaration& v, const std::string& spec) {
  refuse_unknown_bits("features_v4", v.features, ATTNCHECK_FEATURE4_KNOWN, true, spec);
  refuse_unknown_bits("invariances_v4", v.invariances, ATTNCHECK_CLAIM4_KNOWN, false, spec);
  if (v.unbuilt)
    throw input_error(std::string("subject.") + v.unbuilt,
                      spec + " sets " + v.unbuilt +
                          ", a version 4 part this attncheck does not judge yet (docs/abi.md \"Version 4\"): set it to NULL");
}

// The fp8 storage types and FEATURE4_FP8 come together: a subject that takes
// e4m3 or e5m2 reads them with descales, and one that declares fp8 names
// which of the two it takes.
void check_fp8_types(std::uint32_t dtypes, std::uint32_t features_v4, const std::string& spec) {
  constexpr std::uint32_t fp8_bits = (1u << ATTNCHECK_E4M3) | (1u << ATTNCHECK_E5M2);
  if (const std::uint32_t unknown = dtypes & ~(fp8_bits | 0x7u))
    throw input_error("subject.dtypes", spec + " declares unknown storage type bit(s) " + hex_bits(unknown) +
                                            " (this attncheck knows 0x1f: f32, f16, bf16, e4m3, e5m2)");
  const bool fp8 = (features_v4 & ATTNCHECK_FEATURE4_FP8) != 0;
  if ((dtypes & fp8_bits) && !fp8)
    throw input_error("subject.dtypes", spec + " takes e4m3 or e5m2 without ATTNCHECK_FEATURE4_FP8 in features_v4");
  if (fp8 && !(dtypes & fp8_bits))
    throw input_error("subject.features_v4",
                      spec + " declares ATTNCHECK_FEATURE4_FP8 but neither e4m3 nor e5m2 in dtypes (1u << ATTNCHECK_E4M3 ...)");
  if (fp8 && !(dtypes & 0x7u))
    throw input_error("subject.dtypes", spec + " takes fp8 inputs but no output type: O is f32, f16 or bf16");
}

// Checks a version 3 declaration (docs/abi.md, "Declaration checks"); throws
// input_error naming the field, the bit and the rule.
void check_v3_declaration(const v3_declaration& v, const std::string& spec) {
  const auto hex = hex_bits;
  refuse_unknown_bits("features_v3", v.features, ATTNCHECK_FEATURE3_KNOWN, true, spec);
  refuse_unknown_bits("invariances_v3", v.invariances, ATTNCHECK_CLAIM3_KNOWN, false, spec);
  if (v.backward != ((v.features & ATTNCHECK_FEATURE3_BACKWARD) != 0))
    throw input_error("subject.attend_backward", spec + (v.backward ? " sets attend_backward without FEATURE3_BACKWARD"
                                                                    : " declares FEATURE3_BACKWARD without attend_backward"));
  if ((v.features & ATTNCHECK_FEATURE3_BIAS_GRAD) && (v.features & (ATTNCHECK_FEATURE3_BIAS | ATTNCHECK_FEATURE3_BACKWARD)) !=
                                                         (ATTNCHECK_FEATURE3_BIAS | ATTNCHECK_FEATURE3_BACKWARD))
    throw input_error("subject.features_v3",
                      spec + " declares FEATURE3_BIAS_GRAD without both FEATURE3_BIAS and FEATURE3_BACKWARD");
  if ((v.features & ATTNCHECK_FEATURE3_BACKWARD_VARIANTS) && !(v.features & ATTNCHECK_FEATURE3_BACKWARD))
    throw input_error("subject.features_v3", spec + " declares FEATURE3_BACKWARD_VARIANTS without FEATURE3_BACKWARD");
  if ((v.features & ATTNCHECK_FEATURE3_SOFTCAP) && !(v.tanh_ulps >= 0 && v.tanh_ulps <= ATTNCHECK_MAX_TANH_ULPS))
    throw input_error("subject.tanh_ulps", spec + " declares tanh_ulps = " + std::to_string(v.tanh_ulps) +
                                               "; it must lie in [0, " +
                                               std::to_string(static_cast<long long>(ATTNCHECK_MAX_TANH_ULPS)) + "] ulps");
  const std::pair<std::uint32_t, std::uint32_t> claim_needs[] = {
      {ATTNCHECK_CLAIM3_PAGE_PLACEMENT, ATTNCHECK_FEATURE3_PAGED},
      {ATTNCHECK_CLAIM3_PAGED_EQUALS_DENSE, ATTNCHECK_FEATURE3_PAGED},
      {ATTNCHECK_CLAIM3_RAGGED_EQUALS_DENSE, ATTNCHECK_FEATURE3_RAGGED},
      {ATTNCHECK_CLAIM3_BACKWARD_DETERMINISTIC, ATTNCHECK_FEATURE3_BACKWARD},
  };
  for (const auto& [claim, feature] : claim_needs)
    if ((v.invariances & claim) && !(v.features & feature))
      throw input_error("subject.invariances_v3",
                        spec + " claims " + hex(claim) + " without the feature " + hex(feature) + " it is about");
}

// Splits NAME|PATH[:options]: options start at the first ':' followed by key=...
std::pair<std::string, std::string> split_spec(const std::string& spec) {
  for (std::size_t i = spec.find(':'); i != std::string::npos; i = spec.find(':', i + 1)) {
    const std::string rest = spec.substr(i + 1);
    const auto eq = rest.find('=');
    const auto comma = rest.find(',');
    if (rest.empty() || (eq != std::string::npos && (comma == std::string::npos || eq < comma) && eq > 0))
      return {spec.substr(0, i), rest};
  }
  return {spec, ""};
}

// A C++ plugin that defined its entry point outside extern "C" exports it
// mangled (_Z20attncheck_subject_v2PKcPcm): name that near-match and the fix.
std::string mangled_entry_hint(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  for (const char* entry : {ATTNCHECK_SUBJECT_ENTRY_V2, ATTNCHECK_SUBJECT_ENTRY}) {
    for (std::size_t at = bytes.find(entry); at != std::string::npos; at = bytes.find(entry, at + 1)) {
      // Walk back over the length digits to "_Z".
      std::size_t start = at;
      while (start > 0 && std::isdigit(static_cast<unsigned char>(bytes[start - 1]))) --start;
      if (start == at || start < 2 || bytes.compare(start - 2, 2, "_Z") != 0) continue;
      std::size_t end = at;
      while (end < bytes.size() && (std::isalnum(static_cast<unsigned char>(bytes[end])) || bytes[end] == '_')) ++end;
      return "; it has the C++ (mangled) symbol " + bytes.substr(start - 2, end - start + 2) +
             ": define the entry point inside extern \"C\" (attncheck/subject.h declares both entry points so, when "
             "included before the definition)";
    }
  }
  return "";
}

}  // namespace

subject::subject(attncheck_instance* inst, void* handle, std::string spec, unsigned abi)
    : inst_(inst), handle_(handle), spec_(std::move(spec)), abi_(abi) {
  hints_ = inst_->hints;
  default_hints_ = hints_.q_tile == 0 && hints_.k_tile == 0 && hints_.split_keys == 0 && hints_.lengths[0] == 0;
  if (default_hints_) {
    int n = 0;
    for (std::int64_t l : production_lengths) hints_.lengths[n++] = l;
  }
}

subject::~subject() {
  if (inst_ && inst_->destroy) inst_->destroy(inst_);
  if (handle_) dlclose(handle_);
}

std::shared_ptr<subject> subject::wrap(const attncheck_subject* desc, std::string spec) {
  if (!desc) throw input_error("subject", spec + " returned no descriptor");
  if (desc->abi_version != ATTNCHECK_SUBJECT_ABI_VERSION_1)
    throw input_error("subject", spec + " has ABI version " + std::to_string(desc->abi_version) +
                                     " in its attncheck_subject_v1 descriptor; expected " +
                                     std::to_string(ATTNCHECK_SUBJECT_ABI_VERSION_1));
  attncheck_instance* x = v1::adapt(desc);
  try {
    check_declaration(*x, spec);
  } catch (...) {
    x->destroy(x);
    throw;
  }
  return std::shared_ptr<subject>(new subject(x, nullptr, std::move(spec), 1));
}

std::shared_ptr<subject> subject::adopt(attncheck_instance* inst, std::string spec) {
  if (!inst) throw input_error("subject", spec + " returned no instance");
  const bool known_version =
      inst->abi_version >= ATTNCHECK_SUBJECT_ABI_VERSION_2 && inst->abi_version <= ATTNCHECK_SUBJECT_ABI_VERSION_4;
  if (!known_version || inst->struct_size < ATTNCHECK_INSTANCE_V2_SIZE) {
    if (inst->destroy) inst->destroy(inst);
    throw input_error("subject", spec + " returned an instance of ABI version " + std::to_string(inst->abi_version) +
                                     " (struct_size " + std::to_string(inst->struct_size) + "); expected version 2, 3 or 4");
  }
  v3_declaration v3;
  v4_declaration v4;
  declared_profile profile;
  declared_conventions conventions;
  static_limits limits;
  try {
    check_declaration(*inst, spec);
    v3 = read_v3(*inst);
    check_v3_declaration(v3, spec);
    v4 = read_v4(*inst);
    check_v4_declaration(v4, spec);
    check_fp8_types(inst->dtypes, v4.features, spec);
    profile = read_profile(v4.profile, inst->exp_ulps, spec);
    conventions = read_conventions(v4.conventions, spec);
    limits = read_limits(v4.limits, spec);
    if (conventions.flush && (v3.features & ATTNCHECK_FEATURE3_BACKWARD))
      throw input_error("subject.conventions.flush",
                        spec +
                            ": flushed subnormals with a backward pass are not judged by this attncheck yet "
                            "(the backward bound keeps gradual underflow): declare flush 0 or no backward");
  } catch (...) {
    if (inst->destroy) inst->destroy(inst);
    throw;
  }
  auto s = std::shared_ptr<subject>(new subject(inst, nullptr, std::move(spec), inst->abi_version));
  s->features_v3_ = v3.features;
  s->invariances_v3_ = v3.invariances;
  s->features_v4_ = v4.features;
  s->invariances_v4_ = v4.invariances;
  s->tanh_ulps_ = (v3.features & ATTNCHECK_FEATURE3_SOFTCAP) ? v3.tanh_ulps : 0.0;
  s->profile_ = profile.profile;
  s->exp_ulps_ = profile.exp_ulps;
  s->empty_rows_ = conventions.empty_rows;
  s->masked_by_zero_ = conventions.masked_weighted_by_zero;
  s->flush_ = conventions.flush;
  s->limits_ = std::move(limits);
  return s;
}

std::shared_ptr<subject> subject::make_v2(attncheck_subject_entry_v2 entry, const std::string& options, const std::string& spec,
                                          const std::string& who) {
  char err[err_cap] = {0};
  auto* inst = entry(options.c_str(), err, err_cap);
  if (!inst) {
    err[err_cap - 1] = 0;
    throw input_error("subject",
                      "'" + spec + "': " + who + " refused the options '" + options + "': " + (err[0] ? err : "no reason given"));
  }
  return adopt(inst, spec);
}

std::shared_ptr<subject> subject::load(const std::string& spec) {
  const auto parts = split_spec(spec);
  const std::string& where = parts.first;
  const std::string& options = parts.second;
  const auto kinds = subject_kinds();
  for (const auto& k : kinds)
    if (k.whole_spec && spec.rfind(k.name + ":", 0) == 0) return k.make(spec, spec.substr(k.name.size() + 1));
  for (const auto& k : kinds)
    if (!k.whole_spec && where == k.name) return k.make(spec, options);
  // dlopen searches the library path for a name without '/': a plugin in the
  // current folder is meant when the name is a file here.
  std::error_code ec;
  const std::string path =
      where.find('/') == std::string::npos && std::filesystem::is_regular_file(where, ec) ? "./" + where : where;
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    std::string expected;  // the registered kinds that carry a hint: "a, b or "
    std::size_t named = 0;
    for (const auto& k : kinds) named += !k.hint.empty();
    for (const auto& k : kinds)
      if (!k.hint.empty()) expected += k.hint + (--named ? ", " : " or ");
    std::vector<std::string> names;
    for (const auto& k : kinds) names.push_back(k.name);
    const std::string near = where.find('/') == std::string::npos ? did_you_mean(where, names) : "";
    throw input_error("subject", "cannot load '" + where + "': " + (e ? e : "unknown error") + near + " (expected " + expected +
                                     "a path to a plugin .so[:options])");
  }
  std::shared_ptr<subject> s;
  try {
    // The newest entry first: a plugin may export older ones for older hosts.
    if (auto v4 = reinterpret_cast<attncheck_subject_entry_v2>(dlsym(h, ATTNCHECK_SUBJECT_ENTRY_V4))) {
      s = make_v2(v4, options, spec, where);
    } else if (auto v3 = reinterpret_cast<attncheck_subject_entry_v2>(dlsym(h, ATTNCHECK_SUBJECT_ENTRY_V3))) {
      s = make_v2(v3, options, spec, where);
    } else if (auto v2 = reinterpret_cast<attncheck_subject_entry_v2>(dlsym(h, ATTNCHECK_SUBJECT_ENTRY_V2))) {
      s = make_v2(v2, options, spec, where);
    } else if (auto v1e = reinterpret_cast<attncheck_subject_entry>(dlsym(h, ATTNCHECK_SUBJECT_ENTRY))) {
      if (!options.empty())
        throw input_error("subject", "'" + spec + "': " + where + " is an ABI v1 plugin and takes no options");
      s = wrap(v1e(), spec);
    } else {
      throw input_error("subject", where + " exports neither " ATTNCHECK_SUBJECT_ENTRY_V2 " nor " ATTNCHECK_SUBJECT_ENTRY +
                                       mangled_entry_hint(path));
    }
  } catch (...) {
    dlclose(h);
    throw;
  }
  s->handle_ = h;
  return s;
}

declared_numbers subject::declared() const {
  declared_numbers d;
  d.u = inst_->compute_unit_roundoff;
  d.exp_ulps = exp_ulps();
  d.tanh_ulps = tanh_ulps_;
  d.profile = profile_text(profile_, d.u);
  d.conventions = conventions_text({empty_rows_, masked_by_zero_, flush_});
  d.limits = limits_.text();
  d.features_v3 = features_v3_;
  d.features_v4 = features_v4_;
  for (std::int64_t lk : {1, 64, 1024, 4096}) {
    attn_case c;
    c.lk = lk;
    d.nb_at.emplace_back(lk, key_blocks(c));
  }
  return d;
}

}  // namespace attncheck
