// Which subcommand runs: each add_* registers its runner here.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <sstream>
#include <string>
#include <type_traits>

namespace attncheck::cli {

void register_runner(CLI::App* sub, std::function<int()> run);

/// CLI::Range that says first whether the text is a number at all:
/// "--cases: 'abc' is not a whole number; expected 1 to 10000000" (CLI11's
/// own Range calls that "not in range").
template <class T>
CLI::Validator number_in(T lo, T hi) {
  const auto text = [](T x) {
    std::ostringstream s;
    s << x;
    return s.str();
  };
  const std::string range = text(lo) + " to " + text(hi);
  return CLI::Validator(
      [lo, hi, range](std::string& in) -> std::string {
        T v{};
        if (!CLI::detail::lexical_cast(in, v))
          return "'" + in + "' is not " + (std::is_integral_v<T> ? "a whole number" : "a number") + "; expected " + range;
        if (!(v >= lo && v <= hi)) return "'" + in + "' is outside " + range;
        return {};
      },
      "[" + range + "]");
}

}  // namespace attncheck::cli
