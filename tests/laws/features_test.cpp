// The contract's feature table (attncheck/features.hpp) is the one list of
// features: a feature registered here, and nowhere else, appears in the
// one-line form (written and read back), in validation (a bad value refused
// naming its key), in the gate's stats keys and floors, in the console's
// declaration header and --stats, and in the Python package's feature names
// and keywords. A consumer that kept its own list would miss it.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "attncheck/features.hpp"
#include "attncheck/gate.hpp"
#include "attncheck/generators.hpp"
#include "attncheck/report.hpp"
#include "attncheck/subject_host.hpp"

#ifdef ATTNCHECK_FEATURES_TEST_PYTHON
#include <pybind11/embed.h>

#include "feature_table.hpp"

PYBIND11_EMBEDDED_MODULE(attncheck_features, m) { m.def("contract_features", &attncheck::python::contract_feature_dicts); }
#endif

namespace attncheck {
namespace {

// The dummy variant's state: a test cannot add a field to attn_case, so the
// one case in flight keeps its value here (0: off). A real feature keeps its
// state in the case (score_variants, input_form).
int dummy_value = 0;
constexpr std::uint32_t dummy_bit = 0x800;  // past ATTNCHECK_FEATURE3_KNOWN

contract_feature dummy() {
  contract_feature f;
  f.name = "dummy";
  f.kind = feature_kind::variant;
  f.abi_word = 3;
  f.bit = dummy_bit;
  f.label = "dummy variant";
  f.cannot_take = "no dummy";
  f.keys = {"dummy"};
  f.share = 0.5;
  f.python_keywords = {"dummy_kw"};
  f.present = [](const attn_case&) { return dummy_value != 0; };
  f.clear = [](attn_case&) { dummy_value = 0; };
  f.write = [](const attn_case&, std::string& s) {
    if (dummy_value) s += ",dummy=" + std::to_string(dummy_value);
  };
  f.read = [](std::string_view key, std::string_view value, bool flag, attn_case&, const case_limits&) {
    if (flag) throw input_error(std::string(key), "needs a value (dummy=...)");
    try {
      dummy_value = std::stoi(std::string(value));
    } catch (const std::exception&) {
      throw input_error("dummy", "'" + std::string(value) + "' is not an integer");
    }
  };
  f.check = [](const attn_case&, bool, const case_limits&) {
    if (dummy_value < 0 || dummy_value > 9) throw input_error("dummy", "=" + std::to_string(dummy_value) + " is outside [0, 9]");
  };
  return f;
}

// Registered before main: before any consumer reads the table.
const bool registered = (register_contract_feature(dummy()), true);

TEST(features, the_table_finds_a_feature_by_name_bit_and_key) {
  ASSERT_TRUE(registered);
  ASSERT_NE(find_feature("softcap"), nullptr);
  EXPECT_EQ(find_feature("softcap")->bit, ATTNCHECK_FEATURE3_SOFTCAP);
  EXPECT_EQ(find_feature(3, ATTNCHECK_FEATURE3_PAGED)->name, "paged");
  EXPECT_EQ(feature_of_key("bias_values")->name, "bias");
  EXPECT_EQ(feature_of_key("dummy")->name, "dummy");
  EXPECT_EQ(find_feature(3, dummy_bit)->name, "dummy");
}

TEST(features, a_registered_feature_is_written_and_read_back_by_the_one_line_form) {
  attn_case c;
  c.variants.softcap = 2;
  dummy_value = 3;
  const std::string line = to_line(c);
  EXPECT_NE(line.find(",softcap=2,dummy=3,f32"), std::string::npos) << line;
  dummy_value = 0;
  const attn_case back = parse_line(line);
  EXPECT_EQ(dummy_value, 3);
  EXPECT_EQ(to_line(back), line);
  EXPECT_EQ(variant_bits(back), ATTNCHECK_FEATURE3_SOFTCAP | dummy_bit);
  dummy_value = 0;
}

TEST(features, a_bad_value_of_a_registered_feature_is_refused_naming_its_key) {
  const auto field_of = [](const std::string& line) {
    try {
      parse_line(line);
    } catch (const input_error& e) {
      dummy_value = 0;
      return e.field() + ": " + e.what();
    }
    dummy_value = 0;
    return std::string("accepted");
  };
  // The reader refuses what it cannot parse; validation refuses a value out of range.
  EXPECT_EQ(field_of("ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1,dummy=x,f32)"), "dummy: dummy: 'x' is not an integer");
  EXPECT_EQ(field_of("ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1,dummy=12,f32)"), "dummy: dummy: =12 is outside [0, 9]");
  // And the unknown-field message names it among the known fields.
  const std::string unknown = field_of("ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1,nope=1,f32)");
  EXPECT_NE(unknown.find("descales, dummy, f32/f16/bf16"), std::string::npos) << unknown;
}

TEST(features, a_registered_variant_has_stats_keys_and_floors) {
  const auto s = subject::load("naive");
  attn_case c;
  c.variants.window_left = 2;
  dummy_value = 3;
  case_stats st;
  st.add(c, *s);
  dummy_value = 0;
  EXPECT_EQ(st.counts["variant dummy"], 1);
  EXPECT_EQ(st.counts["variants window+dummy"], 1);
  bool floor = false, pair = false;
  for (const share_floor& f : distribution_floors()) {
    floor = floor || (std::string(f.key) == "variant dummy" && f.variant && f.floor == 0.5 * 0.5 / 2);
    pair = pair || std::string(f.key) == "variants softcap+dummy";
  }
  EXPECT_TRUE(floor);
  EXPECT_TRUE(pair);
}

TEST(features, the_console_names_a_registered_variant_in_the_declaration_and_its_stats) {
  gate_result g;
  g.abi = 3;
  g.declared.u = 0x1p-24;
  g.declared.exp_ulps = 1;
  g.declared.nb_at = {{1, 1}};
  g.declared.features_v3 = ATTNCHECK_FEATURE3_WINDOW | dummy_bit;
  std::ostringstream header;
  print_declaration(g, header);
  EXPECT_NE(header.str().find("variants (contract 1.1): window, dummy variant;"), std::string::npos) << header.str();
  // --stats prints the shares of the variants declared, and only those.
  std::ostringstream stats;
  print_stats(g, stats);
  EXPECT_NE(stats.str().find("variant dummy "), std::string::npos) << stats.str();
  EXPECT_NE(stats.str().find("variants window+dummy "), std::string::npos) << stats.str();
  EXPECT_EQ(stats.str().find("variant softcap "), std::string::npos) << stats.str();
}

#ifdef ATTNCHECK_FEATURES_TEST_PYTHON
// The Python package, as the bridge plugin's embedded interpreter loads it.
TEST(features, the_python_package_takes_a_registered_feature_and_its_keyword) {
  pybind11::scoped_interpreter python;
  pybind11::module_::import("sys").attr("path").attr("insert")(0, ATTNCHECK_PYTHON_PACKAGE_DIR);
  const auto bridge = pybind11::module_::import("attncheck._bridge");
  EXPECT_EQ(bridge.attr("FEATURES3")["dummy"].cast<std::uint32_t>(), dummy_bit);
  EXPECT_EQ(bridge.attr("VARIANT_KEYWORDS")["dummy"].cast<std::string>(), "dummy_kw");
  const auto names = pybind11::module_::import("attncheck").attr("_features")();
  EXPECT_TRUE(names.contains("dummy"));
}
#endif

}  // namespace
}  // namespace attncheck
