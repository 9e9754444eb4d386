"""numpy attention taking K and V through a block table and packed (ragged) batches.

    attncheck gate --subject python:attncheck.subjects.numpy_paged:attend --only paged --only page_table --only ragged

A subject written from docs/python.md's convention for the contract 1.2
input forms (docs/spec.md "Paged KV", "Ragged batches"):

- paged: `k` and `v` are None; `k_pages` (num_pages, P, Hkv, D), `v_pages`
  (num_pages, P, Hkv, Dv), `block_table` (B, max_pages) int32, `page_size`
  P and `key_len` (always given) describe them. Key j < n[b] of sequence b is
  slot j % P of page block_table[b, j // P]; only the first ceil(n[b] / P)
  entries of a row and the first n[b] slots they reach may be read.
- ragged: `q` (total_q, Hq, D) and, unless paged, `k` (total_k, Hkv, D), `v`
  (total_k, Hkv, Dv) are packed; `cu_seqlens_q` and `cu_seqlens_k` (B + 1
  offsets each; `cu_seqlens_k` None when paged) delimit the sequences. O is
  returned packed (total_q, Hq, Dv), LSE (Hq, total_q). Each sequence is its
  own problem: a mask is indexed by the query and key within the sequence.

`attend` gathers each sequence's keys from its valid pages (numpy fancy
indexing copies them) and runs the float64 kernel of `numpy_variants` on the
dense problem, once per packed sequence; O is rounded once into the storage
type (u = 2^-53, exp 1 ulp). The gathered keys, the mask and the lengths are
those of the dense form, so the answer is the dense form's, bit for bit: it
claims `paged_equals_dense`, `page_placement` and `ragged_equals_dense`.

Two kernels with the paging bugs the laws are for (docs/python.md "Paged K/V
and ragged batches"):

- `attend_reads_whole_table` gathers every entry of a table row "because it
  is there" (stale page numbers and out-of-range ones, wrapped into the
  arena) and hides the keys past n[b] by a weight of zero instead of skipping
  them: the NaN canaries of the unused slots reach O.
- `attend_drops_partial_page` takes n[b] // P pages, dropping the last one
  when it is not full.

and one with a bug of the ragged form alone: `attend_keys_at_first_offset`
reads every packed sequence's keys from sequence 0's offset.
"""
import numpy as np

import attncheck
from attncheck.subjects.numpy_variants import attention

_DTYPES = ("f32", "f16", "bf16")
_FEATURES = ("causal", "padding", "mask", "lse", "paged", "ragged")


def gather(k_pages, v_pages, block_table, page_size, b, n, *, pages=None):
    """Sequence b's first n keys and values from the arenas, through the first ceil(n / P) entries of its table row
    (or `pages` entries): (n, Hkv, D) and (n, Hkv, Dv) copies."""
    count = -(-int(n) // int(page_size)) if pages is None else pages
    idx = np.asarray(block_table[b, :count], dtype=np.int64)
    kb = k_pages[idx].reshape((count * page_size,) + k_pages.shape[2:])
    vb = v_pages[idx].reshape((count * page_size,) + v_pages.shape[2:])
    return kb[:n], vb[:n]


def _padded(rows, lk):
    """rows (n, H, D) into (1, lk, H, D), zeros past n (key_len hides them)."""
    out = np.zeros((1, lk) + rows.shape[1:], dtype=rows.dtype)
    out[0, : rows.shape[0]] = rows
    return out


def _sequence_keys(b, *, k, v, key_len, k_pages, v_pages, block_table, page_size, cu_seqlens_k, gather_fn,
                   packed_offset=None):
    """Sequence b's keys and values (n, Hkv, *), from the pages, the packed K and V, or the dense batch."""
    if k_pages is not None:
        n = int(key_len[b])
        return gather_fn(k_pages, v_pages, block_table, page_size, b, n)
    if cu_seqlens_k is not None:
        lo, hi = int(cu_seqlens_k[b]), int(cu_seqlens_k[b + 1])
        if packed_offset is not None:
            lo, hi = packed_offset(cu_seqlens_k, b), packed_offset(cu_seqlens_k, b) + hi - lo
        return k[lo:hi], v[lo:hi]
    n = k.shape[1] if key_len is None else int(key_len[b])
    return k[b, :n], v[b, :n]


def paged_attention(q, k, v, *, scale, causal, key_len, mask, dtype, k_pages=None, v_pages=None, block_table=None,
                    page_size=None, cu_seqlens_q=None, cu_seqlens_k=None, gather_fn=gather, packed_offset=None):
    """(O, LSE) of the dense, paged, ragged or paged ragged form: each sequence's keys gathered, then the float64 kernel."""
    keys = dict(k=k, v=v, key_len=key_len, k_pages=k_pages, v_pages=v_pages, block_table=block_table,
                page_size=page_size, cu_seqlens_k=cu_seqlens_k, gather_fn=gather_fn, packed_offset=packed_offset)
    if cu_seqlens_q is None:
        if k_pages is None:
            return attention(q, k, v, scale=scale, causal=causal, key_len=key_len, mask=mask, dtype=dtype)
        # Dense queries, paged keys: rebuild (B, Lk', Hkv, *) with Lk' the longest sequence.
        batch = q.shape[0]
        parts = [_sequence_keys(b, **keys) for b in range(batch)]
        lk = max(1, max(kb.shape[0] for kb, _ in parts))
        kd = np.concatenate([_padded(kb, lk) for kb, _ in parts])
        vd = np.concatenate([_padded(vb, lk) for _, vb in parts])
        m = None if mask is None else mask[..., :lk]
        return attention(q, kd, vd, scale=scale, causal=causal, key_len=np.asarray(key_len), mask=m, dtype=dtype)
    total_q, hq, _ = q.shape
    batch = len(cu_seqlens_q) - 1
    dv = (v_pages if k_pages is not None else v).shape[-1]
    o = np.empty((total_q, hq, dv), dtype=q.dtype)
    lse = np.empty((hq, total_q), dtype=np.float32)
    for b in range(batch):
        r0, r1 = int(cu_seqlens_q[b]), int(cu_seqlens_q[b + 1])
        if r1 == r0:
            continue  # no rows: nothing to write
        kb, vb = _sequence_keys(b, **keys)
        n = kb.shape[0]
        lk = max(1, n)
        m = None if mask is None else mask[b:b + 1, :, : r1 - r0, :lk]
        ob, lb = attention(q[None, r0:r1], _padded(kb, lk), _padded(vb, lk), scale=scale, causal=causal,
                           key_len=np.array([n], dtype=np.int64), mask=m, dtype=dtype)
        o[r0:r1] = ob[0]
        lse[:, r0:r1] = lb[0]
    return o, lse


_CLAIMS = ("deterministic", "paged_equals_dense", "page_placement", "ragged_equals_dense")


@attncheck.declare(name="numpy-paged f64", u=2**-53, exp_ulps=1, dtypes=_DTYPES, features=_FEATURES, claims=_CLAIMS)
def attend(q, k, v, **kw):
    return paged_attention(q, k, v, **kw)


def _whole_table(k_pages, v_pages, block_table, page_size, b, n):
    # Every entry of the row, stale and invalid ones wrapped into the arena: the keys past n are read.
    num_pages = k_pages.shape[0]
    row = np.mod(np.asarray(block_table[b], dtype=np.int64), num_pages)
    kb = k_pages[row].reshape((-1,) + k_pages.shape[2:])
    vb = v_pages[row].reshape((-1,) + v_pages.shape[2:])
    return kb, vb


@attncheck.declare(name="numpy-paged reads the whole table", u=2**-53, exp_ulps=1, dtypes=_DTYPES,
                   features=("causal", "padding", "lse", "paged"))
def attend_reads_whole_table(q, k, v, *, scale, causal, key_len, mask, dtype, k_pages=None, v_pages=None,
                             block_table=None, page_size=None):
    if k_pages is None:
        return attention(q, k, v, scale=scale, causal=causal, key_len=key_len, mask=mask, dtype=dtype)
    batch, lq, hq, _ = q.shape
    kd = np.stack([_whole_table(k_pages, v_pages, block_table, page_size, b, 0)[0] for b in range(batch)])
    vd = np.stack([_whole_table(k_pages, v_pages, block_table, page_size, b, 0)[1] for b in range(batch)])
    # The keys past n[b] are "masked" by a zero weight: softmax over the valid keys, then P @ V over every slot.
    o, lse = attention(q, kd, np.zeros_like(vd), scale=scale, causal=causal, key_len=key_len, mask=None, dtype=dtype)
    n = np.asarray(key_len)
    with np.errstate(all="ignore"):
        kf = attncheck.bf16_values(kd) if dtype == "bf16" else kd.astype(np.float64)
        vf = attncheck.bf16_values(vd) if dtype == "bf16" else vd.astype(np.float64)
        group = hq // kd.shape[2]
        kf, vf = kf[:, :, [h // group for h in range(hq)]], vf[:, :, [h // group for h in range(hq)]]
        qf = attncheck.bf16_values(q) if dtype == "bf16" else q.astype(np.float64)
        s = np.einsum("bihd,bjhd->bhij", qf, kf) * scale
        j = np.arange(kd.shape[1])[None, None, None, :]
        p = n[:, None, None, None] - lq + np.arange(lq)[None, None, :, None]
        ok = (j < n[:, None, None, None]) & ((j <= p) if causal else True)
        s = np.where(ok, s, -np.inf)
        m = s.max(axis=-1, keepdims=True)
        w = np.exp(s - np.where(np.isfinite(m), m, 0))
        w = w / np.where(w.sum(axis=-1, keepdims=True) > 0, w.sum(axis=-1, keepdims=True), 1)
        out = np.einsum("bhij,bjhe->bihe", w, vf)  # weight 0 times the canary of every slot past n[b]
    storage = {"f32": np.float32, "f16": np.float16}
    out = attncheck.bf16_bits(out.astype(np.float32)) if dtype == "bf16" else out.astype(storage[dtype])
    return out, lse


def _floor_pages(k_pages, v_pages, block_table, page_size, b, n):
    # n // P pages: the last page's keys are lost unless it is full.
    kb, vb = gather(k_pages, v_pages, block_table, page_size, b, n, pages=int(n) // int(page_size))
    return kb, vb


@attncheck.declare(name="numpy-paged drops the partial page", u=2**-53, exp_ulps=1, dtypes=_DTYPES, features=_FEATURES)
def attend_drops_partial_page(q, k, v, **kw):
    return paged_attention(q, k, v, gather_fn=_floor_pages, **kw)


@attncheck.declare(name="numpy-ragged keys from sequence 0's offset", u=2**-53, exp_ulps=1, dtypes=_DTYPES,
                   features=("causal", "padding", "mask", "lse", "ragged"))
def attend_keys_at_first_offset(q, k, v, **kw):
    # Every packed sequence reads its keys from sequence 0's offset (cu_seqlens_k[0]) instead of its own.
    return paged_attention(q, k, v, packed_offset=lambda cu, b: int(cu[0]), **kw)
