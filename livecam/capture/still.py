"""Still images read with a size limit checked before decoding, and what kind of file a path is.

A decoded image takes 3 bytes per pixel, so a small PNG that says 40000x40000 costs 4.8 GB to
decode (and OpenCV raises a ``cv2.error`` past 2**30 pixels). :func:`decode_image` reads the
size from the header first (Pillow opens lazily: it parses the header and stops) and refuses a
large image before a pixel is decoded. Radiance HDR, which Pillow cannot read, is run-length
coded (a 25 MB file decodes to 6 GB of floats): its text header is read here. Other formats
Pillow cannot read (PFM, PAM) are decoded by OpenCV and checked after; they are uncompressed, so
their file size bounds their pixels. JPEG, PNG, WebP and BMP are decoded by Pillow, which
says nothing on stderr and refuses a file cut short (:func:`_decode_with_pillow`); the rest by
OpenCV. Used by ``image:`` inputs and identity photos.
"""

from __future__ import annotations

import io
import os
import re
import stat
import struct
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import cv2
import numpy as np

from livecam.core.errors import InputError
from livecam.core.types import ImageBGR

if TYPE_CHECKING:
    from PIL.Image import Image as PILImage

#: What :func:`header_size_px` returns when Pillow refuses to even report a size (it does so
#: past 2 x ``PIL.Image.MAX_IMAGE_PIXELS``): known only to be very large.
VERY_LARGE = (-1, -1)
#: What :func:`header_size_px` returns for a file in a format Pillow knows whose header is
#: broken: OpenCV would fail on it too, noisily.
BROKEN = (0, 0)
#: A Radiance HDR file's size line, after its header: ``-Y 512 +X 768`` is 768 wide, 512 high.
_RADIANCE_SIZE = re.compile(rb"([-+])([XY]) (\d{1,9}) ([-+])([XY]) (\d{1,9})")
#: The most of a Radiance HDR file read for its header (which has no length limit of its own).
_RADIANCE_HEADER_BYTES = 1 << 16
#: The EXIF tag of a photo's orientation (1: as stored; 2-8: mirrored and/or turned).
_EXIF_ORIENTATION = 0x0112
#: The formats (as Pillow names them) that Pillow decodes here; OpenCV decodes the rest (TIFF,
#: whose many kinds OpenCV and Pillow read differently, PFM, PAM, Radiance HDR, ...).
_PILLOW_DECODES = frozenset({"JPEG", "PNG", "WEBP", "BMP"})
#: Pixels above which a JPEG or PNG photo is decoded shrunk (``decode_pixels``): 4096 x 4096,
#: more than face analysis of a photo uses; a 100 MP image whole is 1 GB.
DECODE_PIXELS = 4096 * 4096
#: The same for an ``image:`` input, a still frame standing in for a camera (the capture size
#: asked of a camera where that is more): 2048 x 2048, 12.6 MB as BGR. A run holds the frame
#: and two swapped copies of it (the one going out, the next being made): 38 MB, against
#: 100 MB for a 10000 x 10000 image at 3333 x 3333 under :data:`DECODE_PIXELS`, which took
#: the run past 300 MB (docs/performance.md, ``python -m scripts.bench_big_image``).
STILL_INPUT_PIXELS = 2048 * 2048


def input_kind(path: Path, what: str) -> Literal["file", "pipe"]:
    """``"file"`` for a regular file, ``"pipe"`` for a FIFO, a pipe or a terminal
    (``/dev/stdin``); :class:`InputError` for anything else, naming ``what`` ("input file")."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise InputError(f"{what} {path} does not exist: check the path") from None
    except OSError as exc:
        raise InputError(f"{what} {path} cannot be read: {exc.strerror}") from None
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        raise InputError(f"{what} {path} is a folder: give a file")
    if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISSOCK(mode):
        return "pipe"
    raise InputError(f"{what} {path} is not a regular file or a pipe")


def _radiance_size_px(head: bytes) -> tuple[int, int] | None:
    """(width, height) of a Radiance HDR file from its first bytes ``head``; :data:`BROKEN`
    when it has no size line; None when it is no Radiance file."""
    if not head.startswith(b"#?"):
        return None
    _, blank, rest = head.partition(b"\n\n")
    match = _RADIANCE_SIZE.match(rest) if blank else None
    if match is None or match[2] == match[5]:
        return BROKEN
    sizes = {match[2]: int(match[3]), match[5]: int(match[6])}
    return sizes[b"X"], sizes[b"Y"]


def header_size_px(source: Path | bytes) -> tuple[int, int] | None:
    """(width, height) from the image header without decoding pixels; :data:`VERY_LARGE` when
    Pillow refuses to open it for its size, :data:`BROKEN` when its header is damaged; None
    when neither Pillow nor this module knows the format (OpenCV may still decode it)."""
    return _read_header(source)[0]


def _read_header(source: Path | bytes) -> tuple[tuple[int, int] | None, str | None]:
    """:func:`header_size_px`, and the format Pillow named ("JPEG", "PNG", ...) or None."""
    from PIL import Image, UnidentifiedImageError

    if isinstance(source, bytes):
        head = source[:_RADIANCE_HEADER_BYTES]
    else:
        try:
            with source.open("rb") as fh:
                head = fh.read(_RADIANCE_HEADER_BYTES)
        except OSError:
            return BROKEN, None  # as Pillow's own open would have said
    radiance = _radiance_size_px(head)
    if radiance is not None:
        return radiance, None
    fp = io.BytesIO(source) if isinstance(source, bytes) else source
    try:
        with warnings.catch_warnings():
            # Pillow warns from 89 MP on (our own limit decides) and of damaged TIFF tags (the
            # decoder says what matters)
            warnings.simplefilter("ignore")
            with Image.open(fp) as image:
                return (int(image.size[0]), int(image.size[1])), image.format
    except Image.DecompressionBombError:
        return VERY_LARGE, None
    except UnidentifiedImageError:
        return None, None
    except (OSError, ValueError, SyntaxError, EOFError, struct.error):
        return BROKEN, None  # a format Pillow knows, with a broken header


def _pillow_refuses_px() -> int:
    from PIL import Image

    return 2 * int(Image.MAX_IMAGE_PIXELS or 0)


def _undecodable(label: str) -> InputError:
    return InputError(f"{label} cannot be decoded (not an image, or a damaged one): give a "
                      "JPEG, PNG, WebP, BMP or TIFF file")


def _upright(image: PILImage) -> PILImage:
    """``image`` turned as its EXIF orientation says (as OpenCV's ``IMREAD_COLOR`` does); the
    same object when it says nothing to do (Pillow's ``exif_transpose`` would copy it)."""
    from PIL import ImageOps

    try:
        if image.getexif().get(_EXIF_ORIENTATION, 1) in range(2, 9):
            return ImageOps.exif_transpose(image)
    except (OSError, ValueError, SyntaxError, EOFError, KeyError, TypeError, struct.error):
        pass  # EXIF too broken to read: as it is stored, as OpenCV does
    return image


def _decode_with_pillow(source: Path | bytes, label: str) -> ImageBGR:
    """A JPEG, PNG, WebP or BMP file decoded by Pillow: the pixels of OpenCV's
    ``IMREAD_COLOR`` (the same libraries underneath; alpha dropped, 16 bits cut to their high 8,
    the EXIF orientation applied; a CMYK JPEG may differ by one level), without its lines on
    stderr.

    OpenCV's libjpeg and libpng write their warnings and errors ("Premature end of JPEG file",
    "Corrupt JPEG data: ...", "libpng error: Read Error") straight to the process's stderr,
    which no log level silences, and its libjpeg fills a JPEG cut short with grey; Pillow is
    silent and refuses a file cut short (:class:`InputError` saying so). A damaged JPEG scan
    decodes as far as it goes, in both.
    """
    from PIL import Image

    fp = io.BytesIO(source) if isinstance(source, bytes) else source
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Pillow's about odd EXIF data: not the user's to fix
            with Image.open(fp) as image:
                image.load()
                upright = _upright(image)
                if upright.mode.startswith("I"):  # 16-bit grey (PNG): its high byte
                    pixels = (np.asarray(upright).astype(np.uint32) >> 8).astype(np.uint8)
                else:
                    rgb = upright if upright.mode in ("RGB", "L") else upright.convert("RGB")
                    pixels = np.asarray(rgb, np.uint8)
    except (OSError, ValueError, SyntaxError, EOFError, struct.error) as exc:
        if "truncated" in str(exc):
            raise InputError(f"{label} is cut short (a download or copy that did not "
                             "finish?): give the whole file") from None
        raise _undecodable(label) from None
    to_bgr = cv2.COLOR_GRAY2BGR if pixels.ndim == 2 else cv2.COLOR_RGB2BGR
    return np.asarray(cv2.cvtColor(pixels, to_bgr), np.uint8)


def _decode_reduced(source: Path | bytes, size: tuple[int, int], decode_pixels: int,
                    label: str) -> ImageBGR | None:
    import zlib

    from livecam.capture.reduced import decode_reduced, reduction_factor

    try:
        return decode_reduced(source, reduction_factor(size, decode_pixels))
    except EOFError:
        raise InputError(f"{label} is cut short (a download or copy that did not finish?): "
                         "give the whole file") from None
    except (OSError, ValueError, SyntaxError, zlib.error, struct.error):
        raise _undecodable(label) from None


def _too_large(label: str, size: tuple[int, int], max_pixels: int, knob: str) -> InputError:
    limit_mp = max_pixels / 1e6
    if size == VERY_LARGE:
        said = f"larger than {_pillow_refuses_px() / 1e6:.0f} megapixels"
    else:
        said = f"{size[0]}x{size[1]} ({size[0] * size[1] / 1e6:.0f} megapixels)"
    return InputError(f"{label} is {said}, above {knob}={limit_mp:g}: scale it down, or raise "
                      f"{knob}")


def decode_image(source: Path | bytes, *, max_pixels: int, label: str, knob: str,
                 decode_pixels: int | None = None) -> ImageBGR:
    """Decode an image file (a path, or its bytes) to (H, W, 3) uint8 BGR.

    Raises :class:`InputError` when it is larger than ``max_pixels`` (``knob`` is the setting
    named in the message) or cannot be decoded; ``label`` ("photo a.jpg") starts each message.
    A JPEG or PNG of more than ``decode_pixels`` pixels (None: no such bound) is decoded
    shrunk by the smallest whole factor that brings it under, without its full-size pixels in
    memory (:mod:`livecam.capture.reduced`); the caller sees the smaller image.
    """
    size, image_format = _read_header(source)
    if size == BROKEN:
        raise _undecodable(label)
    if size == VERY_LARGE and max_pixels < _pillow_refuses_px():
        raise _too_large(label, size, max_pixels, knob)
    if size is not None and size[0] * size[1] > max_pixels:
        raise _too_large(label, size, max_pixels, knob)
    if (decode_pixels is not None and size is not None and size != VERY_LARGE
            and size[0] * size[1] > decode_pixels and image_format in ("JPEG", "PNG")):
        reduced = _decode_reduced(source, size, decode_pixels, label)
        if reduced is not None:
            return reduced
    if image_format in _PILLOW_DECODES and size != VERY_LARGE:
        return _decode_with_pillow(source, label)
    try:
        if isinstance(source, bytes):
            decoded = cv2.imdecode(np.frombuffer(source, np.uint8), cv2.IMREAD_COLOR)
        else:
            decoded = cv2.imread(str(source), cv2.IMREAD_COLOR)
    except cv2.error:  # e.g. past OpenCV's own 2**30-pixel limit
        decoded = None
    if decoded is None:
        raise _undecodable(label)
    image = np.asarray(decoded, np.uint8)
    if image.shape[0] * image.shape[1] > max_pixels:
        raise _too_large(label, (image.shape[1], image.shape[0]), max_pixels, knob)
    return image
