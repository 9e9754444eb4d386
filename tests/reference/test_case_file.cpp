// Case files: exact round trip of every bit pattern, strict rejection of
// malformed files, and the shipped examples under tests/cases/.
//
// ATTNCHECK_WRITE_CASES=1 rewrites the generated examples instead of
// comparing them (after a deliberate change to the generator or the format).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "attncheck/environment.hpp"
#include "attncheck/case_file.hpp"
#include "contract_test_support.hpp"

namespace attncheck {
namespace {

namespace fs = std::filesystem;
using contract_testing::expect_input_error;

const fs::path cases_dir = ATTNCHECK_CASES_DIR;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// A case whose every slot holds a pattern that a lossy format would change.
case_record special_record(dtype t, layout_kind layout) {
  attn_case c = parse_line("ATTN(b=2,hq=4,hkv=2,lq=2,lk=3,d=3,dv=2,scale=0.1,causal,kpad=[3,1],mask=1x4x1x3,values=dyadic)");
  c.type = t;
  c.layout = layout;
  materialize(c);
  const std::vector<std::uint32_t> f32_specials = {0x80000000u, 0x00000001u, 0x807fffffu, 0x7fa00001u, 0xffc12345u,
                                                   0x7f800000u, 0xff800000u, 0x3f800001u, 0x7f7fffffu};
  const std::vector<std::uint32_t> half_specials = {0x8000u, 0x0001u, 0x83ffu, 0x7c01u, 0xfe00u,
                                                    0x7c00u, 0xfc00u, 0x3c01u, 0x7bffu, 0x7fffu};
  const auto& specials = t == dtype::f32 ? f32_specials : half_specials;
  std::size_t n = 0;
  for (tensor* x : {&c.q, &c.k, &c.v})
    for (auto& b : x->bits) b = specials[n++ % specials.size()];
  case_record r;
  r.c = c;
  r.law = "masked.values_are_ignored";
  r.subject = "attnimpl";
  r.note = "worst element (0,1,2,0): expected 1.5 got nan; \"quoted\" \\ and unicode \xc3\xa9";
  return r;
}

TEST(case_file, round_trip_keeps_every_bit_pattern) {
  for (dtype t : {dtype::f32, dtype::f16, dtype::bf16})
    for (layout_kind l : {layout_kind::bshd, layout_kind::bhsd, layout_kind::padded}) {
      const case_record r = special_record(t, l);
      const std::string text = format_case_file(r);
      const case_record back = parse_case_file(text);
      for (auto [a, b] : {std::pair{&r.c.q, &back.c.q}, std::pair{&r.c.k, &back.c.k}, std::pair{&r.c.v, &back.c.v}}) {
        EXPECT_EQ(a->bits, b->bits) << name(t) << " " << name(l);
        EXPECT_EQ(a->shape, b->shape);
        EXPECT_EQ(a->stride, b->stride);
        EXPECT_EQ(a->offset, b->offset);
        EXPECT_EQ(b->type, t);
      }
      EXPECT_EQ(back.c.mask, r.c.mask);
      EXPECT_EQ(back.c.key_len, r.c.key_len);
      EXPECT_EQ(back.c.scale, 0.1f);
      EXPECT_EQ(back.law, r.law);
      EXPECT_EQ(back.subject, r.subject);
      EXPECT_EQ(back.note, r.note);
      EXPECT_EQ(fingerprint(back.c), fingerprint(r.c));
      EXPECT_EQ(format_case_file(back), text) << "formatting is a function of the case";
    }
}

// Contract 1.2 input forms travel in the file, so a paged or ragged failure replays from it.
TEST(case_file, round_trip_keeps_the_paged_and_ragged_form) {
  case_record r;
  r.c = parse_line(
      "ATTN(b=3,hq=2,hkv=1,lq=4,lk=40,d=2,dv=3,causal,kpad=[40,0,17],pages=16,page_order=in_order,spare_pages=2,"
      "table_tail=invalid,shared_pages=1,ragged,qlen=[4,0,1],f16,seed=9)");
  materialize(r.c);
  const std::string text = format_case_file(r);
  const case_record back = parse_case_file(text);
  EXPECT_EQ(to_line(back.c), to_line(r.c));
  EXPECT_EQ(fingerprint(back.c), fingerprint(r.c));
  EXPECT_EQ(format_case_file(back), text);
  // A bad value of each field is refused, naming the field.
  const std::pair<const char*, const char*> edits[] = {{"pages", "600"}, {"ragged", "1"}, {"table_tail", "\"nope\""}};
  for (const auto& [key, value] : edits) {
    std::string edited = text;
    const auto at = edited.find(std::string("\"") + key + "\":");
    ASSERT_NE(at, std::string::npos) << key << " in " << text;
    const auto from = edited.find(':', at) + 1, to = edited.find_first_of(",\n}", from);
    edited.replace(from, to - from, value);
    try {
      parse_case_file(edited);
      ADD_FAILURE() << "accepted " << key << "=" << value;
    } catch (const input_error& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  }
}

TEST(case_file, stores_storage_bits_as_hex_of_the_type_width) {
  attn_case c = parse_line("ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1,f16)");
  materialize(c);
  c.q.bits = {0x7c01u};
  c.k.bits = {0x8000u};
  c.v.bits = {0xabcdu};
  const std::string text = format_case_file({c, "", "", ""});
  EXPECT_NE(text.find("\"bits\":\"7c01\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"bits\":\"abcd\""), std::string::npos) << text;
  EXPECT_EQ(text.find("\"law\""), std::string::npos) << "empty fields are left out";
  EXPECT_NE(text.find("\"line\": \"ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1,f16)\""), std::string::npos);
}

TEST(case_file, reads_upper_case_hex) {
  std::string text = format_case_file({[] {
                                         attn_case c = parse_line("ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1)");
                                         materialize(c);
                                         c.v.bits = {0x7fabcdefu};
                                         return c;
                                       }(),
                                       "", "", ""});
  const auto at = text.find("7fabcdef");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 8, "7FABCDEF");
  EXPECT_EQ(parse_case_file(text).c.v.bits, std::vector<std::uint32_t>{0x7fabcdefu});
}

TEST(case_file, write_then_read_from_disk_is_exact_and_atomic) {
  const fs::path dir =
      fs::temp_directory_path() / ("attncheck_case_file_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                                   "_" + std::to_string(std::rand()));
  fs::create_directories(dir);
  const std::string path = (dir / "saved.json").string();
  const case_record r = special_record(dtype::bf16, layout_kind::padded);
  write_case_file(path, r);
  write_case_file(path, r);  // replacing an existing file works too
  EXPECT_EQ(fingerprint(read_case_file(path).c), fingerprint(r.c));
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 1u) << "no temporary file left behind";
  EXPECT_THROW(write_case_file((dir / "no_such_dir" / "x.json").string(), r), input_error);
  fs::remove_all(dir);
}

TEST(case_file, read_rejects_missing_files_directories_and_oversized_files) {
  const std::string missing = "/nonexistent/attncheck/case.json";
  expect_input_error([&] { read_case_file(missing); }, missing, "cannot open", missing);
  EXPECT_THROW(read_case_file(cases_dir.string()), input_error);
  case_limits tiny;
  tiny.max_bytes = 100;
  try {
    read_case_file((cases_dir / "two_keys_ln3.json").string(), tiny);
    FAIL() << "accepted";
  } catch (const input_error& e) {
    EXPECT_NE(std::string(e.what()).find("max_bytes=100"), std::string::npos) << e.what();
  }
  expect_input_error([&] { parse_case_file(slurp(cases_dir / "two_keys_ln3.json"), tiny); }, "file", "over max_bytes=100",
                     "two_keys_ln3.json's text, max_bytes=100");
}

TEST(case_file, errors_from_a_file_name_the_file) {
  const std::string path = (cases_dir / "malformed" / "future_version.json").string();
  expect_input_error([&] { read_case_file(path); }, "version", "future_version.json", path);
}

TEST(case_file, refuses_files_of_many_tiny_values_before_building_them) {
  std::string text = slurp(cases_dir / "two_keys_ln3.json");
  std::string many = "[0";
  for (int i = 0; i < 6000; ++i) many += ",0";
  many += "]";
  text.replace(text.find("\"b\": 1,"), 7, "\"b\": 1, \"padding\": " + many + ",");
  case_limits small;
  small.max_dim = 100;
  expect_input_error([&] { parse_case_file(text, small); }, "json", "more than 4196 values", "6001 padding values, max_dim=100");
  // Default limits: the same file parses as JSON and fails on the unknown field.
  EXPECT_THROW(
      try { parse_case_file(text); } catch (const input_error& e) {
        EXPECT_EQ(e.field(), "padding");
        throw;
      },
      input_error);
}

// Every file in tests/cases/malformed/ is one malformed class; its .expect
// sidecar holds a substring the error must contain ("field: message").
TEST(case_file, every_malformed_class_gives_its_one_line_error) {
  int files = 0;
  for (const auto& entry : fs::directory_iterator(cases_dir / "malformed")) {
    if (entry.path().extension() != ".json") continue;
    ++files;
    fs::path expect_path = entry.path();
    expect_path.replace_extension(".expect");
    ASSERT_TRUE(fs::exists(expect_path)) << expect_path;
    const std::string expect = trimmed(slurp(expect_path));
    ASSERT_FALSE(expect.empty()) << expect_path;
    try {
      read_case_file(entry.path().string());
      ADD_FAILURE() << entry.path().filename() << ": accepted";
    } catch (const input_error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(expect), std::string::npos)
          << entry.path().filename() << "\n  got:  " << what << "\n  want: " << expect;
      EXPECT_EQ(what.find('\n'), std::string::npos) << "one line: " << what;
    }
  }
  EXPECT_GE(files, 20);
}

// A mini fuzz over a real file: every truncation and many single-byte edits
// give a clean accept or an input_error, never another exception or a crash.
TEST(case_file, truncations_and_byte_edits_never_escape_as_other_errors) {
  const std::string text = slurp(cases_dir / "two_keys_ln3.json");
  ASSERT_GT(text.size(), 100u);
  int rejected = 0;
  auto attempt = [&](const std::string& s) {
    try {
      parse_case_file(s);
    } catch (const input_error&) {
      ++rejected;
    }
  };
  for (std::size_t n = 0; n < text.size() - 2; ++n) attempt(text.substr(0, n));
  EXPECT_EQ(rejected, static_cast<int>(text.size() - 2)) << "every strict prefix is malformed";
  for (std::size_t i = 0; i < text.size(); ++i)
    for (char ch : {'"', '{', ']', '9', '-', 'x', '\0', '\xff'}) {
      std::string s = text;
      s[i] = ch;
      attempt(s);
    }
}

// The shipped examples, regenerated from code: the files must match byte for
// byte, which pins materialize() and the writer across compilers too.
struct example {
  const char* file;
  case_record (*make)();
};

case_record two_keys_ln3() {
  // Logits 0 and f32(ln 3): weights 1/4 and 3/4 (to 4e-9), so with V = (0, 4)
  // O = 3 + 1.5e-8 and LSE = ln 4 + 1.5e-8 (tests/cases/README.md derives them).
  attn_case c = parse_line("ATTN(b=1,hq=1,hkv=1,lq=1,lk=2,d=1,dv=1,scale=1,f32,values=dyadic)");
  materialize(c);
  c.q.bits = {encode(dtype::f32, 1.0)};
  c.k.bits = {encode(dtype::f32, 0.0), encode(dtype::f32, std::log(3.0))};
  c.v.bits = {encode(dtype::f32, 0.0), encode(dtype::f32, 4.0)};
  return {c, "", "", "hand-made: logits 0 and f32(ln 3) = 1.0986123085; weights ~1/4, 3/4; O ~ 3, LSE ~ ln 4"};
}

case_record generated(const char* line, const char* note) {
  attn_case c = parse_line(line);
  materialize(c);
  return {c, "", "", note};
}

case_record gqa_causal_f16() {
  return generated("ATTN(b=1,hq=6,hkv=2,lq=2,lk=3,d=4,dv=3,causal,f16,seed=2026)",
                   "materialized: GQA with G=3 != Hkv=2, bottom-right causal with Lq < Lk");
}

case_record padded_bf16() {
  return generated("ATTN(b=2,hq=4,hkv=2,lq=3,lk=5,d=3,dv=2,kpad=[5,2],mask=2x1x3x5,bf16,layout=padded,poison=nan,seed=5)",
                   "materialized: padded layout (NaN gaps), key padding, boolean mask, NaN in every unused slot");
}

case_record masked_specials_f32() {
  // Special patterns in slots no visible pair uses (key 2 of batch 0 is
  // padding), plus -0 and a subnormal in used ones: the oracle must ignore the
  // former and take the latter exactly.
  attn_case c = parse_line("ATTN(b=1,hq=2,hkv=1,lq=2,lk=3,d=2,dv=2,kpad=[2],f32,values=dyadic,seed=5)");
  materialize(c);
  c.k.set_bits(0, 2, 0, 0, 0x7fa00001u);  // signalling NaN with payload
  c.k.set_bits(0, 2, 0, 1, 0xffc12345u);  // negative quiet NaN with payload
  c.v.set_bits(0, 2, 0, 0, 0x7f800000u);  // +inf
  c.v.set_bits(0, 2, 0, 1, 0xff800000u);  // -inf
  c.q.set_bits(0, 0, 1, 0, 0x80000000u);  // -0 in a used slot
  c.v.set_bits(0, 1, 0, 1, 0x00000001u);  // smallest subnormal in a used slot
  return {c, "masked.values_are_ignored", "", "hand-edited: NaN/inf in padded key 2, -0 and a subnormal in used slots"};
}

const example examples[] = {
    {"two_keys_ln3.json", two_keys_ln3},
    {"gqa_causal_f16.json", gqa_causal_f16},
    {"padded_bf16.json", padded_bf16},
    {"masked_specials_f32.json", masked_specials_f32},
};

TEST(case_file, shipped_examples_match_their_generator) {
  const bool rewrite = !environment("ATTNCHECK_WRITE_CASES").empty();
  for (const example& ex : examples) {
    const fs::path p = cases_dir / ex.file;
    const case_record r = ex.make();
    if (rewrite) write_case_file(p.string(), r);
    EXPECT_EQ(slurp(p), format_case_file(r)) << ex.file << " differs from its generator";
    EXPECT_EQ(fingerprint(read_case_file(p.string()).c), fingerprint(r.c)) << ex.file;
  }
}

TEST(case_file, two_keys_example_has_logits_zero_and_f32_ln3) {
  const attn_case c = read_case_file((cases_dir / "two_keys_ln3.json").string()).c;
  EXPECT_EQ(c.effective_scale(), 1.0f);
  EXPECT_EQ(c.q.at(0, 0, 0, 0), 1.0);
  EXPECT_EQ(c.k.at(0, 0, 0, 0), 0.0);
  EXPECT_EQ(c.k.at(0, 1, 0, 0), static_cast<double>(static_cast<float>(std::log(3.0))));
  EXPECT_NEAR(c.k.at(0, 1, 0, 0), std::log(3.0), 3e-8);
  EXPECT_EQ(c.v.at(0, 1, 0, 0), 4.0);
}

TEST(case_file, every_shipped_example_is_valid) {
  int n = 0;
  for (const auto& entry : fs::directory_iterator(cases_dir))
    if (entry.path().extension() == ".json") {
      EXPECT_NO_THROW(read_case_file(entry.path().string())) << entry.path();
      ++n;
    }
  EXPECT_GE(n, 4);
}

TEST(case_file, keeps_the_grad_recipe_and_leaves_it_out_when_unset) {
  attn_case c = parse_line("ATTN(b=1,hq=2,hkv=1,lq=2,lk=3,d=2,dv=2,causal,f16,grad=adversarial,seed=7)");
  materialize(c);
  const std::string text = format_case_file({c, "backward.gradients_within_bound_of_oracle", "naive", ""});
  EXPECT_NE(text.find("\"grad\": \"adversarial\""), std::string::npos) << text;
  const case_record back = parse_case_file(text);
  ASSERT_TRUE(back.c.grad.has_value());
  EXPECT_EQ(*back.c.grad, grad_kind::adversarial);
  EXPECT_EQ(to_line(back.c), to_line(c));
  c.grad.reset();
  const std::string forward = format_case_file({c, "", "", ""});
  EXPECT_EQ(forward.find("\"grad\""), std::string::npos) << forward;
  EXPECT_FALSE(parse_case_file(forward).c.grad.has_value());
  std::string bad = text;
  bad.replace(bad.find("\"adversarial\""), 13, "\"uniform\"");
  try {
    parse_case_file(bad);
    ADD_FAILURE() << "accepted grad=uniform";
  } catch (const input_error& e) {
    EXPECT_EQ(e.field(), "grad") << e.what();
  }
}

}  // namespace
}  // namespace attncheck
