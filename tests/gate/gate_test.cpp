// The gate and its outputs: verdicts, saved counterexamples, JUnit XML,
// repro, determinism of the suite itself.
#include <cstdio>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <filesystem>
#include <limits>
#include <fstream>
#include <sstream>
#include <tuple>

#include "attncheck/bundled_subjects.hpp"
#include "attncheck/case_file.hpp"
#include "attncheck/gate.hpp"
#include "attncheck/report.hpp"
#include "attncheck/result_json.hpp"
#include "attncheck/isolate.hpp"
#include "attncheck/masked_fill.hpp"
#include "attncheck/subject_host.hpp"
#include "attncheck/subject_registry.hpp"
#include "test_instance.hpp"

#include <chrono>
#include <thread>
#include <tuple>

namespace attncheck {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string temp_dir(const std::string& name) {
  auto p = std::filesystem::temp_directory_path() / ("attncheck-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p.string();
}

TEST(gate, passes_on_the_naive_subject_and_writes_junit) {
  run_config opt = run_defaults(entry_point::library);
  opt.cases = 30;
  opt.out_dir = temp_dir("naive");
  opt.junit = opt.out_dir + "/gate.xml";
  subject_job job;
  job.subject = "naive";
  std::ostringstream out;
  console_sink console(out);
  result_files_sink files;
  const gate_result r = run_gate(opt, job, {&console, &files});
  EXPECT_EQ(r.failed(), 0) << out.str();
  EXPECT_EQ(r.reports.size(), all_laws().size());
  const std::string xml = slurp(opt.junit);
  const std::string head = "<testsuites name=\"attncheck\" tests=\"" + std::to_string(all_laws().size()) + "\" failures=\"0\"";
  EXPECT_NE(xml.find(head), std::string::npos) << xml;
  for (const auto& l : all_laws())
    EXPECT_NE(xml.find("name=\"" + l.name.substr(l.name.find('.') + 1) + "\""), std::string::npos) << l.name;
  EXPECT_NE(xml.find("name=\"future_keys_never_change_past_outputs\""), std::string::npos);
}

// The result codec's exact mode gives a law report back whole: non-finite
// doubles, -0, the structured worst element, the counterexample and heat map.
TEST(result_json, an_exact_law_report_round_trips) {
  const double inf = std::numeric_limits<double>::infinity();
  law_report r;
  r.law = "differential.output_within_bound_of_oracle";
  r.v = verdict::fail;
  r.cases = 7, r.judged = 6, r.min_judged = 0.25, r.shrink_steps = 3, r.seconds = 0.1 + 0.2;
  r.max_ratio = inf, r.max_ratio_case = "ATTN(b=1)";
  r.ratio_histogram[2] = 5;
  r.stats.counts["causal"] = 2, r.stats.n = 7;
  r.shares[1] = {1, 2, 3, 4};
  r.prob = prob_verdict::fail, r.prob_cases = 2, r.prob_max_ratio = -0.0, r.prob_failure = "p", r.prob_failure_case = "c";
  r.failure.v = verdict::fail, r.failure.kind = failure_kind::crash, r.failure.message = "m", r.failure.compared = 9;
  r.failure.max_ratio = std::nan("");
  r.failure.worst = {"O[b=0,i=1,h=2,e=3] (V scaled)", 1.0 / 3, -inf, 1e-300, inf, element_index{0, 2, 1, 3}};
  r.failure.prob_worst = {"a row sum", 0, 0, 0, 0};
  r.reproduce = "rc";
  attn_case c = parse_line("ATTN(b=1,hq=1,hkv=1,lq=2,lk=3,d=4,dv=4,seed=5)");
  materialize(c);
  r.counterexample = c;
  heat_map m;
  m.rows = 1, m.cols = 2, m.ratio = {0.5, std::nan("")}, m.worst_where = "O[b=0,i=0,h=0,e=0]", m.worst_ratio = inf;
  r.heat = m;
  const auto text = to_json(r, json_numbers::exact).dump();
  const law_report b = law_report_from_json(nlohmann::json::parse(text));
  EXPECT_EQ(to_json(b, json_numbers::exact).dump(), text);
  EXPECT_EQ(b.seconds, r.seconds);
  EXPECT_EQ(b.max_ratio, inf);
  EXPECT_TRUE(std::isnan(b.failure.max_ratio));
  EXPECT_TRUE(std::signbit(b.prob_max_ratio));
  EXPECT_EQ(b.failure.worst.got, -inf);
  EXPECT_EQ(b.failure.worst.at, r.failure.worst.at);
  EXPECT_FALSE(b.failure.prob_worst.at);
  EXPECT_EQ(b.shares[1].unjudged, 3);
  EXPECT_EQ(b.failure.kind, failure_kind::crash);
  ASSERT_TRUE(b.counterexample && b.heat);
  EXPECT_EQ(b.counterexample->q.bits, c.q.bits);
  EXPECT_TRUE(std::isnan(b.heat->ratio[1]));
  // The public form is the --json file's law: no "exact", null for a non-finite ratio.
  const auto pub = to_json(r, json_numbers::public_numbers);
  EXPECT_FALSE(pub.contains("exact"));
  EXPECT_TRUE(pub.at("max_ratio").is_null());
  EXPECT_EQ(pub.at("worst"), r.failure.worst.describe());
  EXPECT_THROW(number_from_json("infinity"), std::runtime_error);
}

TEST(gate, unknown_law_is_an_input_error) {
  run_config opt = run_defaults(entry_point::library);
  opt.only = {"no_such_law"};
  EXPECT_THROW(run_gate(opt, subject_job{}, {}), input_error);
}

TEST(gate, same_seed_same_cases_same_verdicts_same_files) {
  // A subject that fails (the example plugin with GQA's modulo bug), gated
  // twice on a pinned seed: the tables (minus timings) and every saved
  // counterexample file must be identical, bit for bit.
  auto run = [](const std::string& dir, std::vector<std::string>& files) {
    run_config opt = run_defaults(entry_point::library);
    subject_job job;
    job.subject = ATTNCHECK_PLUGIN_DIR "/libbroken_gqa_modulo.so";
#ifdef ATTNCHECK_DETERMINISM_CASES
    opt.cases = ATTNCHECK_DETERMINISM_CASES;
#else
    opt.cases = 25;
#endif
    opt.seed = 12345;
    opt.out_dir = dir;
    opt.isolate = false;
    std::ostringstream out;
    console_sink console(out);
    const gate_result r = run_gate(opt, job, {&console});
    EXPECT_GE(r.failed(), 1) << out.str();
    std::string table;
    for (const auto& l : r.reports)
      table += l.law + " " + std::to_string(l.cases) + " " + std::to_string(l.judged) + " " +
               std::to_string(static_cast<int>(l.v)) + " " + std::to_string(l.max_ratio) + " " + l.max_ratio_case + "\n";
    for (const auto& f : r.saved) files.push_back(slurp(f));
    return table;
  };
  std::vector<std::string> f1, f2;
  EXPECT_EQ(run(temp_dir("det1"), f1), run(temp_dir("det2"), f2));
  EXPECT_FALSE(f1.empty());
  EXPECT_EQ(f1, f2);
}

TEST(subject_instances, two_builtin_instances_keep_their_own_tiles) {
  const auto a = subject::load("builtin:k_tile=7");
  const auto b = subject::load("builtin:k_tile=64");
  const auto tiny = subject::load(builtin_tiny);
  attn_case c;
  c.lk = 128;
  // k_tile 7: ceil(128/7) = 19 blocks, one split chunk; k_tile 64: 2 blocks.
  EXPECT_EQ(a->key_blocks(c), 19);
  EXPECT_EQ(b->key_blocks(c), 2);
  EXPECT_EQ(a->hints().k_tile, 7);
  EXPECT_EQ(b->hints().k_tile, 64);
  EXPECT_EQ(tiny->hints().k_tile, 3);
  EXPECT_EQ(tiny->hints().split_keys, 6);
  // Loading b after a did not retune a.
  EXPECT_EQ(a->key_blocks(c), 19);
  // Both compute through their own tiles; results agree within the bound (gated elsewhere).
  c.b = c.hq = c.hkv = c.lq = 1;
  c.d = c.dv = 4;
  c.seed = 3;
  materialize(c);
  EXPECT_TRUE(a->attend(c).ok());
  EXPECT_TRUE(b->attend(c).ok());
}

TEST(subject_instances, v1_subject_has_the_production_size_hints) {
  const auto s = subject::wrap(naive_subject(), "naive-v1");  // the naive kernel's version 1 descriptor
  EXPECT_EQ(s->abi(), 1u);
  EXPECT_TRUE(s->default_hints());
  EXPECT_EQ(s->hints().lengths[0], 16);
  EXPECT_EQ(s->hints().lengths[6], 1024);
}

attncheck_instance absurd_instance(double u, double exp_ulps) {
  attncheck_instance d = f32_test_instance(ATTNCHECK_SUBJECT_ABI_VERSION_2, "absurd");
  d.compute_unit_roundoff = u;
  d.exp_ulps = exp_ulps;
  d.attend = [](void*, const attncheck_problem*, char*, size_t) { return 0; };
  return d;
}

TEST(subject_instances, absurd_declarations_are_refused_naming_the_field) {
  for (auto [u, e, field] : {std::tuple{0.5, 1.0, "compute_unit_roundoff"}, std::tuple{0x1p-24, 1e6, "exp_ulps"},
                             std::tuple{0.0, 1.0, "compute_unit_roundoff"}}) {
    attncheck_instance d = absurd_instance(u, e);
    try {
      subject::adopt(&d, "absurd");
      ADD_FAILURE() << "accepted u=" << u << " exp_ulps=" << e;
    } catch (const input_error& err) {
      EXPECT_NE(std::string(err.what()).find(field), std::string::npos) << err.what();
    }
  }
}

// ABI version 3 (docs/abi.md, "Compatibility tests"). Each instance records
// what the host handed its attend in `seen` (through state).
struct seen_problem {
  bool called = false;
  const attncheck_variants* variants = nullptr;
  const void* paged = nullptr;
  const void* ragged = nullptr;
};

attncheck_instance recording_instance(std::uint32_t abi, std::uint32_t features_v3, seen_problem& seen) {
  attncheck_instance d = absurd_instance(0x1p-24, 1.0);
  d.abi_version = abi;
  d.dtypes = 1u << ATTNCHECK_F32;
  d.state = &seen;
  d.attend = [](void* st, const attncheck_problem* p, char*, size_t) {
    auto& s = *static_cast<seen_problem*>(st);
    s.called = true;
    s.variants = p->variants;
    s.paged = p->paged;
    s.ragged = p->ragged;
    return 0;
  };
  d.features_v3 = features_v3;
  d.tanh_ulps = 2;
  return d;
}

attn_case sink_case() {
  attn_case c;
  c.lk = 3;
  c.variants.sinks = sink_kind::normal;
  c.seed = 5;
  materialize(c);
  return c;
}

TEST(subject_abi_v3, unknown_feature_and_claim_bits_are_refused_naming_the_bit) {
  seen_problem seen;
  for (auto [features, claims, field] : {std::tuple{0x400u, 0u, "features_v3"}, std::tuple{0u, 0x10u, "invariances_v3"},
                                         std::tuple{ATTNCHECK_FEATURE3_BACKWARD, 0u, "attend_backward"},
                                         std::tuple{0u, ATTNCHECK_CLAIM3_PAGE_PLACEMENT, "invariances_v3"},
                                         std::tuple{ATTNCHECK_FEATURE3_BIAS_GRAD, 0u, "features_v3"}}) {
    attncheck_instance d = recording_instance(ATTNCHECK_SUBJECT_ABI_VERSION_3, features, seen);
    d.invariances_v3 = claims;
    try {
      subject::adopt(&d, "v3");
      ADD_FAILURE() << "accepted features_v3=" << features << " invariances_v3=" << claims;
    } catch (const input_error& err) {
      EXPECT_EQ(err.field(), std::string("subject.") + field) << err.what();
    }
  }
  // tanh_ulps: accepted at ATTNCHECK_MAX_TANH_ULPS, refused one step past it (as abi_limits does for the others).
  attncheck_instance d = recording_instance(ATTNCHECK_SUBJECT_ABI_VERSION_3, ATTNCHECK_FEATURE3_SOFTCAP, seen);
  d.tanh_ulps = ATTNCHECK_MAX_TANH_ULPS;
  EXPECT_EQ(subject::adopt(&d, "v3")->tanh_ulps(), ATTNCHECK_MAX_TANH_ULPS);
  d.tanh_ulps = std::nextafter(ATTNCHECK_MAX_TANH_ULPS, 1e300);
  try {
    subject::adopt(&d, "v3");
    ADD_FAILURE() << "accepted tanh_ulps past the limit";
  } catch (const input_error& err) {
    EXPECT_EQ(err.field(), "subject.tanh_ulps");
  }
}

TEST(subject_abi_v3, a_version_2_instance_ignores_version_3_fields_and_gets_no_variant) {
  seen_problem seen;
  // Bits above FEATURE_THREADS and version 3 fields of a version 2 instance are ignored, as before version 3.
  attncheck_instance d = recording_instance(ATTNCHECK_SUBJECT_ABI_VERSION_2, ATTNCHECK_FEATURE3_SINKS | 0x400u, seen);
  d.features = 0x4000u;
  const auto s = subject::adopt(&d, "v2");
  EXPECT_EQ(s->abi(), 2u);
  EXPECT_EQ(s->features_v3(), 0u);
  EXPECT_EQ(s->cannot_take(sink_case()), "no attention sinks");
  attn_case plain;
  materialize(plain);
  EXPECT_TRUE(s->attend(plain).ok());
  EXPECT_TRUE(seen.called);
  EXPECT_EQ(seen.variants, nullptr);
  EXPECT_EQ(seen.paged, nullptr);
  EXPECT_EQ(seen.ragged, nullptr);
}

TEST(subject_abi_v3, an_instance_shorter_than_version_3_loads_without_its_features) {
  seen_problem seen;
  attncheck_instance d = recording_instance(ATTNCHECK_SUBJECT_ABI_VERSION_3, ATTNCHECK_FEATURE3_SINKS, seen);
  d.struct_size = static_cast<std::uint32_t>(ATTNCHECK_INSTANCE_V2_SIZE);  // built against an early version 3 header
  const auto s = subject::adopt(&d, "short v3");
  EXPECT_EQ(s->abi(), 3u);
  EXPECT_EQ(s->features_v3(), 0u);
  EXPECT_FALSE(s->cannot_take(sink_case()).empty());
  d.struct_size = static_cast<std::uint32_t>(ATTNCHECK_INSTANCE_V2_SIZE) - 8;  // shorter than version 2: refused
  EXPECT_THROW(subject::adopt(&d, "too short"), input_error);
}

// Version 4 (docs/abi.md "Version 4"): the scale_exact claim is read; unknown
// bits and the designed-but-unbuilt part (cache_append_v4) are refused, naming the field; a
// version 3 instance's version 4 fields and a short version 4 instance's are ignored.
TEST(subject_abi_v4, claims_are_read_and_unknown_bits_and_unbuilt_parts_refused) {
  seen_problem seen;
  attncheck_instance d = recording_instance(ATTNCHECK_SUBJECT_ABI_VERSION_4, 0, seen);
  d.invariances_v4 = ATTNCHECK_CLAIM4_SCALE_EXACT;
  auto s = subject::adopt(&d, "v4");
  EXPECT_EQ(s->abi(), 4u);
  EXPECT_TRUE(s->claims_v4(ATTNCHECK_CLAIM4_SCALE_EXACT));
  const auto refused = [&](attncheck_instance x, const std::string& field) {
    try {
      subject::adopt(&x, "v4");
      ADD_FAILURE() << "accepted an instance that sets " << field;
    } catch (const input_error& err) {
      EXPECT_EQ(err.field(), "subject." + field) << err.what();
    }
  };
  attncheck_instance x = d;
  x.invariances_v4 = 0x2u;
  refused(x, "invariances_v4");
  x = d;
  x.features_v4 = 0x1u;
  refused(x, "features_v4");
  x = d;
  x.cache_append_v4 = [](void*, void*, const attncheck_tensor*, const attncheck_tensor*, int64_t, const int64_t*,
                         const attncheck_quant*, char*, size_t) { return 0; };
  refused(x, "cache_append_v4");
  x = d;
  x.abi_version = 5;
  EXPECT_THROW(subject::adopt(&x, "v5"), input_error);
  // A version 3 instance never has its version 4 fields read.
  x = d;
  x.abi_version = ATTNCHECK_SUBJECT_ABI_VERSION_3;
  x.invariances_v4 = 0xffu;
  s = subject::adopt(&x, "v3 with stale v4 fields");
  EXPECT_EQ(s->abi(), 3u);
  EXPECT_FALSE(s->claims_v4(ATTNCHECK_CLAIM4_SCALE_EXACT));
  // Built against a version 3 header: struct_size ends before features_v4.
  x = d;
  x.struct_size = static_cast<std::uint32_t>(ATTNCHECK_INSTANCE_V3_SIZE);
  s = subject::adopt(&x, "short v4");
  EXPECT_EQ(s->abi(), 4u);
  EXPECT_FALSE(s->claims_v4(ATTNCHECK_CLAIM4_SCALE_EXACT));
  s.reset();  // before x, the instance it adopted, leaves scope
}

// Adopting d with its version 4 part (profile, conventions, limits) set to `value` is
// refused, naming "subject.FIELD".
template <class T>
void expect_part_refused(attncheck_instance d, const T* attncheck_instance::*part, const T& value, const std::string& field) {
  d.*part = &value;
  try {
    subject::adopt(&d, "v4");
    ADD_FAILURE() << "accepted a bad " << field;
  } catch (const input_error& err) {
    EXPECT_EQ(err.field(), "subject." + field) << err.what();
  }
}

// Static limits (docs/abi.md "Static limits"): read and printed; a case
// outside them is declined by the host (by_limit) without a call; fitting
// moves any case inside them; every field out of range, and the designed
// but unjudged bias and ALiBi limits, are refused naming the field.
TEST(subject_abi_v4, static_limits_are_read_enforced_fitted_and_checked) {
  seen_problem seen;
  attncheck_instance d = recording_instance(ATTNCHECK_SUBJECT_ABI_VERSION_4, 0, seen);
  auto s = subject::adopt(&d, "no limits");
  EXPECT_TRUE(s->limits().none());
  EXPECT_EQ(s->declared().limits, "");
  attncheck_limits l{};
  l.struct_size = sizeof l;
  d.limits = &l;
  s = subject::adopt(&d, "all-zero limits");
  EXPECT_TRUE(s->limits().none());
  l.max_head_dim = 64;
  l.head_dim_multiple = 8;
  l.min_lk = 2;
  l.max_group = 1;
  l.causal_lq_at_most_lk = 1;
  l.scale_signs = ATTNCHECK_SCALE_SIGN_POSITIVE;
  s = subject::adopt(&d, "limits");
  EXPECT_EQ(s->declared().limits, "D, Dv <= 64, D, Dv multiples of 8, causal Lq <= Lk, Lk >= 2, no GQA, scale positive");
  // Outside: declined by the host, the subject never called.
  const auto declined_key = [&](attn_case c) {
    materialize(c);
    seen.called = false;
    try {
      s->attend(c);
    } catch (const case_declined& e) {
      EXPECT_TRUE(e.by_limit);
      EXPECT_FALSE(seen.called);
      return e.key();
    }
    return std::string("(called: ") + (seen.called ? "yes" : "no") + ")";
  };
  attn_case in;
  in.d = in.dv = 16, in.lk = 4, in.lq = 3, in.causal = true;
  EXPECT_EQ(declined_key(in), "(called: yes)");
  attn_case c = in;
  c.dv = 72;
  EXPECT_EQ(declined_key(c), "limit max_head_dim");
  c = in, c.d = 12;
  EXPECT_EQ(declined_key(c), "limit head_dim_multiple");
  c = in, c.lk = 1, c.lq = 1;
  EXPECT_EQ(declined_key(c), "limit min_lk");
  c = in, c.lq = 5;
  EXPECT_EQ(declined_key(c), "limit causal_lq_at_most_lk");
  c = in, c.hq = 2;
  EXPECT_EQ(declined_key(c), "limit max_group");
  c = in, c.scale = 0.0f;
  EXPECT_EQ(declined_key(c), "limit scale_signs");
  // Fitting: every shape and scale lands inside, for lists and multiples alike.
  static_limits lists = s->limits();
  lists.head_dims = {16, 48};
  lists.dv_equals_d = true;
  lists.scale_signs = ATTNCHECK_SCALE_SIGN_NEGATIVE | ATTNCHECK_SCALE_SIGN_ZERO;
  lists.bias_dtypes = 1u << ATTNCHECK_F16;
  lists.alibi_max_bias = 4;
  lists.alibi_max_distance = 5;
  for (const static_limits& lim : {s->limits(), lists})
    for (std::int64_t dim : {1, 7, 8, 9, 63, 64, 65, 200})
      for (std::optional<float> scale : {std::optional<float>(), std::optional<float>(-0.5f), std::optional<float>(0.0f)}) {
        attn_case f;
        f.d = dim, f.dv = 300 - dim, f.lk = 1 + dim / 8, f.lq = 9, f.causal = true, f.hkv = 2, f.hq = 8, f.scale = scale;
        f.variants.bias_shape = {1, 1, 1, 1}, f.variants.bias_type = dim % 2 ? dtype::bf16 : dtype::f32;
        f.variants.alibi = dim % 3 ? alibi_kind::random : alibi_kind::zero;
        lim.fit_shape(f, true);
        lim.fit_causal(f);
        lim.fit_scale(f);
        lim.fit_variants(f);
        EXPECT_EQ(lim.outside(f), "") << to_line(f);
        if (lim.alibi_max_bias != 0) {
          EXPECT_EQ(f.variants.alibi, alibi_kind::standard);
          EXPECT_EQ(f.variants.alibi_max_bias, 4.0f);
        }
        if (scale && *scale < 0) {
          EXPECT_EQ(f.effective_scale(), lim.scale_signs & ATTNCHECK_SCALE_SIGN_NEGATIVE ? -0.5f : 0.5f);
        }
      }
  s.reset();
  const auto refused = [&](const attncheck_limits& q, const std::string& field) {
    expect_part_refused(d, &attncheck_instance::limits, q, "limits." + field);
  };
  attncheck_limits q = l;
  q.struct_size = 8;
  refused(q, "struct_size");
  q = l, q.max_head_dim = -1;
  refused(q, "max_head_dim");
  q = l, q.head_dim_multiple = 128;  // above max_head_dim: nothing taken
  refused(q, "head_dim_multiple");
  q = l, q.head_dims[0] = 64, q.head_dims[2] = 32;  // after the 0 that ends the list
  refused(q, "head_dims");
  q = l, q.head_dims[0] = 80;  // above max_head_dim
  refused(q, "head_dims");
  q = l, q.dv_equals_d = 2;
  refused(q, "dv_equals_d");
  q = l, q.min_lk = ATTNCHECK_MAX_LIMIT_MIN_LK + 1;
  refused(q, "min_lk");
  q = l, q.max_group = -1;
  refused(q, "max_group");
  q = l, q.scale_signs = 0x8u;
  refused(q, "scale_signs");
  q = l, q.bias_dtypes = 0x8u;
  refused(q, "bias_dtypes");
  q = l, q.alibi_max_distance = -1;
  refused(q, "alibi_max_distance");
  q = l, q.min_lk = 8, q.alibi_max_distance = 3;  // under min_lk - 1: no ALiBi case taken
  refused(q, "alibi_max_distance");
  q = l, q.alibi_slopes = ATTNCHECK_ALIBI_LIST;
  refused(q, "alibi_slopes");
  for (double m : {0.0, -8.0, 64.5, 0.1})  // outside (0, 64], or not an f32 value
    q = l, q.alibi_slopes = ATTNCHECK_ALIBI_GEOMETRIC, q.alibi_max_bias = m, refused(q, "alibi_max_bias");
  q = l, q.alibi_max_bias = 8;  // without the rule
  refused(q, "alibi_max_bias");
  q = l, q.bias_dtypes = 1u << ATTNCHECK_F16, q.alibi_slopes = ATTNCHECK_ALIBI_GEOMETRIC, q.alibi_max_bias = 8;
  q.alibi_max_distance = 2048;
  d.limits = &q;
  const std::string text = subject::adopt(&d, "f16 bias only")->limits().text();
  EXPECT_NE(text.find(", bias f16, ALiBi slopes from max_bias 8, ALiBi |j - p| <= 2048"), std::string::npos) << text;
  // Another max_bias: the rule's slopes at that max_bias are taken, max_bias 8's are not.
  q.alibi_max_bias = 4;
  s = subject::adopt(&d, "max_bias 4");
  EXPECT_NE(s->limits().text().find("ALiBi slopes from max_bias 4,"), std::string::npos) << s->limits().text();
  attn_case a = parse_line("ATTN(b=1,hq=4,hkv=4,lq=2,lk=3,d=16,dv=16,alibi=standard,alibi_max_bias=4)");
  EXPECT_EQ(s->limits().outside(a), "");
  a.variants.alibi_max_bias = 8;
  EXPECT_EQ(s->limits().outside(a), "limit alibi_slopes: standard slopes of max_bias 8, not max_bias 4's");
  s.reset();
}

// The slope rule at another max_bias: heads 0..n-1 get 2^(-m (h+1) / n), the
// rest the odd-indexed slopes of 2n heads; the recipe on the line and in the
// case file only where m is not 8.
TEST(case_form, alibi_max_bias_draws_the_rules_slopes_and_survives_the_line_and_the_file) {
  attn_case c = parse_line("ATTN(b=1,hq=6,hkv=1,lq=1,lk=2,d=1,dv=1,alibi=standard,alibi_max_bias=4)");
  materialize(c);
  const double want[] = {std::exp2(-1.0), std::exp2(-2.0), std::exp2(-3.0), std::exp2(-4.0), std::exp2(-0.5), std::exp2(-1.5)};
  for (int h = 0; h < 6; ++h) EXPECT_EQ(c.variants.alibi_slopes[static_cast<std::size_t>(h)], static_cast<float>(want[h])) << h;
  EXPECT_NE(to_line(c).find(",alibi=standard,alibi_max_bias=4"), std::string::npos) << to_line(c);
  case_record r;
  r.c = c;
  const attn_case back = parse_case_file(format_case_file(r)).c;
  EXPECT_EQ(back.variants.alibi_max_bias, 4.0f);
  EXPECT_EQ(back.variants.alibi_slopes, c.variants.alibi_slopes);
  attn_case eight = parse_line("ATTN(b=1,hq=6,hkv=1,lq=1,lk=2,d=1,dv=1,alibi=standard)");
  EXPECT_EQ(to_line(eight).find("alibi_max_bias"), std::string::npos);
  for (const char* bad : {"ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1,alibi_max_bias=4)",
                          "ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1,alibi=random,alibi_max_bias=4)",
                          "ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1,alibi=standard,alibi_max_bias=65)"}) {
    try {
      parse_line(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const input_error& e) {
      EXPECT_EQ(e.field(), "alibi_max_bias") << e.what();
    }
  }
}

// The stage-wise profile (docs/abi.md "Stage-wise precision profile"): NULL and
// all-zero are the one-u declaration; a declared stage reaches the bound and
// the header; every field out of its range is refused, naming it.
TEST(subject_abi_v4, a_profile_is_read_checked_and_printed) {
  seen_problem seen;
  attncheck_instance d = recording_instance(ATTNCHECK_SUBJECT_ABI_VERSION_4, 0, seen);
  auto s = subject::adopt(&d, "no profile");
  EXPECT_TRUE(s->profile().is_default());
  EXPECT_EQ(s->declared().profile, "");
  attncheck_profile p{};
  p.struct_size = sizeof p;
  d.profile = &p;
  s = subject::adopt(&d, "all-zero profile");
  EXPECT_TRUE(s->profile().is_default());
  EXPECT_EQ(s->exp_ulps(), d.exp_ulps);
  EXPECT_EQ(s->declared().profile, "");
  p.p_format = ATTNCHECK_P_BF16;
  p.scale_mode = ATTNCHECK_SCALE_AFTER_DOT;
  p.qk_product_u = ATTNCHECK_EXACT;
  p.exp_ulps = ATTNCHECK_EXACT;
  s = subject::adopt(&d, "bf16 P");
  EXPECT_EQ(s->profile().p_u, 0x1p-8);
  EXPECT_TRUE(s->profile().exact_products);
  EXPECT_EQ(s->profile().scale, scale_mode::after_dot);
  EXPECT_EQ(s->exp_ulps(), 0.5);
  EXPECT_NE(s->declared().profile.find("P 2^-8 (row sum before the cast)"), std::string::npos) << s->declared().profile;
  EXPECT_NE(s->declared().profile.find("products exact, scale after the dot"), std::string::npos) << s->declared().profile;
  s.reset();
  const auto refused = [&](const attncheck_profile& q, const std::string& field) {
    expect_part_refused(d, &attncheck_instance::profile, q, "profile." + field);
  };
  attncheck_profile q = p;
  q.struct_size = 8;
  refused(q, "struct_size");
  q = p, q.qk_accum_u = 0.5;
  refused(q, "qk_accum_u");
  q = p, q.pv_accum_u = ATTNCHECK_EXACT;  // exact only for the products
  refused(q, "pv_accum_u");
  q = p, q.scale_mode = 9;
  refused(q, "scale_mode");
  q = p, q.exp_ulps = -3;
  refused(q, "exp_ulps");
  q = p, q.p_format = 9;
  refused(q, "p_format");
  q = p, q.p_format = ATTNCHECK_P_E4M3, q.p_factor = ATTNCHECK_P_FACTOR_POW2,
  q.p_factor_log2 = 8;  // 256 * 1 < 448, but 2 * 256 is not
  refused(q, "p_factor_log2");
  q = p, q.p_format = ATTNCHECK_P_E4M3, q.p_saturates = 2;
  refused(q, "p_saturates");
  {  // fp8 P with its factor, saturating or not: read, with or without fp8 inputs.
    attncheck_instance y = d;
    q = p, q.p_format = ATTNCHECK_P_E4M3, q.p_factor = ATTNCHECK_P_FACTOR_POW2, q.p_factor_log2 = 7, q.p_saturates = 1;
    y.profile = &q;
    s = subject::adopt(&y, "fp8 P");
    EXPECT_EQ(s->profile().p_u, 0x1p-4);
    EXPECT_EQ(s->profile().p_eta, 0x1p-9);
    EXPECT_NE(s->declared().profile.find("P 2^-4 times 2^7 (row sum before the cast)"), std::string::npos)
        << s->declared().profile;
    s.reset();
  }
  q = p, q.p_factor = ATTNCHECK_P_FACTOR_ROW;
  refused(q, "p_factor");
  q = p, q.p_format = ATTNCHECK_P_F16, q.p_factor = ATTNCHECK_P_FACTOR_POW2, q.p_factor_log2 = 15;
  refused(q, "p_factor_log2");
  q = p, q.p_format = ATTNCHECK_P_COMPUTE, q.row_sum = ATTNCHECK_ROW_SUM_AFTER_CAST;
  refused(q, "row_sum");
  q = p, q.p_saturates = 1;
  refused(q, "p_saturates");
  // A version 3 instance's profile field is never read.
  attncheck_instance x = d;
  x.abi_version = ATTNCHECK_SUBJECT_ABI_VERSION_3;
  q = p, q.scale_mode = 9;
  x.profile = &q;
  s = subject::adopt(&x, "v3 with a stale profile");
  EXPECT_TRUE(s->profile().is_default());
  s.reset();
}

// Conventions (docs/abi.md "Conventions"): the empty rows' values are read,
// stamped on every output and printed; the parts not judged yet are refused.
TEST(subject_abi_v4, conventions_are_read_and_the_unjudged_parts_refused) {
  seen_problem seen;
  attncheck_instance d = recording_instance(ATTNCHECK_SUBJECT_ABI_VERSION_4, 0, seen);
  attncheck_conventions conv{sizeof conv, ATTNCHECK_EMPTY_O_NAN, ATTNCHECK_EMPTY_LSE_PLUS_INF, 0, 0};
  d.conventions = &conv;
  auto s = subject::adopt(&d, "conventions");
  EXPECT_EQ(s->empty_rows().o, empty_row_convention::o_kind::nan);
  EXPECT_EQ(s->empty_rows().lse, empty_row_convention::lse_kind::plus_inf);
  EXPECT_EQ(s->declared().conventions, "empty rows: O NaN, LSE +inf");
  attn_case c = parse_line("ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1)");
  materialize(c);
  EXPECT_EQ(s->attend(c).empty_rows.lse, empty_row_convention::lse_kind::plus_inf);
  conv = {sizeof conv, 0, 0, 0, 0};
  s = subject::adopt(&d, "the contract's conventions");
  EXPECT_TRUE(s->empty_rows().is_default());
  EXPECT_EQ(s->declared().conventions, "");
  s.reset();
  const auto refused = [&](const attncheck_conventions& c, const std::string& field) {
    expect_part_refused(d, &attncheck_instance::conventions, c, "conventions." + field);
  };
  refused({4, 0, 0, 0, 0}, "struct_size");
  refused({sizeof conv, 3, 0, 0, 0}, "empty_row_o");
  refused({sizeof conv, 0, 4, 0, 0}, "empty_row_lse");
  refused({sizeof conv, 0, 0, ATTNCHECK_MASKED_WEIGHTED_BY_ZERO + 1, 0}, "masked_slots");
  refused({sizeof conv, 0, 0, 0, ATTNCHECK_FLUSH_OUTPUTS | 0x8u}, "flush");
  // Unspecified empty rows are read and printed.
  conv = {sizeof conv, ATTNCHECK_EMPTY_O_UNSPECIFIED, ATTNCHECK_EMPTY_LSE_UNSPECIFIED, 0, 0};
  s = subject::adopt(&d, "unspecified empty rows");
  EXPECT_EQ(s->empty_rows().o, empty_row_convention::o_kind::unspecified);
  EXPECT_EQ(s->empty_rows().lse, empty_row_convention::lse_kind::unspecified);
  EXPECT_EQ(s->declared().conventions, "empty rows: O unspecified, LSE unspecified");
  s.reset();
  // Flushed intermediates and outputs are read and printed; with a backward pass they are refused.
  conv = {sizeof conv, 0, 0, 0, ATTNCHECK_FLUSH_INTERMEDIATES | ATTNCHECK_FLUSH_OUTPUTS};
  s = subject::adopt(&d, "flushing");
  EXPECT_TRUE(s->flushes(ATTNCHECK_FLUSH_INTERMEDIATES));
  EXPECT_TRUE(s->flushes(ATTNCHECK_FLUSH_OUTPUTS));
  EXPECT_EQ(s->declared().conventions, "subnormals flushed (intermediates, outputs)");
  s.reset();
  conv = {sizeof conv, 0, 0, 0, ATTNCHECK_FLUSH_INPUTS | ATTNCHECK_FLUSH_OUTPUTS};
  s = subject::adopt(&d, "flushing its inputs");
  EXPECT_TRUE(s->flushes(ATTNCHECK_FLUSH_INPUTS));
  EXPECT_FALSE(s->flushes(ATTNCHECK_FLUSH_INTERMEDIATES));
  EXPECT_EQ(s->declared().conventions, "subnormals flushed (inputs, outputs)");
  s.reset();
}

// An unspecified empty row is read as the contract's O = 0 and LSE = -inf in
// a row that gives no key and no sink any weight, and nowhere else.
TEST(subject_abi_v4, an_unspecified_empty_row_is_read_as_the_contracts_where_the_row_has_no_mass) {
  attn_case c = parse_line("ATTN(b=1,hq=1,hkv=1,lq=3,lk=1,d=1,dv=2,causal,f32)");
  materialize(c);
  const auto garbage = [&c] {
    subject_output out;
    out.o = tensor::contiguous(dtype::f32, {1, c.lq, 1, c.dv});
    for (std::int64_t i = 0; i < c.lq; ++i)
      for (std::int64_t e = 0; e < c.dv; ++e) out.o.set(0, i, 0, e, 3.0);
    out.lse.assign(static_cast<std::size_t>(c.lq), 11.0f);
    return out;
  };
  // Causal and bottom-right aligned: rows 0 and 1 precede the one key.
  EXPECT_TRUE(row_has_no_mass(c, 0, 0, 0));
  EXPECT_TRUE(row_has_no_mass(c, 0, 0, 1));
  EXPECT_FALSE(row_has_no_mass(c, 0, 0, 2));
  subject_output out = garbage();
  out.empty_rows.o = empty_row_convention::o_kind::unspecified;
  read_unspecified_as_contract(c, out);
  for (std::int64_t e = 0; e < c.dv; ++e) {
    EXPECT_EQ(out.o.at(0, 0, 0, e), 0.0);
    EXPECT_EQ(out.o.at(0, 1, 0, e), 0.0);
    EXPECT_EQ(out.o.at(0, 2, 0, e), 3.0);  // sees its key: never touched
  }
  EXPECT_EQ(out.lse[0], 11.0f);  // the LSE is declared the contract's: judged as written
  out = garbage();
  out.empty_rows.lse = empty_row_convention::lse_kind::unspecified;
  read_unspecified_as_contract(c, out);
  EXPECT_EQ(out.o.at(0, 0, 0, 0), 3.0);
  EXPECT_EQ(out.lse[0], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(out.lse[1], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(out.lse[2], 11.0f);
  // A finite sink gives the empty rows weight: O = 0 and LSE = the sink exactly, never excused.
  c.variants.sinks = sink_kind::normal;
  materialize(c);
  EXPECT_FALSE(row_has_no_mass(c, 0, 0, 0));
  out = garbage();
  out.empty_rows.o = empty_row_convention::o_kind::unspecified;
  out.empty_rows.lse = empty_row_convention::lse_kind::unspecified;
  read_unspecified_as_contract(c, out);
  EXPECT_EQ(out.o.at(0, 0, 0, 0), 3.0);
  EXPECT_EQ(out.lse[0], 11.0f);
}

// What a subject that weights masked slots by zero reads (masked_fill.hpp):
// every slot of Q, K and V finite, the used ones the case's own bits, the
// unused ones no larger than the largest used magnitude; a subject that
// skips them gets the case's NaN, as before.
struct slot_scan {
  int nonfinite = 0, used_changed = 0;
  double largest_unused = 0;
  const attn_case* c = nullptr;
};

TEST(subject_abi_v4, masked_slots_weighted_by_zero_get_finite_content) {
  attn_case c = parse_line("ATTN(b=2,hq=2,hkv=1,lq=3,lk=5,d=2,dv=3,causal,kpad=[2,4],f32,values=normal,poison=nan,seed=9)");
  materialize(c);
  for (const bool by_zero : {true, false}) {
    slot_scan scan;
    scan.c = &c;
    attncheck_instance d = absurd_instance(0x1p-24, 1.0);
    d.abi_version = ATTNCHECK_SUBJECT_ABI_VERSION_4;
    d.dtypes = 1u << ATTNCHECK_F32;
    d.features = ATTNCHECK_FEATURE_CAUSAL | ATTNCHECK_FEATURE_PADDING;
    d.state = &scan;
    d.attend = [](void* st, const attncheck_problem* p, char*, size_t) {
      auto& s = *static_cast<slot_scan*>(st);
      const slot_usage used = used_slots(*s.c);
      const auto look = [&](const attncheck_tensor& t, const tensor& own, bool is_used, std::int64_t b, std::int64_t r,
                            std::int64_t h, std::int64_t x) {
        const float got =
            static_cast<const float*>(t.data)[b * t.stride[0] + r * t.stride[1] + h * t.stride[2] + x * t.stride[3]];
        if (!std::isfinite(got)) ++s.nonfinite;
        if (is_used && std::bit_cast<std::uint32_t>(got) != own.bits_at(b, r, h, x)) ++s.used_changed;
        if (!is_used) s.largest_unused = std::max(s.largest_unused, static_cast<double>(std::fabs(got)));
      };
      for (std::int64_t b = 0; b < p->b; ++b) {
        for (std::int64_t i = 0; i < p->lq; ++i)
          for (std::int64_t h = 0; h < p->hq; ++h)
            for (std::int64_t x = 0; x < p->d; ++x) look(p->q, s.c->q, used.query_row(*s.c, b, i, h), b, i, h, x);
        for (std::int64_t j = 0; j < p->lk; ++j)
          for (std::int64_t x = 0; x < p->d; ++x) look(p->k, s.c->k, used.key(*s.c, b, j, 0), b, j, 0, x);
        for (std::int64_t j = 0; j < p->lk; ++j)
          for (std::int64_t e = 0; e < p->dv; ++e) look(p->v, s.c->v, used.key(*s.c, b, j, 0), b, j, 0, e);
      }
      return 0;
    };
    attncheck_conventions conv{sizeof conv, 0, 0, by_zero ? ATTNCHECK_MASKED_WEIGHTED_BY_ZERO : ATTNCHECK_MASKED_SKIPPED, 0};
    d.conventions = &conv;
    const auto s = subject::adopt(&d, "masked slots");
    EXPECT_EQ(s->weights_masked_by_zero(), by_zero);
    EXPECT_EQ(s->declared().conventions, by_zero ? "masked slots weighted by zero" : "");
    s->attend(c);
    EXPECT_EQ(scan.used_changed, 0);
    if (by_zero) {
      EXPECT_EQ(scan.nonfinite, 0);
      const finite_fill f = finite_fill_of(c);
      double largest = 0;
      for (const auto* m : {&f.q, &f.k, &f.v}) largest = std::max(largest, *std::max_element(m->begin(), m->end()));
      EXPECT_GT(scan.largest_unused, 0.0);
      EXPECT_LE(scan.largest_unused, largest);
    } else {
      EXPECT_GT(scan.nonfinite, 0) << "the case's NaN poison did not reach a subject that skips masked slots";
    }
  }
}

// The shift law's false alarm on the masked_zero panel kernel (seed 2): one
// visible key with K = (6e31, 2^56) and Q = (0.99, 1e17), scale 1e-30. A fill of
// the tensor's largest magnitude in every column formed a masked score of
// 1e17 * 6e31, past f32's range: +inf plus the mask's -inf is NaN. Per column,
// and scaled under 2^100, no score a fill forms overflows.
TEST(masked_fill, no_score_formed_from_a_fill_passes_2_to_the_100) {
  attn_case c;
  c.lk = 2;
  c.d = 2;
  c.key_len = {1};
  c.scale = 1e-30f;
  materialize(c);
  c.q.set_bits(0, 0, 0, 0, encode(c.type, 0.99)), c.q.set_bits(0, 0, 0, 1, encode(c.type, 1e17));
  c.k.set_bits(0, 0, 0, 0, encode(c.type, 6e31)), c.k.set_bits(0, 0, 0, 1, encode(c.type, 0x1p56));
  const finite_fill f = finite_fill_of(c);
  EXPECT_DOUBLE_EQ(f.k[1], 0x1p56 * f.k[0] / decode(c.type, encode(c.type, 6e31)));  // one power of two for every column
  const attn_case filled = with_finite_unused(c);
  double worst = 0;
  for (std::int64_t x = 0; x < c.d; ++x) worst += std::fabs(filled.q.at(0, 0, 0, x) * filled.k.at(0, 1, 0, x));
  EXPECT_LE(worst, 0x1p100);
  EXPECT_GT(worst, 0x1p90) << "the fill was scaled further down than the bound asks";
}

TEST(subject_abi_v4, a_decline_is_thrown_only_from_a_version_4_instance_that_wrote_nothing) {
  seen_problem seen;
  attn_case c;
  c.lk = 3;
  c.seed = 2;
  materialize(c);
  attncheck_instance d = recording_instance(ATTNCHECK_SUBJECT_ABI_VERSION_4, 0, seen);
  d.attend = [](void*, const attncheck_problem*, char* err, size_t n) {
    std::snprintf(err, n, "head size > 256: this kernel stops at 256");
    return ATTNCHECK_DECLINED;
  };
  auto s = subject::adopt(&d, "v4 declining");
  try {
    s->attend(c);
    ADD_FAILURE() << "a version 4 decline came back as an output";
  } catch (const case_declined& e) {
    EXPECT_EQ(e.key(), "head size > 256");
    EXPECT_EQ(e.reason, "head size > 256: this kernel stops at 256");
  }
  s.reset();
  // From a version 3 instance, 2 is a failed call, as before version 4.
  attncheck_instance d3 = d;
  d3.abi_version = ATTNCHECK_SUBJECT_ABI_VERSION_3;
  s = subject::adopt(&d3, "v3 returning 2");
  const subject_output failed = s->attend(c);
  EXPECT_EQ(failed.status, ATTNCHECK_DECLINED);
  EXPECT_FALSE(failed.ok());
  s.reset();
  // A decline that wrote O is a failed call too, and says why.
  attncheck_instance w = d;
  w.attend = [](void*, const attncheck_problem* p, char* err, size_t n) {
    static_cast<float*>(p->o)[0] = 1.0f;
    std::snprintf(err, n, "Lk < 2");
    return ATTNCHECK_DECLINED;
  };
  s = subject::adopt(&w, "v4 writes, then declines");
  const subject_output wrote = s->attend(c);
  EXPECT_FALSE(wrote.ok());
  EXPECT_NE(wrote.error.find("but wrote its outputs"), std::string::npos) << wrote.error;
  s.reset();
  EXPECT_EQ(case_declined("").key(), "(no reason given)");
  // Only the host counts under "limit ...": a subject's reason that reads so is marked as the subject's.
  EXPECT_EQ(case_declined("limit max_head_dim: D = 300 > 256", true).key(), "limit max_head_dim");
  EXPECT_TRUE(is_limit_decline(case_declined("limit max_head_dim: D = 300 > 256", true).key()));
  EXPECT_EQ(case_declined("limit of the kernel: D > 256").key(), "subject's limit of the kernel");
  EXPECT_FALSE(is_limit_decline(case_declined("limit of the kernel: D > 256").key()));
}

TEST(subject_abi_v3, a_declared_variant_is_handed_over_and_others_stay_null) {
  seen_problem seen;
  attncheck_instance d = recording_instance(ATTNCHECK_SUBJECT_ABI_VERSION_3, ATTNCHECK_FEATURE3_SINKS, seen);
  const auto s = subject::adopt(&d, "v3");
  const attn_case c = sink_case();
  ASSERT_EQ(s->cannot_take(c), "");
  EXPECT_TRUE(s->attend(c).ok());
  ASSERT_NE(seen.variants, nullptr);  // (dangling after the call: only compared)
  EXPECT_EQ(seen.paged, nullptr);
  EXPECT_EQ(seen.ragged, nullptr);
  attn_case windowed = c;
  windowed.variants.window_left = 1;
  EXPECT_EQ(s->cannot_take(windowed), "no sliding window");
}

TEST(subject_instances, key_blocks_are_capped_near_the_key_count) {
  attncheck_instance d = absurd_instance(0x1p-24, 1.0);
  d.key_blocks = [](void*, const attncheck_problem*) -> std::int64_t { return 1'000'000'000; };
  const auto s = subject::adopt(&d, "absurd");
  attn_case c;
  c.lk = 10;
  EXPECT_EQ(s->key_blocks(c), 20);
}

// The per-call watchdog (isolate.hpp): a call is overdue only past
// max(floor, factor x expected), expected scaled by work from earlier calls.
TEST(law_watch, a_call_is_overdue_only_past_its_limit) {
  using namespace std::chrono_literals;
  law_watch w({0.05, 10});
  EXPECT_FALSE(w.overdue());
  w.begin_call("attend", 1000);
  EXPECT_FALSE(w.overdue());  // the first call gets the floor, 50 ms
  EXPECT_NEAR(w.read().limit_seconds, 0.05, 1e-3);
  std::this_thread::sleep_for(80ms);
  EXPECT_TRUE(w.overdue());
  EXPECT_EQ(w.read().entry, "attend");
  w.end_call();
  EXPECT_FALSE(w.overdue());
  EXPECT_EQ(w.read().calls, 1);
  // 100x the work of a call that took >= 80 ms: expected >= 8 s, limit 10x that.
  w.begin_call("attend", 100'000);
  const auto big = w.read();
  EXPECT_GE(big.expected_seconds, 8.0);
  EXPECT_NEAR(big.limit_seconds, 10 * big.expected_seconds, 1e-6 * big.limit_seconds);
  std::this_thread::sleep_for(80ms);
  EXPECT_FALSE(w.overdue());  // past the floor, far within its own limit
  w.end_call();
  // The steps of a cached run rename the call in flight and keep its deadline.
  w.begin_call("attend_cached", 0);
  w.begin_call("cache_append", 0);
  EXPECT_EQ(w.read().entry, "attend_cached: cache_append");
  w.end_call();
  w.begin_call("cache_attend", 0);
  EXPECT_EQ(w.read().entry, "attend_cached: cache_attend");
  w.end_call();
  EXPECT_TRUE(w.read().in_call);
  std::this_thread::sleep_for(80ms);
  EXPECT_TRUE(w.overdue());  // no work: the floor
  w.end_call();
  EXPECT_FALSE(w.read().in_call);
}

TEST(law_watch, phases_are_timed_and_seen_across_fork) {
  using namespace std::chrono_literals;
  law_watch w({0.05, 10});
  const child_outcome co = run_isolated_all({[&w] {
                                              w.enter_phase(law_phase::checking);
                                              std::this_thread::sleep_for(100ms);
                                              w.enter_phase(law_phase::shrinking);
                                              w.begin_call("attend", 10);
                                              std::this_thread::sleep_for(60s);
                                              return std::string("never");
                                            }},
                                            30, 1, {}, [&w](std::size_t) { return w.overdue(); })
                               .front();
  EXPECT_TRUE(co.call_overdue);
  EXPECT_FALSE(co.completed);
  EXPECT_LT(co.seconds, 20);
  const auto st = w.read(co.ended);
  EXPECT_EQ(st.phase, law_phase::shrinking);
  EXPECT_GE(st.checking_seconds, 0.09);
  EXPECT_GE(st.shrinking_seconds, 0.04);
  EXPECT_TRUE(st.in_call);
  EXPECT_EQ(st.entry, "attend");
}

}  // namespace
}  // namespace attncheck

namespace attncheck {
namespace {

// The host knows subjects only through its registry: a kind registered at
// run time is loadable by name, and the message for an unknown name lists
// the registered kinds that carry a hint.
TEST(subject_registry, a_registered_kind_loads_and_unknown_names_list_the_kinds) {
  register_subject_kind({"naive_again", "naive_again", false, [](const std::string& spec, const std::string& options) {
                           if (!options.empty()) throw input_error("subject", "'" + spec + "': no options");
                           return subject::wrap(naive_subject(), spec);
                         }});
  const auto s = subject::load("naive_again");
  EXPECT_EQ(s->spec(), "naive_again");
  EXPECT_EQ(s->abi(), 1u);
  EXPECT_THROW(subject::load("naive_again:x=1"), input_error);
  try {
    subject::load("no_such_kind_or_file");
    FAIL() << "loaded a subject that does not exist";
  } catch (const input_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("builtin[:options], naive, python:MODULE:CALLABLE, naive_again or a path to a plugin .so[:options]"),
              std::string::npos)
        << what;
  }
}

}  // namespace
}  // namespace attncheck
