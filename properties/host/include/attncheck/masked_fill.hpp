// What a subject that weights masked slots by zero finds in them (docs/abi.md
// "Conventions", ATTNCHECK_MASKED_WEIGHTED_BY_ZERO): finite values, never NaN
// or inf, each at most as large as the largest finite magnitude in its column
// (its head dimension) among the tensor's used elements, scaled down by a
// power of two where the columns' maxima could form a score near overflow.
// So a score that such a kernel forms from a fill is no larger than the used
// content's own column-wise worst, and never overflows. The host puts them in
// every slot no visible pair uses (and in a paged arena's slots no table
// entry reaches); the laws that plant content where some row must not see it
// take it from here too.
#pragma once

#include <cstdint>
#include <vector>

#include "attncheck/case.hpp"

namespace attncheck {

/// The magnitudes of the fill, per column (head dimension x of Q and K, e of
/// V): the largest finite |x| of the column among the elements some visible
/// pair reads (1 for a column with none), Q's and K's scaled by one power of
/// two so that scale * sum_x |Q|_x |K|_x stays below 2^100.
/// Which tensor an element belongs to (each has its own signs).
enum class fill_tensor : std::uint8_t { q, k, v };

struct finite_fill {
  std::vector<double> q, k, v;
  /// The smallest column's magnitude: a fill for any column (a paged arena's canaries).
  double k_floor() const;
  double v_floor() const;
  /// The fill of element (b, row, head, x) of the case's tensor `which`
  /// (finite_fill_bits at that column's magnitude and that element's position).
  std::uint32_t bits_at(const attn_case& c, fill_tensor which, std::int64_t b, std::int64_t row, std::int64_t head,
                        std::int64_t x, int variant) const;
};
finite_fill finite_fill_of(const attn_case& c);
/// The same, with the case's used slots already at hand.
finite_fill finite_fill_of(const attn_case& c, const slot_usage& used);

/// The fill of one element: its sign a hash of (tensor, position) alone, so
/// every variant gives a zero weight times the same signed value, and its
/// magnitude max, max / 2 or 3 max / 4 (variant 0, 1 or 2) rounded to the type.
std::uint32_t finite_fill_bits(dtype t, double max, fill_tensor which, std::uint64_t position, int variant);

/// The variant a case's poison asks for: nan 0, big 1, none 2.
int fill_variant(poison_kind p);

/// The case with the elements of every slot no visible pair uses (query rows
/// that see no key, keys no row sees) replaced by the fill of the case's
/// poison's variant; the used slots keep their bits.
attn_case with_finite_unused(const attn_case& c);

}  // namespace attncheck
