// A version 4 subject's decline (ATTNCHECK_DECLINED, docs/abi.md "Return
// status: declined"): thrown to the law runner as case_declined when the call
// left its outputs as the host poisoned them; a declined call that wrote is a
// failed call, since it said it did nothing. A case outside the subject's
// declared static limits is declined by the host before any call.
#include <string>

#include "attncheck/subject_host.hpp"

namespace attncheck {

case_declined::case_declined(std::string why, bool limit)
    : std::runtime_error("declined: " + why), reason(std::move(why)), by_limit(limit) {}

std::string case_declined::key() const {
  std::string k = reason.substr(0, reason.find(':'));
  const auto first = k.find_first_not_of(" \t\n");
  const auto last = k.find_last_not_of(" \t\n");
  k = first == std::string::npos ? std::string() : k.substr(first, last - first + 1);
  // A subject's own reason that reads like the host's is marked as the
  // subject's: only a case outside the declared limits counts as one.
  if (!by_limit && is_limit_decline(k)) k = "subject's " + k;
  if (k.size() > 80) k = k.substr(0, 77) + "...";
  return k.empty() ? std::string("(no reason given)") : k;
}

void subject::settle_decline(int status, std::string& error, bool wrote) const {
  if (abi_ < 4 || status != ATTNCHECK_DECLINED) return;
  if (!wrote) throw case_declined(error);
  error = "declined (" + error + ") but wrote its outputs: a declined call must leave them unwritten";
}

void subject::decline_outside_limits(const attn_case& c) const {
  if (std::string why = limits_.outside(c); !why.empty()) throw case_declined(std::move(why), true);
}

}  // namespace attncheck
