// The backward pass's loops for one instruction set: included by
// backward.cpp once per set, inside a namespace of its own and under that
// set's target switch, after it has defined `vec` (the vector operations:
// t, width, zero, load, bcast, store, fma, add), `rows_max` and
// `vectors_max` (the register block: rows by vectors of accumulators),
// `exp_n` and `tanh_n` (the kernel's exp and tanh on n floats, engine.hpp:
// the forward's, the same bits on every set). No include guard, on purpose.
//
// Every product is a register-blocked tile product C (+)= A B in which each
// element of C is one chain of FMAs over t = 0, 1, ... from +0, then stored
// or added once to C: the block shape and the vector width decide which
// elements are computed together, never the order inside one, so every
// instruction set (the portable one with an exact fma) gives the same bits.

/// c[r][x] = acc[r][x] (add: c[r][x] + acc[r][x]): a tile's one store of each chain.
template <int NR, int NV>
__attribute__((always_inline)) inline void store_tile(const typename vec::t (&acc)[NR][NV], float* c, std::int64_t ldc,
                                                      bool add) {
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      float* p = c + r * ldc + v * vec::width;
      vec::store(p, add ? vec::add(vec::load(p), acc[r][v]) : acc[r][v]);
    }
}

/// c[r][x] = (c[r][x] +) sum_t a[r ar + t at] b[t ldb + x] for NR rows and
/// NV vectors of columns, each sum a chain of FMAs in t order from +0.
template <int NR, int NV>
__attribute__((always_inline)) inline void tile(const float* a, std::int64_t ar, std::int64_t at, const float* b,
                                                std::int64_t ldb, std::int64_t count, float* c, std::int64_t ldc, bool add) {
  typename vec::t acc[NR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[r][v] = vec::zero();
  for (std::int64_t t = 0; t < count; ++t) {
    typename vec::t bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) bv[v] = vec::load(b + t * ldb + v * vec::width);
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) {
      const typename vec::t x = vec::bcast(a + r * ar + t * at);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v] = vec::fma(x, bv[v], acc[r][v]);
    }
  }
  store_tile(acc, c, ldc, add);
}

/// tile<1, NV> over only the t with on[t * on_t] set: the chain skips the
/// others (a pair outside the mask is never multiplied, so an infinite or
/// NaN input it would meet stays out, as does the sign of a zero product).
template <int NV>
__attribute__((always_inline)) inline void tile_on(const float* a, std::int64_t at, const char* on, std::int64_t on_t,
                                                   const float* b, std::int64_t ldb, std::int64_t count, float* c, bool add) {
  typename vec::t acc[NV];
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) acc[v] = vec::zero();
  for (std::int64_t t = 0; t < count; ++t) {
    if (!on[t * on_t]) continue;
    const typename vec::t x = vec::bcast(a + t * at);
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[v] = vec::fma(x, vec::load(b + t * ldb + v * vec::width), acc[v]);
  }
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) {
    float* p = c + v * vec::width;
    vec::store(p, add ? vec::add(vec::load(p), acc[v]) : acc[v]);
  }
}

/// One t of tile_ranged for rows whose range holds it (Every: all NR do).
template <int NR, int NV, bool Every>
__attribute__((always_inline)) inline void ranged_step(typename vec::t (&acc)[NR][NV], const float* a, std::int64_t ar,
                                                       std::int64_t at, const std::int64_t* lo, const std::int64_t* hi,
                                                       const float* b, std::int64_t ldb, std::int64_t t) {
  typename vec::t bv[NV];
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) bv[v] = vec::load(b + t * ldb + v * vec::width);
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r) {
    if (!Every && (t < lo[r] || t >= hi[r])) continue;
    const typename vec::t x = vec::bcast(a + r * ar + t * at);
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[r][v] = vec::fma(x, bv[v], acc[r][v]);
  }
}

/// tile<NR, NV> in which row r's chain runs over t in [lo[r], hi[r]) only
/// (the chain tile_on gives when on[] marks that range): the t every row
/// takes as in tile, before and after them each row tests its range.
template <int NR, int NV>
__attribute__((always_inline)) inline void tile_ranged(const float* a, std::int64_t ar, std::int64_t at, const std::int64_t* lo,
                                                       const std::int64_t* hi, const float* b, std::int64_t ldb, float* c,
                                                       std::int64_t ldc, bool add) {
  typename vec::t acc[NR][NV];
  std::int64_t first = lo[0], last = hi[0], every_lo = lo[0], every_hi = hi[0];
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r) {
    first = std::min(first, lo[r]), last = std::max(last, hi[r]);
    every_lo = std::max(every_lo, lo[r]), every_hi = std::min(every_hi, hi[r]);
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[r][v] = vec::zero();
  }
  if (every_lo >= every_hi) every_lo = every_hi = last;  // no t that every row takes
  for (std::int64_t t = first; t < every_lo; ++t) ranged_step<NR, NV, false>(acc, a, ar, at, lo, hi, b, ldb, t);
  for (std::int64_t t = every_lo; t < every_hi; ++t) ranged_step<NR, NV, true>(acc, a, ar, at, lo, hi, b, ldb, t);
  for (std::int64_t t = every_hi; t < last; ++t) ranged_step<NR, NV, false>(acc, a, ar, at, lo, hi, b, ldb, t);
  store_tile(acc, c, ldc, add);
}

/// f(std::integral_constant<int, nv>{}) where the products are built for nv
/// vectors of columns (1 to 4 and 16, those up to vectors_max); any other nv
/// does nothing.
template <class F>
__attribute__((always_inline)) inline void with_vectors(int nv, F&& f) {
  static_assert(vectors_max <= 16);
  const auto built = [&](auto n) __attribute__((always_inline)) {
    if constexpr (decltype(n)::value <= vectors_max) f(n);
  };
  switch (nv) {
    case 1: built(std::integral_constant<int, 1>{}); break;
    case 2: built(std::integral_constant<int, 2>{}); break;
    case 3: built(std::integral_constant<int, 3>{}); break;
    case 4: built(std::integral_constant<int, 4>{}); break;
    case 16: built(std::integral_constant<int, 16>{}); break;
    default: break;
  }
}

// tile<NR, nv> (lo null) or tile_ranged<NR, nv>.
template <int NR>
__attribute__((always_inline)) inline void tile_row(int nv, const float* a, std::int64_t ar, std::int64_t at,
                                                    const std::int64_t* lo, const std::int64_t* hi, const float* b,
                                                    std::int64_t ldb, std::int64_t count, float* c, std::int64_t ldc, bool add) {
  with_vectors(
      nv, [&](auto n) __attribute__((always_inline)) {
        if (lo)
          tile_ranged<NR, decltype(n)::value>(a, ar, at, lo, hi, b, ldb, c, ldc, add);
        else
          tile<NR, decltype(n)::value>(a, ar, at, b, ldb, count, c, ldc, add);
      });
}

/// C (rows by cols, leading dimension ldc; cols a multiple of 16) (+)= A B:
/// row r of A at a + r ar, its element t at + t at; row t of B at b + t ldb;
/// t < count, or with lo set, lo[r] <= t < hi[r].
void gemm(const float* a, std::int64_t ar, std::int64_t at, const float* b, std::int64_t ldb, std::int64_t count, float* c,
          std::int64_t ldc, std::int64_t rows, std::int64_t cols, bool add, const std::int64_t* lo = nullptr,
          const std::int64_t* hi = nullptr) {
  constexpr std::int64_t chunk = vectors_max * vec::width;
  for (std::int64_t c0 = 0; c0 < cols; c0 += chunk) {
    const int nv = static_cast<int>(std::min(chunk, cols - c0) / vec::width);
    std::int64_t r0 = 0;
    for (; r0 + rows_max <= rows; r0 += rows_max)
      tile_row<rows_max>(nv, a + r0 * ar, ar, at, lo ? lo + r0 : nullptr, hi ? hi + r0 : nullptr, b + c0, ldb, count,
                         c + r0 * ldc + c0, ldc, add);
    const float* ar0 = a + r0 * ar;
    const std::int64_t *lo0 = lo ? lo + r0 : nullptr, *hi0 = hi ? hi + r0 : nullptr;
    float* cr0 = c + r0 * ldc + c0;
    switch (rows - r0) {
      case 5: tile_row<5 <= rows_max ? 5 : 1>(nv, ar0, ar, at, lo0, hi0, b + c0, ldb, count, cr0, ldc, add); break;
      case 4: tile_row<4 <= rows_max ? 4 : 1>(nv, ar0, ar, at, lo0, hi0, b + c0, ldb, count, cr0, ldc, add); break;
      case 3: tile_row<3 <= rows_max ? 3 : 1>(nv, ar0, ar, at, lo0, hi0, b + c0, ldb, count, cr0, ldc, add); break;
      case 2: tile_row<2 <= rows_max ? 2 : 1>(nv, ar0, ar, at, lo0, hi0, b + c0, ldb, count, cr0, ldc, add); break;
      case 1: tile_row<1>(nv, ar0, ar, at, lo0, hi0, b + c0, ldb, count, cr0, ldc, add); break;
      default: break;
    }
  }
}

/// gemm with row r's element t taken only where on[r on_r + t on_t] is set.
void gemm_on(const float* a, std::int64_t ar, std::int64_t at, const char* on, std::int64_t on_r, std::int64_t on_t,
             const float* b, std::int64_t ldb, std::int64_t count, float* c, std::int64_t ldc, std::int64_t rows,
             std::int64_t cols, bool add) {
  constexpr std::int64_t chunk = vectors_max * vec::width;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c0 = 0; c0 < cols; c0 += chunk) {
      const int nv = static_cast<int>(std::min(chunk, cols - c0) / vec::width);
      const float* ar0 = a + r * ar;
      const char* on0 = on + r * on_r;
      float* cr0 = c + r * ldc + c0;
      with_vectors(
          nv, [&](auto n) __attribute__((always_inline)) {
            tile_on<decltype(n)::value>(ar0, at, on0, on_t, b + c0, ldb, count, cr0, add);
          });
    }
}

/// dQ (into the group's f32 rows), dK and dV of one (batch element, KV head).
void one_kv_head(const job& jb, std::int64_t b, std::int64_t g, scratch& w) {
  const backward_args& a = jb.a;
  const shape& s = a.dims;
  const std::int64_t group = s.hq / s.hkv, d = s.d, dv = s.dv, d16 = padded(d), dv16 = padded(dv);
  const std::int64_t bq = jb.bq, bk = jb.bk, rows_all = group * s.lq;
  const float scale = jb.scale;
  const bool softcap = a.var.softcap > 0.0f;
  // The group's rows (h - g G, i): Q and dO in f32, D = rowsum(dO O) (e
  // order, from 0), the LSE, the keys [first, limit) the row may see (mask
  // and bias aside), its aligned position and whether it sees any key. A
  // row that sees no key is never read. With sinks each head's sum over its
  // rows of P_sink D (i order) goes to jb.sink_part.
  w.q.assign(z(rows_all * d16), 0.0f);
  w.d_o.assign(z(rows_all * dv16), 0.0f);
  w.dq.assign(z(rows_all * d16), 0.0f);
  w.big_d.assign(z(rows_all), 0.0f);
  w.lse.assign(z(rows_all), 0.0f);
  w.limit.assign(z(rows_all), 0);
  w.first.assign(z(rows_all), 0);
  w.pos.assign(z(rows_all), 0);
  w.sees.assign(z(rows_all), 0);
  w.o_row.assign(z(dv16), 0.0f);
  std::int64_t seen_limit = 0;  // without a mask, a bias, a window or a chunk: keys [0, seen_limit) are seen by some row
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (std::int64_t h = g * group; h < (g + 1) * group; ++h) {
    float sink_sum = 0.0f;
    const float sink = jb.sink_part ? a.var.sinks[h] : neg_inf;
    for (std::int64_t i = 0; i < s.lq; ++i) {
      const std::int64_t at = (h - g * group) * s.lq + i;
      const auto [lo, hi] = key_range(a, b, i);
      w.first[z(at)] = lo, w.limit[z(at)] = hi, w.pos[z(at)] = position(a, b, i);
      seen_limit = std::max(seen_limit, hi);
      bool sees = false;
      for (std::int64_t j = lo; j < hi && !sees; ++j) sees = !jb.pairwise || allowed(a, b, h, i, j);
      if (!sees) continue;
      w.sees[z(at)] = 1;
      const auto row = [&](const tensor_in& t, float* dst, std::int64_t n) {
        const std::int64_t off = b * t.stride[0] + i * t.stride[1] + h * t.stride[2];
        convert::load_row(dst, static_cast<const char*>(t.data) + off * convert::size_of(t.type), t.type, t.stride[3], n);
      };
      row(a.q, &w.q[z(at * d16)], d);
      float* dorow = &w.d_o[z(at * dv16)];
      row(a.d_o, dorow, dv);
      row(ATTNIMPL_MUTANT(backward_d_from_do_squared) ? a.d_o : a.o, w.o_row.data(), dv);
      float acc = 0.0f;
      for (std::int64_t e = 0; e < dv; ++e) acc += dorow[e] * w.o_row[z(e)];
      w.big_d[z(at)] = acc;
      w.lse[z(at)] = a.lse[b * a.lse_stride[0] + h * a.lse_stride[1] + i * a.lse_stride[2]];
      if (sink != neg_inf) {  // P_sink = exp(sigma_h - LSE) (the LSE handed in holds the sink)
        const float arg = sink - w.lse[z(at)];
        float p_sink = 0.0f;
        exp_n(&arg, &p_sink, 1);
        sink_sum += p_sink * acc;
      }
    }
    if (jb.sink_part) jb.sink_part[b * s.hq + h] = sink_sum;
  }
  const bool per_key = jb.pairwise || jb.ranges;  // which keys some row sees: found key by key
  const std::int64_t key_blocks = (s.lk + bk - 1) / bk;
  for (std::int64_t kb = 0; kb < key_blocks; ++kb) {
    const std::int64_t j0 = (kb + w.dq_rotation) % key_blocks * bk;
    const std::int64_t nk = std::min(bk, s.lk - j0), nk16 = padded(nk);
    // The last, partial key block never computed (key blocks counted as lk / bk): its dK, dV stay 0.
    const bool dropped = ATTNIMPL_MUTANT(backward_key_tail_tile_dropped) && nk < bk;
    // The key block's K and V (f32, row-major and transposed; keys no row
    // sees stay 0, never read), and its dK, dV sums.
    w.k.assign(z(nk * d16), 0.0f);
    w.v.assign(z(nk * dv16), 0.0f);
    w.kt.assign(z(d * nk16), 0.0f);
    w.vt.assign(z(dv * nk16), 0.0f);
    w.dk_blk.assign(z(nk * d16), 0.0f);
    w.dv_blk.assign(z(nk * dv16), 0.0f);
    w.seen.assign(z(nk), 0);
    if (!per_key) {
      for (std::int64_t jj = 0; jj < nk && j0 + jj < seen_limit; ++jj) w.seen[z(jj)] = 1;
    } else {
      std::int64_t seen_count = 0;
      for (std::int64_t at = rows_all - 1; at >= 0 && seen_count < nk; --at) {  // last rows first: causal rows see the most
        if (!w.sees[z(at)]) continue;
        for (std::int64_t jj = std::max<std::int64_t>(0, w.first[z(at)] - j0); jj < nk && j0 + jj < w.limit[z(at)]; ++jj)
          if (!w.seen[z(jj)] && (!jb.pairwise || allowed(a, b, g * group + at / s.lq, at % s.lq, j0 + jj)))
            w.seen[z(jj)] = 1, ++seen_count;
      }
    }
    for (std::int64_t jj = 0; jj < nk; ++jj) {
      if (!w.seen[z(jj)]) continue;
      const auto row = [&](const tensor_in& t, float* dst, std::int64_t n) {
        const std::int64_t off = b * t.stride[0] + (j0 + jj) * t.stride[1] + g * t.stride[2];
        convert::load_row(dst, static_cast<const char*>(t.data) + off * convert::size_of(t.type), t.type, t.stride[3], n);
      };
      row(a.k, &w.k[z(jj * d16)], d);
      row(a.v, &w.v[z(jj * dv16)], dv);
      for (std::int64_t x = 0; x < d; ++x) w.kt[z(x * nk16 + jj)] = w.k[z(jj * d16 + x)];
      for (std::int64_t e = 0; e < dv; ++e) w.vt[z(e * nk16 + jj)] = w.v[z(jj * dv16 + e)];
    }
    w.s.assign(z(bq * nk16), 0.0f), w.dp.assign(z(bq * nk16), 0.0f);
    w.p.assign(z(bq * nk16), 0.0f), w.ds.assign(z(bq * nk16), 0.0f), w.vis.assign(z(bq * nk16), 0);
    if (softcap) w.th.assign(z(bq * nk16), 0.0f);
    if (a.var.bias.data) w.bias.assign(z(bq * nk16), 0.0f);
    for (std::int64_t h = g * group; h < (g + 1) * group && !dropped; ++h)
      for (std::int64_t i0 = 0; i0 < s.lq; i0 += bq) {
        if (ATTNIMPL_MUTANT(backward_gqa_last_head_only) && i0 == 0) {  // each query head starts the sums afresh
          std::fill(w.dk_blk.begin(), w.dk_blk.end(), 0.0f);
          std::fill(w.dv_blk.begin(), w.dv_blk.end(), 0.0f);
        }
        const std::int64_t rows = std::min(s.lq, i0 + bq) - i0, r0 = (h - g * group) * s.lq + i0;
        // Which keys of the block each row sees: all of them (the usual
        // case: the dense tiles below) or some. Without a mask or a bias a
        // row sees the keys [row_lo, cnt) of the block (row_lo > 0 only
        // with a window or a chunk); when each key's rows are contiguous too
        // (causal diagonals, padding, windows, chunks) the ranged tiles take
        // each chain over its range, otherwise (a mask or a bias that hides
        // pairs inside the ranges) the masked tiles skip the hidden pairs one
        // by one. The three give the same chain for the pairs they take.
        bool any = false, all = true;
        w.cnt.resize(z(rows)), w.row_lo.resize(z(rows));
        for (std::int64_t ri = 0; ri < rows; ++ri) {
          const bool sees = w.sees[z(r0 + ri)] != 0;
          const std::int64_t lo = sees ? std::clamp<std::int64_t>(w.first[z(r0 + ri)] - j0, 0, nk) : 0;
          const std::int64_t hi = sees ? std::clamp<std::int64_t>(w.limit[z(r0 + ri)] - j0, lo, nk) : 0;
          w.row_lo[z(ri)] = lo, w.cnt[z(ri)] = hi;
          any = any || hi > lo;
          all = all && lo == 0 && hi == nk;
        }
        if (!any) continue;  // every product would be skipped: nothing to add
        // The bias's entries of the rows' ranges (0 elsewhere: hidden lanes).
        if (a.var.bias.data)
          for (std::int64_t ri = 0; ri < rows; ++ri) {
            float* br = &w.bias[z(ri * nk16)];
            std::fill(br, br + nk16, 0.0f);
            const std::int64_t lo = w.row_lo[z(ri)], hi = w.cnt[z(ri)];
            if (hi > lo) load_bias(a, b, h, i0 + ri, j0 + lo, hi - lo, br + lo);
          }
        char* vis = w.vis.data();
        bool holes = false;  // a pair inside a row's range hidden by the mask or the bias
        if (!all || jb.pairwise)
          for (std::int64_t ri = 0; ri < rows; ++ri) {
            const std::int64_t lo = w.row_lo[z(ri)], hi = w.cnt[z(ri)];
            const float* br = a.var.bias.data ? &w.bias[z(ri * nk16)] : nullptr;
            for (std::int64_t jj = 0; jj < nk16; ++jj) {
              const bool in = jj >= lo && jj < hi;
              const bool on = in && (!jb.pairwise || (mask_allows(a, b, h, i0 + ri, j0 + jj) && (!br || br[jj] != neg_inf)));
              vis[ri * nk16 + jj] = on;
              holes = holes || (in && !on);
            }
          }
        all = all && !holes;
        bool ranged = false;
        if (!all) {
          ranged = !holes;
          w.key_lo.assign(z(nk), 0), w.key_hi.assign(z(nk), 0);
          for (std::int64_t jj = 0; jj < nk && ranged; ++jj) {
            std::int64_t lo = rows, hi = 0, n = 0;
            for (std::int64_t ri = 0; ri < rows; ++ri)
              if (jj >= w.row_lo[z(ri)] && jj < w.cnt[z(ri)]) lo = std::min(lo, ri), hi = ri + 1, ++n;
            ranged = n == 0 || n == hi - lo;
            w.key_lo[z(jj)] = n ? lo : 0, w.key_hi[z(jj)] = n ? hi : 0;
          }
        }
        const float* qblk = &w.q[z(r0 * d16)];
        const float* doblk = &w.d_o[z(r0 * dv16)];
        // Scores and dP of every (row, key) of the block.
        gemm(qblk, d16, 1, w.kt.data(), nk16, d, w.s.data(), nk16, rows, nk16, false);
        gemm(doblk, dv16, 1, w.vt.data(), nk16, dv, w.dp.data(), nk16, rows, nk16, false);
        // P = exp(S - LSE) and dS = P (dP - D) where the row sees the key,
        // 0 elsewhere. S = scale q.k, or with the variants (the forward's
        // order) S = c tanh(x / c) + m_h (j - p) + Bias with x = scale q.k.
        float* sc = w.s.data();
        const auto lse_of = [&](std::int64_t ri) {
          return w.lse[z(ATTNIMPL_MUTANT(backward_lse_previous_row) && i0 + ri > 0 ? r0 + ri - 1 : r0 + ri)];
        };
        if (!jb.terms) {
          for (std::int64_t ri = 0; ri < rows; ++ri) {
            const float lse = lse_of(ri);
            float* x = sc + ri * nk16;
            if (ATTNIMPL_MUTANT(backward_p_unscaled))
              for (std::int64_t jj = 0; jj < nk16; ++jj) x[jj] = x[jj] - lse;
            else
              for (std::int64_t jj = 0; jj < nk16; ++jj) x[jj] = x[jj] * scale - lse;
          }
        } else {
          const std::int64_t n = rows * nk16;
          if (!ATTNIMPL_MUTANT(backward_p_unscaled))
            for (std::int64_t k = 0; k < n; ++k) sc[k] = sc[k] * scale;
          if (softcap) {
            // t = tanh(x / c) with the forward's tanh (kept for dS), x -> c t.
            const float cap = a.var.softcap;
            float* u = w.p.data();  // free until the exp below
            for (std::int64_t k = 0; k < n; ++k) u[k] = sc[k] / cap;
            tanh_n(u, w.th.data(), z(n));
            for (std::int64_t k = 0; k < n; ++k) sc[k] = cap * w.th[z(k)];
          }
          const bool alibi = a.var.alibi && !ATTNIMPL_MUTANT(backward_alibi_ignored);
          for (std::int64_t ri = 0; ri < rows; ++ri) {
            float* x = sc + ri * nk16;
            if (alibi) {  // j - p exact in f32 (|j - p| < 2^24), as the forward
              const float slope = a.var.alibi[h];
              const std::int64_t rel = j0 - w.pos[z(r0 + ri)];
              for (std::int64_t jj = 0; jj < nk16; ++jj) x[jj] = x[jj] + slope * static_cast<float>(rel + jj);
            }
            if (a.var.bias.data) {
              const float* br = &w.bias[z(ri * nk16)];
              for (std::int64_t jj = 0; jj < nk16; ++jj) x[jj] = x[jj] + br[jj];
            }
            const float lse = lse_of(ri);
            for (std::int64_t jj = 0; jj < nk16; ++jj) x[jj] = x[jj] - lse;
          }
        }
        exp_n(sc, w.p.data(), z(rows * nk16));
        for (std::int64_t ri = 0; ri < rows; ++ri) {
          float* p = &w.p[z(ri * nk16)];
          float* ds = &w.ds[z(ri * nk16)];
          const float* dp = &w.dp[z(ri * nk16)];
          const float big_d = w.big_d[z(r0 + ri)];
          if (ATTNIMPL_MUTANT(backward_ds_without_p))
            for (std::int64_t jj = 0; jj < nk16; ++jj) ds[jj] = dp[jj] - big_d;
          else
            for (std::int64_t jj = 0; jj < nk16; ++jj) ds[jj] = p[jj] * (dp[jj] - big_d);
          if (softcap && !ATTNIMPL_MUTANT(backward_softcap_grad_ignored)) {  // dX = dS (1 - t^2), the cap's derivative
            const float* t = &w.th[z(ri * nk16)];
            for (std::int64_t jj = 0; jj < nk16; ++jj) ds[jj] = ds[jj] * (1.0f - t[jj] * t[jj]);
          }
          if (!all) {
            const char* on = vis + ri * nk16;
            for (std::int64_t jj = 0; jj < nk16; ++jj) {
              p[jj] = on[jj] ? p[jj] : 0.0f;
              ds[jj] = on[jj] ? ds[jj] : 0.0f;
            }
          }
        }
        // dV += P^T dO and dK += dS^T Q over the block's rows (each key's
        // partial in row order, added once), dQ += dS K over its keys (each
        // row's partial in key order, added once).
        float* dqblk = &w.dq[z(r0 * d16)];
        if (all) {
          gemm(w.p.data(), 1, nk16, doblk, dv16, rows, w.dv_blk.data(), dv16, nk, dv16, true);
          gemm(w.ds.data(), 1, nk16, qblk, d16, rows, w.dk_blk.data(), d16, nk, d16, true);
          if (!ATTNIMPL_MUTANT(backward_dq_order_nondeterministic))
            gemm(w.ds.data(), nk16, 1, w.k.data(), d16, nk, dqblk, d16, rows, d16, true);
        } else if (ranged) {
          const std::int64_t *klo = w.key_lo.data(), *khi = w.key_hi.data();
          gemm(w.p.data(), 1, nk16, doblk, dv16, 0, w.dv_blk.data(), dv16, nk, dv16, true, klo, khi);
          gemm(w.ds.data(), 1, nk16, qblk, d16, 0, w.dk_blk.data(), d16, nk, d16, true, klo, khi);
          if (!ATTNIMPL_MUTANT(backward_dq_order_nondeterministic))
            gemm(w.ds.data(), nk16, 1, w.k.data(), d16, 0, dqblk, d16, rows, d16, true, w.row_lo.data(), w.cnt.data());
        } else {
          gemm_on(w.p.data(), 1, nk16, vis, 1, nk16, doblk, dv16, rows, w.dv_blk.data(), dv16, nk, dv16, true);
          gemm_on(w.ds.data(), 1, nk16, vis, 1, nk16, qblk, d16, rows, w.dk_blk.data(), d16, nk, d16, true);
          if (!ATTNIMPL_MUTANT(backward_dq_order_nondeterministic))
            gemm_on(w.ds.data(), nk16, 1, vis, nk16, 1, w.k.data(), d16, nk, dqblk, d16, rows, d16, true);
        }
        if (ATTNIMPL_MUTANT(backward_dq_order_nondeterministic))  // the keys from a per-call start, as atomics land
          for (std::int64_t ri = 0; ri < rows; ++ri) {
            w.part.assign(z(d16), 0.0f);
            for (std::int64_t t = 0; t < nk; ++t) {
              const std::int64_t jj = (t + w.dq_rotation) % nk;
              if (all || vis[ri * nk16 + jj])
                for (std::int64_t x = 0; x < d; ++x)
                  w.part[z(x)] = std::fma(w.ds[z(ri * nk16 + jj)], w.k[z(jj * d16 + x)], w.part[z(x)]);
            }
            for (std::int64_t x = 0; x < d; ++x) dqblk[ri * d16 + x] += w.part[z(x)];
          }
      }
    // The block's dK = scale dS^T Q and dV, rounded once to the storage type.
    for (std::int64_t jj = 0; jj < nk; ++jj) {
      for (std::int64_t x = 0; x < d; ++x) w.dk_blk[z(jj * d16 + x)] *= scale;
      const auto out = [&](const tensor_out& t, const float* src, std::int64_t n) {
        const std::int64_t off = b * t.stride[0] + (j0 + jj) * t.stride[1] + g * t.stride[2];
        convert::store_row(static_cast<char*>(t.data) + off * convert::size_of(t.type), t.type, t.stride[3], src, n);
      };
      out(a.dk, &w.dk_blk[z(jj * d16)], d);
      out(a.dv, &w.dv_blk[z(jj * dv16)], dv);
    }
  }
  // The group's dQ = scale dS K, rounded once (rows that see no key: 0).
  const float dq_scale = ATTNIMPL_MUTANT(backward_dq_scale_dropped) ? 1.0f : scale;
  for (std::int64_t h = g * group; h < (g + 1) * group; ++h)
    for (std::int64_t i = 0; i < s.lq; ++i) {
      float* row = &w.dq[z(((h - g * group) * s.lq + i) * d16)];
      for (std::int64_t x = 0; x < d; ++x) row[x] *= dq_scale;
      const std::int64_t off = b * a.dq.stride[0] + i * a.dq.stride[1] + h * a.dq.stride[2];
      convert::store_row(static_cast<char*>(a.dq.data) + off * convert::size_of(a.dq.type), a.dq.type, a.dq.stride[3], row, d);
    }
}
