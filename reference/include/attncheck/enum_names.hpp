// An enum's names as one table (value, name), and the two lookups every
// name function and parser reads it through: one table per enum, no switch.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>
#include <utility>

namespace attncheck {

template <class E, std::size_t N>
using name_table = std::array<std::pair<E, std::string_view>, N>;

/// The name of e in the table; `otherwise` for a value it does not list.
template <class E, std::size_t N>
constexpr std::string_view name_in(const name_table<E, N>& table, E e, std::string_view otherwise = "?") {
  for (const auto& [k, n] : table)
    if (k == e) return n;
  return otherwise;
}

/// The value the table names s; nullopt for a name it does not list.
template <class E, std::size_t N>
constexpr std::optional<E> parse_in(const name_table<E, N>& table, std::string_view s) {
  for (const auto& [k, n] : table)
    if (n == s) return k;
  return std::nullopt;
}

}  // namespace attncheck
