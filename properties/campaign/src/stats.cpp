// The campaign's statistics: the kept worst cases, folding the stats of
// other cases in, and the features a case counts under.
#include <algorithm>
#include <iterator>

#include "attncheck/features.hpp"
#include "campaign_internal.hpp"

namespace attncheck {

namespace campaign_detail {

namespace {

// Is (ra, ia) ranked before (rb, ib) among the worst? The larger ratio
// first, NaN last, ties: the lower case index.
bool ranks_before(double ra, std::int64_t ia, double rb, std::int64_t ib) {
  if (std::isnan(ra) != std::isnan(rb)) return std::isnan(rb);
  if (!std::isnan(ra) && ra != rb) return ra > rb;
  return ia < ib;
}

}  // namespace

// Keeps the highest ranked by ranks_before.
void keep_worst(campaign_stats& s, double ratio, std::int64_t index, const std::string& what) {
  std::size_t at = 0;
  while (at < s.worst.size() && !ranks_before(ratio, index, s.worst[at].first, s.worst_index[at])) ++at;
  if (at >= campaign_stats::worst_kept) return;
  s.worst.insert(s.worst.begin() + static_cast<std::ptrdiff_t>(at), {ratio, what});
  s.worst_index.insert(s.worst_index.begin() + static_cast<std::ptrdiff_t>(at), index);
  if (s.worst.size() > campaign_stats::worst_kept) s.worst.pop_back(), s.worst_index.pop_back();
}

}  // namespace campaign_detail

const std::vector<std::string>& campaign_features() {
  static const std::vector<std::string> rows = [] {
    std::vector<std::string> v;
    for (const contract_feature& f : contract_features())
      if (f.kind == feature_kind::variant) v.push_back(f.name);
    v.push_back("none");
    return v;
  }();
  return rows;
}

std::vector<std::string> features_of(const attn_case& c) {
  std::vector<std::string> v;
  for (const contract_feature& f : contract_features())
    if (f.kind == feature_kind::variant && f.present(c)) v.push_back(f.name);
  if (v.empty()) v.push_back("none");
  return v;
}

void campaign_stats::add(const campaign_stats& o) {
  declined += o.declined;
  if (o.cases == 0) return;
  const bool was_empty = cases == 0;
  cases += o.cases, elements += o.elements, violations += o.violations, violating_cases += o.violating_cases;
  unjudged_elements += o.unjudged_elements;
  fudge_cases += o.fudge_cases, bound_accepts += o.bound_accepts;
  pytorch_accepts += o.pytorch_accepts, flash_accepts += o.flash_accepts;
  for (std::size_t i = 0; i < histogram.size(); ++i) histogram[i] += o.histogram[i];
  // The case behind the largest ratio: the larger, ties the earlier case.
  if (was_empty || o.max_ratio > max_ratio || (o.max_ratio == max_ratio && o.max_ratio_index < max_ratio_index))
    max_ratio = o.max_ratio, max_ratio_case = o.max_ratio_case, max_ratio_index = o.max_ratio_index;
  fast_tier_cases += o.fast_tier_cases;
  for (std::size_t i = 0; i < o.worst.size(); ++i)
    campaign_detail::keep_worst(*this, o.worst[i].first, o.worst_index[i], o.worst[i].second);
  // The kept violations: the lowest indices of both, in case order.
  std::vector<campaign_violation> both;
  std::merge(violating.begin(), violating.end(), o.violating.begin(), o.violating.end(), std::back_inserter(both),
             [](const campaign_violation& x, const campaign_violation& y) { return x.index < y.index; });
  if (both.size() > violations_kept) both.resize(violations_kept);
  const bool o_first = !o.violating.empty() && (violating.empty() || o.violating.front().index < violating.front().index);
  if (o_first) first_violation = o.first_violation;
  violating = std::move(both);
}

std::int64_t campaign_result::violations() const {
  std::int64_t n = 0;
  for (const auto& [t, s] : by_type) n += s.violations;
  return n;
}

std::int64_t campaign_result::cases() const {
  std::int64_t n = 0;
  for (const auto& [t, s] : by_type) n += s.cases;
  return n;
}

}  // namespace attncheck
