"""The keys a sliding window and a chunk leave visible (docs/spec.md "Variants"),
for the numpy and the torch subjects alike."""


def window_and_chunk(ok, j, p, *, window, chunk, floor_div):
    """ok narrowed to the keys j that aligned position p sees through the window
    (left, right; -1 is unbounded) and the chunk (floor(j / chunk) == floor(p / chunk)).
    ok, j and p are numpy arrays or torch tensors that broadcast together;
    floor_div is that library's floor division (toward minus infinity: p may be negative)."""
    if window is not None:
        left, right = window
        if left >= 0:
            ok = ok & (j >= p - left)
        if right >= 0:
            ok = ok & (j <= p + right)
    if chunk is not None:
        ok = ok & (floor_div(j, chunk) == floor_div(p, chunk))
    return ok
