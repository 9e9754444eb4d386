"""Tutorial: the cross-attention walk-through that traces every tensor shape
(the MultiHeadAttention module of seed 004, model_dim/num_heads/dropout_p,
forward(x_query, x_context, mask=None); docs/tutorials.md, "seed004_mha").

The seed prints the module twice: once piece by piece in a walk-through
(004_aaf55d68f2fac64f.txt:11-133) and once whole (lines 284-347). Each defect
is a named switch (`fixed` lists the ones corrected):
  kv_from_query  the walk-through's projections k = w_k(x_query),
                 v = w_v(x_query) (lines 22-24): K and V come from the
                 queries, not the context (the whole module, lines 328-333,
                 has it right; the `walkthrough` variant adds this one);
  fill_1e9       masked_fill(mask == 0, -1e9) (line 339): a row that sees no
                 key gets mean(V), a visible key scoring below -1e9 loses to
                 the masked ones, and in fp16 the fill overflows;
  masked_keys_weighted
                 softmax, then matmul (lines 340-342): a masked key's value is
                 multiplied by its zero weight, so NaN in a masked slot
                 reaches O (a requirement of this project's contract, which
                 paged caches need; the seed never meets it in its own use).
Defects that live outside the attention arithmetic are gated by the layer mode
(attncheck.layer, `layer_*` below): the batch taken from x_query while K and V
are viewed with -1 (lines 326, 335-336), and the mask convention `mask == 0`
met by a caller with an additive 0/-inf mask.

Interface adaptations (exact, so no case is refused): the module takes no
scale, so the caller's scale replaces its 1/sqrt(head_dim) (which is the right
default, line 79); it has one head width for q, k and v, so q, k and v are
padded with zero columns to max(D, Dv) (zero products add nothing) and O is
cut back to Dv; it has as many K/V heads as query heads, so K/V heads are
repeated. The caller's mask follows the seed's convention (line 86: a 0/1
matrix, 0 = hidden), shape [B, 1, Lq, Lk] (line 322).
"""
import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

from ..layer import CONTEXT, Layer, one_width
from ._adapt import allowed_keys, fed_modules, no_grad, repeat_kv, skip_masked_keys, variants

BUGS = ("fill_1e9", "masked_keys_weighted")
WALKTHROUGH = "kv_from_query"
KERNEL_BUGS = BUGS + (WALKTHROUGH,)
# The variants gate_tutorials.py gates, in its tables' order.
VARIANTS = ("tutorial", "walkthrough") + tuple("only_" + b for b in KERNEL_BUGS) + (
    "pair_fill_1e9", "corrected", "tutorial_bf16", "corrected_bf16")
BATCH = "batch_from_query"  # the layer mode's: a kernel gate's K and V always have the queries' batch
# Where each defect is printed (seed file, line) and which kind it is
# (gate_tutorials.py prints them): "seed" a defect of the seed's code in its
# own use, "contract" a requirement of this project beyond the seed's use.
SEED = "004_aaf55d68f2fac64f.txt"
WHERE = {"kv_from_query": (SEED, 23, "seed"), "fill_1e9": (SEED, 339, "seed"),
         "masked_keys_weighted": (SEED, 342, "contract"), BATCH: (SEED, 335, "seed")}


class MultiHeadAttention(nn.Module):
    def __init__(self, model_dim, num_heads, dropout_p=0.0, fixed=frozenset({WALKTHROUGH})):
        super().__init__()
        assert model_dim % num_heads == 0, "model_dim must be divisible by num_heads"
        self.model_dim = model_dim
        self.num_heads = num_heads
        self.head_dim = model_dim // num_heads
        self.fixed = fixed
        self.w_q = nn.Linear(model_dim, model_dim)
        self.w_k = nn.Linear(model_dim, model_dim)
        self.w_v = nn.Linear(model_dim, model_dim)
        self.w_o = nn.Linear(model_dim, model_dim)
        self.dropout = nn.Dropout(dropout_p)
        self.scale = None  # the caller's scale (an interface adaptation); None: the seed's 1/sqrt(head_dim)

    def forward(self, x_query, x_context, mask=None):
        batch_size = x_query.size(0)
        q = self.w_q(x_query)
        context = x_query if (x_context is None or WALKTHROUGH not in self.fixed) else x_context
        k = self.w_k(context)
        v = self.w_v(context)
        q = q.view(batch_size, -1, self.num_heads, self.head_dim).transpose(1, 2)
        kv_batch = context.size(0) if BATCH in self.fixed else batch_size  # as written: x_query's batch
        k = k.view(kv_batch, -1, self.num_heads, self.head_dim).transpose(1, 2)
        v = v.view(kv_batch, -1, self.num_heads, self.head_dim).transpose(1, 2)
        if self.scale is None:
            scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        else:
            scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        if mask is not None:
            fill = float("-inf") if "fill_1e9" in self.fixed else -1e9
            scores = scores.masked_fill(mask == 0, fill)
        attn_weights = F.softmax(scores, dim=-1)
        if mask is not None and "fill_1e9" in self.fixed:
            attn_weights = attn_weights.masked_fill((mask == 0).all(-1, keepdim=True), 0.0)  # no visible key: O = 0
        attn_weights = self.dropout(attn_weights)
        if mask is not None and "masked_keys_weighted" in self.fixed:
            context = skip_masked_keys(attn_weights, v, mask != 0)
        else:
            context = torch.matmul(attn_weights, v)
        context = context.transpose(1, 2)
        context = context.contiguous()
        output = context.view(batch_size, -1, self.model_dim)
        output = self.w_o(output)
        return output


class Fed(nn.Module):
    """A projection with identity weights on each input it may receive: the
    gate's tensor for the input it was given (x_query or x_context)."""

    def __init__(self):
        super().__init__()
        self.table = {}

    def forward(self, x):
        return self.table[id(x)]


def _pad(x, width):
    return x if x.shape[-1] == width else F.pad(x, (0, width - x.shape[-1]))


def _attend(fixed):
    modules = fed_modules(lambda hq, w: MultiHeadAttention(hq * w, hq, fixed=fixed), ("w_q", "w_k", "w_v"), "w_o",
                          feed=Fed)

    @no_grad
    def attend(q, k, v, *, scale, causal, key_len, mask, dtype):
        b, lq, hq, d = q.shape
        lk, dv = k.shape[1], v.shape[3]
        w = max(d, dv)
        m = modules((hq, w))
        m.scale = scale
        qp = _pad(q, w).reshape(b, lq, hq * w)
        kp = _pad(repeat_kv(k, hq), w).reshape(b, lk, hq * w)
        vp = _pad(repeat_kv(v, hq), w).reshape(b, lk, hq * w)
        # x_query and x_context are the inputs a caller hands over; with
        # identity weights, w_q(x_query) = q, w_k(x_context) = k, and so on;
        # the walk-through's w_k(x_query) is q (same widths: interface above).
        x_query, x_context = qp, torch.empty(0)
        m.w_q.table = {id(x_query): qp}
        m.w_k.table = {id(x_context): kp, id(x_query): qp}
        m.w_v.table = {id(x_context): vp, id(x_query): qp}
        seen = None
        if causal or key_len is not None or mask is not None:
            seen = allowed_keys(b, 1, lq, lk, causal=causal, key_len=key_len, mask=None)
            if mask is not None:
                seen = allowed_keys(b, hq, lq, lk, causal=causal, key_len=key_len, mask=mask)
            seen = seen.to(q.dtype)  # the seed's 0/1 mask, [B, 1 or H, Lq, Lk]
        out = m(x_query, x_context, seen)
        return out.view(b, lq, hq, w)[..., :dv]

    return attend


def _declare():
    out = variants(sys.modules[__name__], _attend, KERNEL_BUGS, features=["causal", "padding", "mask"],
                   pairs=[("fill_1e9", "masked_keys_weighted")])
    # variants' `tutorial` has every switch in, the walk-through's projections
    # too: that is `walkthrough`; `tutorial` is the whole module (lines 284-347).
    for low in ("", "_bf16"):
        out["walkthrough" + low] = out.pop("tutorial" + low)
        declared = dict(out["corrected" + low].__attncheck__)
        out["tutorial" + low] = _attend(frozenset({WALKTHROUGH}))
        out["tutorial" + low].__attncheck__ = dict(declared, name=declared["name"].replace("corrected", "as written"))
    out["walkthrough"].__attncheck__["name"] = "tutorial seed004_mha (walk-through: K, V from x_query)"
    del out["walkthrough_bf16"]
    return out


globals().update(_declare())


# ---- The layer mode (attncheck.layer): the module with its own weights, called
# as the seed calls it, mha(x_query, x_context, mask), the mask a 0/1 matrix
# [B, 1, Lq, Lk] with 0 = hidden (lines 84-86, 322).

def _layer(fixed, mask_of=lambda visible: visible[:, None].float(), label=""):
    def build(case):
        return MultiHeadAttention(case.heads * case.head_dim, case.heads, fixed=fixed)

    def call(m, xs, visible):
        return m(xs["x_query"], xs["x_context"], None if visible is None else mask_of(visible))

    def weights(m):
        return {"q": m.w_q, "k": m.w_k, "v": m.w_v, "o": m.w_o}

    return Layer(build, call, weights, CONTEXT, one_width("004:304-313"), "any", name=f"seed004_mha {label}")


def _additive(visible):
    """The caller of seed 000's test script (and of torch's float masks): 0 where
    a key may be seen, -inf where not. The module's `mask == 0` hides the
    visible keys and shows the hidden ones."""
    return torch.zeros(visible.shape).masked_fill(~visible, float("-inf"))[:, None]


LAYER_BUGS = (WALKTHROUGH, BATCH, "fill_1e9")
layer_tutorial = _layer(frozenset({WALKTHROUGH}), label="as written")
layer_walkthrough = _layer(frozenset(), label="walk-through")
layer_only_kv_from_query = _layer(frozenset(LAYER_BUGS) - {WALKTHROUGH}, label="only kv_from_query")
layer_only_batch_from_query = _layer(frozenset(LAYER_BUGS) - {BATCH}, label="only batch_from_query")
layer_only_fill_1e9 = _layer(frozenset(LAYER_BUGS) - {"fill_1e9"}, label="only fill_1e9")
layer_additive_caller = _layer(frozenset(LAYER_BUGS), _additive, label="a caller with an additive mask")
layer_corrected = _layer(frozenset(LAYER_BUGS), label="corrected")
