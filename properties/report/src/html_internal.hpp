// Internal to the HTML reports (properties/report/src/html*.cpp): the page
// every report is, and the small pieces each report's writer uses.
#pragma once

#include <ostream>
#include <sstream>
#include <string>

namespace attncheck::html {

/// x in fmt, or NaN, inf, -inf.
std::string num(double x, const char* fmt = "%.3g");

/// One term and its value of a <dl>, both escaped.
void row(std::ostream& o, const std::string& term, const std::string& value);

/// One page: a header with what produced it, then the body the caller writes.
class page {
 public:
  page(const std::string& kind, const std::string& title);
  std::ostringstream& body() { return out_; }
  /// Closes the page and writes it to path (input_error "--html" when it cannot).
  void write(const std::string& path);

 private:
  std::ostringstream out_;
};

}  // namespace attncheck::html
