"""Still images read with a size limit checked before decoding, and what kind of file a path is.

A decoded image takes 3 bytes per pixel, so a small PNG that says 40000x40000 costs 4.8 GB to
decode (and OpenCV raises a ``cv2.error`` past 2**30 pixels). :func:`decode_image` reads the
size from the header first (Pillow opens lazily: it parses the header and stops) and refuses a
large image before a pixel is decoded. Radiance HDR, which Pillow cannot read, is run-length
coded (a 25 MB file decodes to 6 GB of floats): its text header is read here. Other formats
Pillow cannot read (PFM, PAM) are decoded by OpenCV and checked after; they are uncompressed, so
their file size bounds their pixels. Used by ``image:`` inputs and identity photos.
"""

from __future__ import annotations

import io
import os
import re
import stat
import struct
import warnings
from pathlib import Path
from typing import Literal

import cv2
import numpy as np

from livecam.core.errors import InputError
from livecam.core.types import ImageBGR

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
    from PIL import Image, UnidentifiedImageError

    if isinstance(source, bytes):
        head = source[:_RADIANCE_HEADER_BYTES]
    else:
        try:
            with source.open("rb") as fh:
                head = fh.read(_RADIANCE_HEADER_BYTES)
        except OSError:
            return BROKEN  # as Pillow's own open would have said
    radiance = _radiance_size_px(head)
    if radiance is not None:
        return radiance
    fp = io.BytesIO(source) if isinstance(source, bytes) else source
    try:
        with warnings.catch_warnings():
            # Pillow warns from 89 MP on; our own limit decides
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(fp) as image:
                return int(image.size[0]), int(image.size[1])
    except Image.DecompressionBombError:
        return VERY_LARGE
    except UnidentifiedImageError:
        return None
    except (OSError, ValueError, SyntaxError, EOFError, struct.error):
        return BROKEN  # a format Pillow knows, with a broken header


def _pillow_refuses_px() -> int:
    from PIL import Image

    return 2 * int(Image.MAX_IMAGE_PIXELS or 0)


def _undecodable(label: str) -> InputError:
    return InputError(f"{label} cannot be decoded (not an image, or a damaged one): give a "
                      "JPEG, PNG, WebP, BMP or TIFF file")


def _too_large(label: str, size: tuple[int, int], max_pixels: int, knob: str) -> InputError:
    limit_mp = max_pixels / 1e6
    if size == VERY_LARGE:
        said = f"larger than {_pillow_refuses_px() / 1e6:.0f} megapixels"
    else:
        said = f"{size[0]}x{size[1]} ({size[0] * size[1] / 1e6:.0f} megapixels)"
    return InputError(f"{label} is {said}, above {knob}={limit_mp:g}: scale it down, or raise "
                      f"{knob}")


def decode_image(source: Path | bytes, *, max_pixels: int, label: str, knob: str) -> ImageBGR:
    """Decode an image file (a path, or its bytes) to (H, W, 3) uint8 BGR.

    Raises :class:`InputError` when it is larger than ``max_pixels`` (``knob`` is the setting
    named in the message) or cannot be decoded; ``label`` ("photo a.jpg") starts each message.
    """
    size = header_size_px(source)
    if size == BROKEN:
        raise _undecodable(label)
    if size == VERY_LARGE and max_pixels < _pillow_refuses_px():
        raise _too_large(label, size, max_pixels, knob)
    if size is not None and size[0] * size[1] > max_pixels:
        raise _too_large(label, size, max_pixels, knob)
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
