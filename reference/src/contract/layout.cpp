// Memory layouts of Q, K, V and O: dense, head-major, and padded with guard gaps.
#include "layout.hpp"

namespace attncheck {
namespace detail {

namespace {

// Gaps of the padded layout, in elements: after each head vector, after each
// row, after each batch element, before the first element and after the last.
// Distinct small sizes so a stride mix-up lands in a gap (a NaN) rather than
// on a neighbouring value.
constexpr std::int64_t head_gap = 1, row_gap = 2, batch_gap = 3, lead_gap = 5, tail_gap = 1;

}  // namespace

std::optional<geometry> layout_geometry(dims4 shape, layout_kind layout) {
  const auto [nb, ns, nh, nx] = shape;
  geometry g;
  std::optional<std::int64_t> total;
  switch (layout) {
    case layout_kind::bshd:
    case layout_kind::bhsd: {
      auto hx = checked_mul(nh, nx);
      auto shx = hx ? checked_mul(ns, *hx) : std::nullopt;
      total = shx ? checked_mul(nb, *shx) : std::nullopt;
      if (!total) return std::nullopt;
      if (layout == layout_kind::bshd)
        g.stride = {*shx, *hx, nx, 1};
      else
        g.stride = {*shx, nx, ns * nx, 1};
      g.storage = *total;
      return g;
    }
    case layout_kind::padded: {
      auto hs = checked_add(nx, head_gap);
      auto hs_all = hs ? checked_mul(nh, *hs) : std::nullopt;
      auto ss = hs_all ? checked_add(*hs_all, row_gap) : std::nullopt;
      auto ss_all = ss ? checked_mul(ns, *ss) : std::nullopt;
      auto bs = ss_all ? checked_add(*ss_all, batch_gap) : std::nullopt;
      auto bs_all = bs ? checked_mul(nb, *bs) : std::nullopt;
      total = bs_all ? checked_add(*bs_all, lead_gap + tail_gap) : std::nullopt;
      if (!total) return std::nullopt;
      g.stride = {*bs, *ss, *hs, 1};
      g.offset = lead_gap;
      g.storage = *total;
      return g;
    }
  }
  return std::nullopt;
}

}  // namespace detail

std::uint32_t gap_sentinel(dtype t) { return per_dtype(t, 0x7fc0a5a5u, 0x7ea5u, 0x7fe5u, 0x7fu, 0x7eu); }

tensor make_tensor(dtype t, dims4 shape, layout_kind layout) {
  const auto g = detail::layout_geometry(shape, layout);
  if (!g) throw input_error("layout", "storage size of the " + std::string(name(layout)) + " layout overflows int64");
  tensor x;
  x.type = t;
  x.shape = shape;
  x.stride = g->stride;
  x.offset = g->offset;
  const bool gaps = layout == layout_kind::padded;
  x.bits.assign(static_cast<std::size_t>(g->storage), gaps ? gap_sentinel(t) : 0u);
  if (gaps) {
    for (std::int64_t a = 0; a < shape[0]; ++a)
      for (std::int64_t s = 0; s < shape[1]; ++s)
        for (std::int64_t h = 0; h < shape[2]; ++h)
          for (std::int64_t e = 0; e < shape[3]; ++e) x.set_bits(a, s, h, e, 0u);
  }
  return x;
}

tensor make_output(const attn_case& c) { return make_tensor(c.type, output_shape(c), c.layout); }

}  // namespace attncheck
