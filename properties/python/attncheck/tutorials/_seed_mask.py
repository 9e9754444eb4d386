"""The additive float masks of the MHA/MQA tutorial's test script."""
import torch

from ._adapt import allowed_keys


def additive_mask(b, lq, lk, *, causal, key_len, top_left):
    """(B, Lq, Lk): 0 where a key may be seen, -inf elsewhere.

    top_left: the tutorial's causal mask, triu(full((B, n_q, n_k), -inf), 1),
    which lets query i see keys 0..i whatever the number of keys; otherwise
    bottom-right, aligned to the valid keys. Key padding is -inf past each
    sequence's length either way."""
    if causal and top_left:
        mask = torch.triu(torch.full((b, lq, lk), float("-inf")), diagonal=1)
        if key_len is not None:
            mask = mask.masked_fill(torch.arange(lk).view(1, 1, lk) >= key_len.view(b, 1, 1), float("-inf"))
        return mask
    ok = allowed_keys(b, 1, lq, lk, causal=causal, key_len=key_len, mask=None)[:, 0]
    return torch.zeros(b, lq, lk).masked_fill(~ok, float("-inf"))
