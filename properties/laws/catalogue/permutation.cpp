// The permutation law: permuting keys with their values leaves O within the
// bound; permuting queries, batch elements or heads permutes O.
#include <algorithm>
#include <bit>
#include <numeric>

#include "law_support.hpp"
#include "registry.hpp"

namespace attncheck::laws {

namespace {

// A random permutation of 0..n-1, never the identity when n >= 2.
std::vector<std::int64_t> permutation(law_rng& rng, std::int64_t n) {
  std::vector<std::int64_t> p(static_cast<std::size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  for (std::int64_t i = n - 1; i > 0; --i)
    std::swap(p[static_cast<std::size_t>(i)], p[static_cast<std::size_t>(rng.below(i + 1))]);
  if (n >= 2 && std::is_sorted(p.begin(), p.end())) std::swap(p[0], p[1]);
  return p;
}

}  // namespace

void prepare_permutation(attn_case& c, const subject&) {
  c.causal = false;  // permuting keys or queries is only a symmetry without order-dependent masks
  c.mask_shape = {};
  c.mask.clear();
  c.lk = std::max<std::int64_t>(c.lk, 2);  // one key has no order to permute
}

law_outcome permutations_commute(const subject& s, const attn_case& c) {
  law_outcome o;
  const auto base = s.attend(c);
  if (run_failed(base, o, "base run")) return o;
  const oracle_result ref = fast_bound(s, c);
  law_rng rng(c, 0x9e7);
  bool keys_move = false;
  for (std::int64_t b = 0; b < c.b; ++b) keys_move = keys_move || c.valid_keys(b) >= 2;
  if (!keys_move && c.lq == 1 && c.b == 1 && c.hkv == 1) o.nothing_to_judge("a single key, query, batch element and KV head");
  // Keys with their values, within each sequence's valid keys.
  {
    attn_case p = c;
    for (std::int64_t b = 0; b < c.b; ++b) {
      const auto perm = permutation(rng, c.valid_keys(b));
      for (std::int64_t j = 0; j < static_cast<std::int64_t>(perm.size()); ++j)
        for (std::int64_t g = 0; g < c.hkv; ++g) {
          for (std::int64_t x = 0; x < c.d; ++x)
            p.k.set_bits(b, j, g, x, c.k.bits_at(b, perm[static_cast<std::size_t>(j)], g, x));
          for (std::int64_t x = 0; x < c.dv; ++x)
            p.v.set_bits(b, j, g, x, c.v.bits_at(b, perm[static_cast<std::size_t>(j)], g, x));
        }
    }
    const auto out = s.attend(p);
    if (run_failed(out, o, "permuted keys")) return o;
    o.add("keys permuted with their values", compare_within_bounds(c, base, ref, out, fast_bound(s, p)));
  }
  // Queries, batch elements and KV heads (with their query heads): the output is permuted the same way.
  const auto qp = permutation(rng, c.lq), bp = permutation(rng, c.b), gp = permutation(rng, c.hkv);
  const std::int64_t G = c.group();
  auto head = [&](std::int64_t h) { return gp[static_cast<std::size_t>(h / G)] * G + h % G; };
  attn_case p = c;
  p.q = remake(c.type, c.q.shape, c.layout, [&](auto b, auto i, auto h, auto x) {
    return c.q.bits_at(bp[static_cast<std::size_t>(b)], qp[static_cast<std::size_t>(i)], head(h), x);
  });
  p.k = remake(c.type, c.k.shape, c.layout, [&](auto b, auto j, auto g, auto x) {
    return c.k.bits_at(bp[static_cast<std::size_t>(b)], j, gp[static_cast<std::size_t>(g)], x);
  });
  p.v = remake(c.type, c.v.shape, c.layout, [&](auto b, auto j, auto g, auto x) {
    return c.v.bits_at(bp[static_cast<std::size_t>(b)], j, gp[static_cast<std::size_t>(g)], x);
  });
  if (!c.key_len.empty())
    for (std::int64_t b = 0; b < c.b; ++b)
      p.key_len[static_cast<std::size_t>(b)] = c.key_len[static_cast<std::size_t>(bp[static_cast<std::size_t>(b)])];
  const auto out = s.attend(p);
  if (run_failed(out, o, "permuted queries, batch and heads")) return o;
  // Undo the permutation on the output, then compare with the base run.
  subject_output back = out;
  for (std::int64_t b = 0; b < c.b; ++b)
    for (std::int64_t i = 0; i < c.lq; ++i)
      for (std::int64_t h = 0; h < c.hq; ++h) {
        const std::int64_t ob = bp[static_cast<std::size_t>(b)], oi = qp[static_cast<std::size_t>(i)], oh = head(h);
        for (std::int64_t e = 0; e < c.dv; ++e) back.o.set_bits(ob, oi, oh, e, out.o.bits_at(b, i, h, e));
        if (!out.lse.empty())
          back.lse[static_cast<std::size_t>((ob * c.hq + oh) * c.lq + oi)] =
              out.lse[static_cast<std::size_t>((b * c.hq + h) * c.lq + i)];
      }
  o.add("queries, batch elements and KV heads permuted",
        s.claims(ATTNCHECK_CLAIM_BATCH) ? compare_bitwise(c, base, back) : compare_within_bounds(c, base, ref, back, ref));
  return o;
}

}  // namespace attncheck::laws
