"""Pixels of a browser's PNG screenshot, and the QR codes in them, for the page tests.

Chromium writes 8-bit RGB or RGBA PNGs without interlacing, segno 1-bit grey; this reads
exactly those with zlib and numpy (no imaging library is a dependency of the project) and
hands the pixels to ``zxingcpp`` for decoding.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_pixels(data: bytes) -> np.ndarray:
    """(height, width, 4) uint8 RGBA of a non-interlaced PNG: 8-bit RGB or RGBA, 1- or
    8-bit grey."""
    assert data.startswith(_SIGNATURE), "not a PNG"
    pos, idat, header = len(_SIGNATURE), [], None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    assert header is not None
    width, height, depth, colour, _, _, interlace = header
    # RGB and RGBA of 8 bits (browsers), grey of 1 or 8 bits (segno's writer)
    assert interlace == 0 and (colour, depth) in ((2, 8), (6, 8), (0, 8), (0, 1)), header
    channels = {0: 1, 2: 3, 6: 4}[colour]
    stride = (width * channels * depth + 7) // 8
    bpp = max(1, channels * depth // 8)  # the filters' "pixel to the left", in bytes
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), dtype=np.uint8)
    raw = raw.reshape(height, stride + 1)
    out = np.zeros((height, stride), dtype=np.uint8)
    prev = np.zeros(stride, dtype=np.int32)
    for y in range(height):
        kind, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        if kind == 0:
            cur = line
        elif kind == 1:  # sub: a running sum of each channel along the row
            cur = np.cumsum(line.reshape(-1, bpp), axis=0).reshape(stride) & 0xFF
        elif kind == 2:  # up
            cur = (line + prev) & 0xFF
        else:  # average, paeth: the pixel to the left too, byte by byte (rows of text only)
            cur = np.array(_unfilter_row(int(kind), line.tolist(), prev.tolist(), bpp),
                           dtype=np.int32)
        out[y] = cur
        prev = cur
    if depth == 1:
        out = np.unpackbits(out, axis=1)[:, :width] * np.uint8(255)
    pixels = out.reshape(height, width, channels)
    if channels == 1:
        pixels = np.repeat(pixels, 3, axis=2)
    if pixels.shape[2] == 3:
        pixels = np.dstack([pixels, np.full((height, width), 255, np.uint8)])
    return pixels


def _unfilter_row(kind: int, line: list[int], prev: list[int], bpp: int) -> list[int]:
    cur = [0] * len(line)
    for x, value in enumerate(line):
        a = cur[x - bpp] if x >= bpp else 0
        b = prev[x]
        if kind == 3:
            pred = (a + b) // 2
        else:
            c = prev[x - bpp] if x >= bpp else 0
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
        cur[x] = (value + pred) & 0xFF
    return cur


def decode_qr(png: bytes) -> list[str]:
    """The texts of the QR codes in a screenshot (transparent pixels read as white)."""
    import zxingcpp

    rgba = png_pixels(png).astype(np.float32)
    alpha = rgba[..., 3:4] / 255.0
    rgb = rgba[..., :3] * alpha + 255.0 * (1.0 - alpha)
    grey = np.ascontiguousarray(rgb.mean(axis=2).round().astype(np.uint8))
    return [r.text for r in zxingcpp.read_barcodes(grey, formats=zxingcpp.BarcodeFormat.QRCode)]
