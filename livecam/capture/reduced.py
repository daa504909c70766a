"""Decode a very large image at a fraction of its size, without its full-size pixels in memory.

A 300 KB PNG can hold 10,000 x 10,000 pixels: decoded whole, that is 400 MB in Pillow, then
300 MB as BGR, then copies (1.1 GB peak for `livecam run` and `identity add`), when neither
needs more than a few megapixels. :func:`decode_reduced` decodes it shrunk by a whole factor:

- JPEG: the decoder's own DCT scaling (Pillow's ``draft``) by the first of 2, 4, 8 at or past
  the factor, then an area resize for a factor past 8.
- PNG (not interlaced, in the pixel kinds Pillow can pack back): a strip of rows at a time.
  The compressed rows are inflated here; each strip goes to Pillow's own PNG row decoder,
  after the strip before's last row written out unfiltered (PNG's filters refer to the row
  above), and is area-averaged by the factor. The result is that of an area resize of the
  whole image, strip by strip; memory is one strip, not the image.

Anything else returns None: the caller decodes it whole (its size limit still holds).
"""

from __future__ import annotations

import io
import struct
import warnings
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING

import cv2
import numpy as np

from livecam.core.types import ImageBGR

if TYPE_CHECKING:
    from PIL.Image import Image as PILImage
    from PIL.ImageFile import ImageFile

#: Bytes of decoded rows per strip (bounded memory, few decoder calls).
_STRIP_BYTES = 1 << 20
#: PNG colour type -> channels.
_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}


def reduction_factor(size: tuple[int, int], max_pixels: int) -> int:
    """The smallest whole factor that brings ``size`` (w, h) to at most ``max_pixels``."""
    w, h = size
    factor = 1
    while (w // factor) * (h // factor) > max_pixels:
        factor += 1
    return factor


def decode_reduced(source: Path | bytes, factor: int) -> ImageBGR | None:
    """``source`` (a JPEG or PNG file, or its bytes) decoded about ``factor`` times smaller
    on each side, (H, W, 3) uint8 BGR; None when this kind of file is not handled here."""
    from PIL import Image

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # DecompressionBombWarning: the caller checked the size
        fp: IO[bytes] = (io.BytesIO(source) if isinstance(source, bytes)
                         else open(source, "rb"))  # noqa: SIM115 -- closed by the `with`
        with fp, Image.open(fp) as image:
            if image.format == "JPEG":
                if image.getexif().get(0x0112, 1) in range(2, 9):
                    return None  # turned by EXIF: the whole-image path turns it
                return _jpeg(image, factor)
            if image.format == "PNG" and len(image.tile) == 1 and not image.info.get("interlace"):
                fp.seek(0)
                return _png(fp, image, factor)
    return None


def _jpeg(image: ImageFile, factor: int) -> ImageBGR:
    w, h = image.size
    # the DCT scale (1/2, 1/4, 1/8) at or past the factor: the decoder never holds more
    scale = next((s for s in (1, 2, 4, 8) if s >= factor), 8)
    image.draft("RGB", (-(-w // scale), -(-h // scale)))
    pixels = np.asarray(image.convert("RGB"), np.uint8)
    target = (max(1, w // factor), max(1, h // factor)) if factor > 8 else None
    if target is not None and (pixels.shape[1], pixels.shape[0]) != target:
        pixels = np.asarray(cv2.resize(pixels, target, interpolation=cv2.INTER_AREA), np.uint8)
    return np.asarray(cv2.cvtColor(pixels, cv2.COLOR_RGB2BGR), np.uint8)


class _NotHandled(Exception):
    """A PNG this module leaves to the whole-image decoder."""


def _idat(fp: IO[bytes]) -> Iterator[bytes]:
    """The PNG's compressed image data, chunk by chunk."""
    fp.seek(8)
    while True:
        head = fp.read(8)
        if len(head) < 8:
            raise EOFError("PNG cut short")
        length, kind = struct.unpack(">I4s", head)
        if kind == b"IDAT":
            data = fp.read(length)
            if len(data) < length:
                raise EOFError("PNG cut short")
            yield data
            fp.seek(4, io.SEEK_CUR)
        elif kind == b"IEND":
            return
        elif kind == b"eXIf":
            raise _NotHandled  # may turn the image: the whole-image path does
        else:
            fp.seek(length + 4, io.SEEK_CUR)


def _png(fp: IO[bytes], image: ImageFile, factor: int) -> ImageBGR | None:
    fp.seek(16)
    w, h, depth, colour = struct.unpack(">IIBB", fp.read(10))
    if colour not in _CHANNELS:
        return None
    rawmode = image.tile[0].args
    if not isinstance(rawmode, str):
        return None
    palette = image.getpalette() if image.mode == "P" else None
    row_bytes = 1 + (w * depth * _CHANNELS[colour] + 7) // 8
    inflate = zlib.decompressobj()
    chunks = _idat(fp)
    try:
        return _png_strips(image, chunks, inflate, w, h, rawmode, row_bytes, factor, palette)
    except (_NotHandled, StopIteration):
        return None


def _png_strips(image: PILImage, chunks: Iterator[bytes], inflate: zlib._Decompress, w: int,
                h: int, rawmode: str, row_bytes: int, factor: int,
                palette: list[int] | None) -> ImageBGR | None:
    rows = max(factor, (_STRIP_BYTES // row_bytes) // factor * factor)
    pending = b""
    previous: bytes | None = None  # the last row above, unfiltered
    # each strip goes straight to its rows here: a list of strips concatenated, then turned to
    # BGR, held three copies of the result at once (+100 MB at 3333 x 3333)
    out = np.empty((h // factor, max(1, w // factor), 3), np.uint8)
    for top in range(0, h, rows):
        n = min(rows, h - top)
        while len(pending) < n * row_bytes:
            more = inflate.decompress(inflate.unconsumed_tail or next(chunks),
                                      n * row_bytes - len(pending))
            if not more and inflate.eof:
                raise EOFError("PNG cut short")
            pending += more
        filtered, pending = pending[:n * row_bytes], pending[n * row_bytes:]
        strip = _decode_rows(image.mode, rawmode, w, filtered, n, previous)
        if strip is None:
            return None
        previous = strip.crop((0, n - 1, w, n)).tobytes("raw", rawmode)
        shrunk = _shrink(_as_array(strip, palette), factor)
        if len(shrunk):
            first = top // factor
            cv2.cvtColor(shrunk, cv2.COLOR_RGB2BGR, dst=out[first:first + len(shrunk)])
    return out


def _decode_rows(mode: str, rawmode: str, w: int, filtered: bytes, n: int,
                 previous: bytes | None) -> PILImage | None:
    """Pillow's PNG row decoder on ``n`` filtered rows, the unfiltered row above (filter 0)
    first where there is one; the Pillow image of the ``n`` rows, or None."""
    from PIL import Image

    above = b"" if previous is None else b"\x00" + previous
    skip = 0 if previous is None else 1
    target = Image.core.new(mode, (w, n + skip))
    decoder = Image._getdecoder(mode, "zip", (rawmode,))
    decoder.setimage(target, (0, 0, w, n + skip))
    try:
        _, error = decoder.decode(zlib.compress(above + filtered, 0))
    finally:
        decoder.cleanup()
    if error < 0:  # a row with an unknown filter, ...
        raise ValueError(f"damaged PNG rows (Pillow's decoder said {error})")
    strip = Image.Image()._new(target)
    return strip.crop((0, skip, w, n + skip)) if skip else strip


def _as_array(strip: PILImage, palette: list[int] | None) -> np.ndarray:
    """A strip as RGB uint8 (alpha dropped, 16 bits cut to their high 8, palette applied)."""
    if strip.mode == "P" and palette is not None:
        strip.putpalette(palette)
    if strip.mode.startswith("I"):
        grey = (np.asarray(strip).astype(np.uint32) >> 8).astype(np.uint8)
        return np.asarray(cv2.cvtColor(grey, cv2.COLOR_GRAY2RGB), np.uint8)
    return np.asarray(strip.convert("RGB"), np.uint8)


def _shrink(rgb: np.ndarray, factor: int) -> np.ndarray:
    if factor == 1:
        return rgb
    h, w = rgb.shape[:2]
    size = (max(1, w // factor), h // factor)
    if size[1] == 0:  # the image's last rows, fewer than the factor: cut, as a whole resize
        return rgb[:0, :size[0]]
    return np.asarray(cv2.resize(rgb[:size[1] * factor, :size[0] * factor], size,
                                 interpolation=cv2.INTER_AREA), np.uint8)
