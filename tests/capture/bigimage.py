"""A real, valid PNG of any size in a few kilobytes: 1-bit greyscale, all black, so a
40000x40000 image costs 200 MB of zeros to compress (under a second), not 4.8 GB of pixels."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I",
                                                                    zlib.crc32(kind + data))


def write_big_png(path: Path, width: int, height: int) -> Path:
    row = bytes(1 + (width + 7) // 8)  # filter byte 0, then the row's bits
    comp = zlib.compressobj(1)
    rows_per_block = max(1, (1 << 22) // len(row))
    parts = []
    for start in range(0, height, rows_per_block):
        parts.append(comp.compress(row * min(rows_per_block, height - start)))
    parts.append(comp.flush())
    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header)
                     + _chunk(b"IDAT", b"".join(parts)) + _chunk(b"IEND", b""))
    return path


def write_big_hdr(path: Path, width: int, height: int) -> Path:
    """A Radiance HDR image (a format Pillow does not know, OpenCV decodes): each scanline run-
    length coded in 127-pixel runs, so 12000x12000 takes 9 MB on disk and 1.7 GB of floats
    decoded."""
    assert 8 <= width <= 0x7FFF  # the widths the run-length coding allows
    line = bytearray([2, 2, width >> 8, width & 0xFF])
    for value in (128, 64, 32, 129):  # R, G, B, exponent
        for start in range(0, width, 127):
            line += bytes([128 + min(127, width - start), value])
    header = f"#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y {height} +X {width}\n".encode()
    path.write_bytes(header + bytes(line) * height)
    return path
