// The data behind the HTML reports: where an element lies, the heat map of the
// worst (batch, head) from an element log, the writer's escaping, and a
// report drawn from its values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <limits>

#include "attncheck/check.hpp"
#include "attncheck/element_log.hpp"
#include "attncheck/report_html.hpp"

namespace attncheck {
namespace {

// The worst element a comparison keeps for `where`.
worst_element worst_of(const element_where& where, double expected, double got, double bound, double ratio) {
  return {where.text, expected, got, bound, ratio, where.at};
}

TEST(element_where, keeps_the_element_through_the_words_a_law_adds) {
  const element_where o = o_where(1, 2, 3, 4) + " (V * 3 vs 3 O)";
  EXPECT_EQ(o.text, "O[b=1,i=2,h=3,e=4] (V * 3 vs 3 O)");
  EXPECT_EQ(o.at, (element_index{1, 3, 2, 4}));
  const element_where prefixed = "chunk row 3 (position 7) " + o_where(0, 5, 1, 2);
  EXPECT_EQ(prefixed.text, "chunk row 3 (position 7) O[b=0,i=5,h=1,e=2]");
  EXPECT_EQ(prefixed.at, (element_index{0, 1, 5, 2}));
  const element_where lse = lse_where(2, 1, 3) + " (V scaled)";
  EXPECT_EQ(lse.text, "LSE[b=2,h=1,i=3] (V scaled)");
  EXPECT_EQ(lse.at, (element_index{2, 1, 3, -1}));
  // The LSE of a row named through one of its O elements.
  const element_where row_lse = lse_of_row("chunk row 0 (position 2) " + o_where(1, 4, 0, 0));
  EXPECT_EQ(row_lse.text, "LSE of chunk row 0 (position 2) O[b=1,i=4,h=0,e=0]");
  EXPECT_EQ(row_lse.at, (element_index{1, 0, 4, -1}));
  // A label names no element, whatever it reads like.
  EXPECT_FALSE(element_where("sum_j P[b=0,h=1,i=2,:]").at);
  EXPECT_FALSE(element_where(std::string("O[b=0,i=1,h=2,e=3]")).at);
  EXPECT_FALSE(lse_of_row("a row sum").at);
}

TEST(where_text, is_the_text_of_an_element) {
  for (const element_index at : {element_index{1, 2, 3, 4}, element_index{0, 5, 6, -1}}) {
    EXPECT_EQ(element_where(at).text, where_text(at));
    EXPECT_EQ(element_where(at).at, at);
  }
  EXPECT_EQ(where_text({1, 2, 3, 4}), "O[b=1,i=3,h=2,e=4]");
  EXPECT_EQ(where_text({1, 2, 3, -1}), "LSE[b=1,h=2,i=3]");
}

TEST(comparison, its_worst_element_carries_the_position_of_its_where) {
  comparison c;
  c.element(o_where(0, 1, 2, 3) + " (second run)", 1.0, 1.25, 0.5);
  EXPECT_EQ(c.worst.where, "O[b=0,i=1,h=2,e=3] (second run)");
  EXPECT_EQ(c.worst.at, (element_index{0, 2, 1, 3}));
  comparison sums;
  sums.element("sum_j P[b=0,h=1,i=2,:]", 1.0, 1.25, 0.5);
  EXPECT_FALSE(sums.worst.at);
}

TEST(heat_map, uses_the_structured_position_not_the_text) {
  element_log log;
  log.note(o_where(0, 0, 0, 0), 0.5);
  log.note(o_where(0, 0, 1, 0), 0.25);
  worst_element w{"a row sum", 0, 0, 0, 0.25};
  w.at = element_index{0, 1, 0, 0};
  const auto m = heat_map_of(log, w);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->h, 1);  // not the slice of the largest ratio (h = 0)
  EXPECT_EQ(m->worst_row, 0);
  EXPECT_EQ(m->worst_col, 0);
}

TEST(element_log, keeps_elements_only_while_open) {
  EXPECT_EQ(element_log::current(), nullptr);
  {
    element_log outer;
    EXPECT_EQ(element_log::current(), &outer);
    {
      element_log inner;
      EXPECT_EQ(element_log::current(), &inner);
    }
    EXPECT_EQ(element_log::current(), &outer);
  }
  EXPECT_EQ(element_log::current(), nullptr);
}

TEST(element_log, a_comparison_notes_every_element_it_judges) {
  element_log log;
  comparison c;
  c.element(o_where(0, 0, 0, 0), 1.0, 1.0, 0.5);                                      // exact: ratio 0
  c.element(o_where(0, 1, 0, 0), 1.0, 1.25, 0.5);                                     // ratio 0.5
  c.element(o_where(0, 1, 0, 1), 1.0, 2.0, std::numeric_limits<double>::infinity());  // not judged
  c.exact(lse_where(0, 0, 1), 1, 2, 1.0, 2.0);                                        // bits differ: inf
  ASSERT_EQ(log.entries().size(), 4u);
  EXPECT_EQ(log.entries()[1].ratio, 0.5);
  EXPECT_TRUE(std::isnan(log.entries()[2].ratio));
  EXPECT_TRUE(std::isinf(log.entries()[3].ratio));
}

TEST(heat_map, is_the_worst_slice_with_the_largest_ratio_per_element_and_the_worst_marked) {
  element_log log;
  log.note(o_where(0, 0, 1, 0), 0.1);
  log.note(o_where(0, 0, 1, 1), 0.2);
  log.note(o_where(0, 1, 1, 0), 0.3);
  log.note(o_where(0, 1, 1, 1), 4.0);
  log.note(o_where(0, 1, 1, 1), 1.0);  // a second comparison of the same element: the largest stays
  log.note(lse_where(0, 1, 0), 0.05);
  log.note(o_where(1, 0, 0, 0), 9.0);  // another (b, h): not in the map
  const worst_element w = worst_of(o_where(0, 1, 1, 1) + " (second run)", 0, 0, 0, 4.0);
  const auto m = heat_map_of(log, w);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->b, 0);
  EXPECT_EQ(m->h, 1);
  EXPECT_EQ(m->rows, 2);
  EXPECT_EQ(m->cols, 3);  // e = 0, 1 and LSE
  EXPECT_TRUE(m->lse_column);
  EXPECT_EQ(m->ratio[0 * 3 + 0], 0.1);
  EXPECT_EQ(m->ratio[1 * 3 + 1], 4.0);
  EXPECT_EQ(m->ratio[0 * 3 + 2], 0.05);
  EXPECT_TRUE(std::isnan(m->ratio[1 * 3 + 2]));  // no LSE noted for row 1
  EXPECT_EQ(m->worst_row, 1);
  EXPECT_EQ(m->worst_col, 1);
  EXPECT_EQ(m->worst_where, w.where);
}

TEST(heat_map, marks_an_lse_worst_in_the_last_column) {
  element_log log;
  log.note(o_where(0, 0, 0, 0), 0.0);
  log.note(lse_where(0, 0, 0), std::numeric_limits<double>::infinity());
  const auto m = heat_map_of(log, worst_of(lse_where(0, 0, 0), 1, 2, 0, std::numeric_limits<double>::infinity()));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->cols, 2);
  EXPECT_EQ(m->worst_row, 0);
  EXPECT_EQ(m->worst_col, 1);
}

TEST(heat_map, keeps_a_window_around_the_worst_element_of_a_large_slice) {
  element_log log;
  for (std::int64_t i = 0; i < 300; ++i)
    for (std::int64_t e = 0; e < 200; e += 7) log.note(o_where(0, i, 0, e), 0.01);
  log.note(o_where(0, 250, 0, 196), 2.0);
  const auto m = heat_map_of(log, worst_of(o_where(0, 250, 0, 196), 0, 0, 0, 2.0));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->all_rows, 300);
  EXPECT_EQ(m->all_cols, 197);
  EXPECT_EQ(m->rows, heat_map::max_side);
  EXPECT_EQ(m->cols, heat_map::max_side);
  ASSERT_GE(m->worst_row, 0);
  EXPECT_EQ(m->row0 + m->worst_row, 250);
  EXPECT_EQ(m->col0 + m->worst_col, 196);
  EXPECT_EQ(m->ratio[static_cast<std::size_t>(m->worst_row * m->cols + m->worst_col)], 2.0);
}

TEST(heat_map, is_none_when_nothing_was_noted) {
  element_log log;
  EXPECT_FALSE(heat_map_of(log, worst_of(o_where(0, 0, 0, 0), 0, 0, 0, 0)));
}

// A histogram carries its law's full name, a count axis and a legend of its colours.
TEST(html, histogram_has_the_full_title_a_count_axis_and_a_legend) {
  std::array<std::int64_t, ratio_bins> counts{};
  counts[1] = 120, counts[8] = 3, counts[ratio_bins - 1] = 1;
  const std::string svg =
      html::ratio_histogram_svg("differential.output_within_bound_of_oracle", counts, html::histogram_of::cases, false);
  EXPECT_NE(svg.find(">differential.</tspan>"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">output_within_bound_of_oracle</tspan>"), std::string::npos) << svg;
  EXPECT_EQ(svg.find("\xe2\x80\xa6"), std::string::npos) << "the title is cut";
  EXPECT_NE(svg.find("class=\"count-axis\" x="), std::string::npos);
  EXPECT_NE(svg.find(">120</text>"), std::string::npos) << "the count axis tops at the largest bin";
  EXPECT_NE(svg.find(">over the bound</text>"), std::string::npos);
  EXPECT_NE(svg.find(">0.9-1</text>"), std::string::npos);
  // A gate's law counts cases, each by its largest ratio; a campaign counts elements.
  EXPECT_NE(svg.find(">124 cases</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find("middle\">cases</text>"), std::string::npos) << "the count axis names its unit";
  EXPECT_NE(svg.find(">each case&#39;s largest observed/bound</text>"), std::string::npos) << svg;
  EXPECT_EQ(svg.find("elements"), std::string::npos) << svg;
  const std::string per_element = html::ratio_histogram_svg("bf16", counts, html::histogram_of::elements, true);
  EXPECT_NE(per_element.find(">124 elements (bar heights: log scale)</text>"), std::string::npos) << per_element;
  EXPECT_NE(per_element.find(">each element&#39;s observed/bound</text>"), std::string::npos) << per_element;
}

// A NaN the subject wrote is drawn and named as a NaN: the comparison notes
// what was written, the map keeps it, and the cell, its title, the small map's
// values and the legend say "NaN" (its ratio alone, inf, would read as any
// infinite error). An infinity written where none was allowed is named too.
TEST(html, a_heat_map_names_the_nan_and_infinite_outputs) {
  element_log log;
  comparison c;
  c.element(o_where(0, 0, 0, 0), 0.5, 0.5, 1e-6);
  c.element(o_where(0, 0, 0, 1), 0.5, std::nan(""), 1e-6);
  c.element(o_where(0, 1, 0, 0), 0.5, std::numeric_limits<double>::infinity(), 1e-6);
  c.element(o_where(0, 1, 0, 1), 0.5, 0.5 + 2e-6, 1e-6);
  ASSERT_FALSE(c.pass);
  const auto m = heat_map_of(log, c.worst);
  ASSERT_TRUE(m);
  ASSERT_EQ(m->got.size(), 4u);
  EXPECT_EQ(m->got, std::string{".n.."}.replace(2, 1, 1, heat_map::inf));
  EXPECT_EQ(m->row0 + m->worst_row, 0) << "the NaN is the worst element: " << c.worst.where;
  EXPECT_EQ(m->col0 + m->worst_col, 1);
  const std::string svg = html::heat_map_svg(*m);
  EXPECT_NE(svg.find("class=\"nan-output\""), std::string::npos) << svg;
  EXPECT_NE(svg.find("class=\"inf-output\""), std::string::npos) << svg;
  EXPECT_NE(svg.find("i=0, e=1: NaN output (error/bound inf)"), std::string::npos) << svg;
  EXPECT_NE(svg.find("e=1 NaN output"), std::string::npos) << "the small map's values name it";
  EXPECT_NE(svg.find("O[b=0,i=0,h=0,e=1], NaN output"), std::string::npos) << "the worst element's line names it";
  EXPECT_NE(svg.find(">NaN out</text>"), std::string::npos) << "the legend has it";
  EXPECT_NE(svg.find("e=1 2<"), std::string::npos) << "a finite cell keeps its ratio";
}

// A 1x1 heat map writes its one value.
TEST(html, a_one_cell_heat_map_shows_its_value) {
  element_log log;
  log.note(o_where(0, 0, 0, 0), 2258468.96);
  const auto m = heat_map_of(log, worst_of(o_where(0, 0, 0, 0), -0.25, -2, 7.7e-7, 2258468.96));
  ASSERT_TRUE(m);
  const std::string svg = html::heat_map_svg(*m);
  EXPECT_NE(svg.find("class=\"cell-values\""), std::string::npos) << svg;
  EXPECT_NE(svg.find("e=0 2.258e+06"), std::string::npos) << svg;
}

TEST(html, escapes_text_and_attributes) {
  EXPECT_EQ(html::escape("<b a=\"x\">'&'</b>"), "&lt;b a=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/b&gt;");
  EXPECT_EQ(html::escape(std::string("a\x01z")), "a z");
}

TEST(html, draws_the_bench_report_from_its_values) {
  html::bench_report r;
  r.threads = 2;
  r.peak_gflops = 47.4, r.peak_gflops_1 = 33.7, r.bandwidth_gbs = 7.5, r.bandwidth_gbs_1 = 7.7;
  r.cases = {{"prefill B=1 H=16 L=2048 D=128", "prefill", 1, 29.8, 18.0, 0, 24.29},
             {"decode GQA Hq=32 Hkv=8 Lk=512 D=128 f32", "decode", 2, 0.23, 36.5, 18.3, 0.38}};
  r.table = "attnimpl bench: 2 threads <table>\n";
  const std::string path = ::testing::TempDir() + "bench.html";
  html::write_bench_html(path, r);
  std::ifstream f(path);
  const std::string page((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  for (const char* text : {"prefill: GFLOP/s against the FMA peak", "decode: GB/s against the read bandwidth",
                           "prefill B=1 H=16 L=2048 D=128 (1 thread)", "decode GQA Hq=32 Hkv=8 Lk=512 D=128 f32",
                           "speed-up over the naive f32 baseline", "attnimpl bench: 2 threads &lt;table&gt;"})
    EXPECT_NE(page.find(text), std::string::npos) << "missing: " << text;
  std::remove(path.c_str());
}

}  // namespace
}  // namespace attncheck
