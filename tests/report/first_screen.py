"""Where the first failure card sits in a screenshot of the gate's HTML report.

    python3 first_screen.py SCREENSHOT.png HEIGHT

The screenshot is Chromium's PNG of the report in a 1280 x HEIGHT viewport.
A failure card's background (#fffafa, the page's .card rule) is the only
colour of its kind on a gate report; the first pixel row holding a run of at
least 300 such pixels is where the first card's body begins. Exits 0 when
that row lies within the first HEIGHT rows (the first screen), 1 when there
is none. Reads the PNG with the standard library alone (8-bit RGB or RGBA,
non-interlaced: what Chromium writes).
"""
import struct
import sys
import zlib

CARD = (0xFF, 0xFA, 0xFA)
RUN = 300


def rows(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise SystemExit(f"{path}: not a PNG")
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in (2, 6) or interlace:
        raise SystemExit(f"{path}: an 8-bit RGB(A) non-interlaced PNG expected, got depth {depth}, colour {colour}")
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    prev = bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if f == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif f == 2:
            for i in range(stride):
                line[i] = (line[i] + prev[i]) & 0xFF
        elif f == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif f == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        yield y, line, bpp
        prev = line


def first_card_row(path):
    for y, line, bpp in rows(path):
        run = 0
        for x in range(0, len(line), bpp):
            run = run + 1 if tuple(line[x:x + 3]) == CARD else 0
            if run >= RUN:
                return y
    return None


if __name__ == "__main__":
    path, height = sys.argv[1], int(sys.argv[2])
    y = first_card_row(path)
    if y is None:
        print(f"first_screen: no failure card in {path}")
        sys.exit(1)
    print(f"first_screen: the first failure card begins at row {y} of {height}")
    sys.exit(0 if y < height else 1)
