"""Frame codes: a number drawn into a frame as black/white bars, read back from its pixels.

A test that feeds a clip whose every frame carries its own index can tell, from an output frame
(or a screen grab of the preview window) alone, which input frame it came from: frames are
counted from pixels, not from livecam's bookkeeping.

    clip = write_coded_clip(path, webcam_bgr, n_frames=1024, fps=15.0, box_xyxy=corner)
    index = read_code(output_frame_bgr, box_xyxy=corner)      # None: no code there

The code is ``2 * bits`` vertical bars side by side in ``box_xyxy``: the value's bits, most
significant first, then their complements. A bar is read in the middle of its width and of the
box's height, and a read is refused (None) when a bar is grey or a bit equals its complement,
so a torn, blank, scaled or lightly compressed image gives the right value or None, never a
wrong one. Values are taken modulo ``2 ** bits``.
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction
from pathlib import Path

import numpy as np

from livecam.core.types import ImageBGR

BoxXYXY = tuple[int, int, int, int]


def _bars(value: int, bits: int) -> list[int]:
    ones = [(value >> (bits - 1 - b)) & 1 for b in range(bits)]
    return ones + [1 - v for v in ones]


def draw_code(image_bgr: ImageBGR, value: int, *, bits: int = 8,
              box_xyxy: BoxXYXY | None = None) -> ImageBGR:
    """A copy of ``image_bgr`` (H, W, 3) uint8 with ``value % 2**bits`` drawn in ``box_xyxy``
    (px, default: the whole image). The box should be at least ``2 * bits * 4`` px wide."""
    h, w = image_bgr.shape[:2]
    x1, y1, x2, y2 = box_xyxy or (0, 0, w, h)
    out = image_bgr.copy()
    edges = np.linspace(x1, x2, 2 * bits + 1).round().astype(int)
    for k, on in enumerate(_bars(value % (1 << bits), bits)):
        out[y1:y2, edges[k]:edges[k + 1]] = 255 * on
    return out


def coded_frame(value: int, *, size_px: tuple[int, int], bits: int = 8) -> ImageBGR:
    """A (height, width, 3) uint8 frame that is nothing but the code of ``value``."""
    width, height = size_px
    return draw_code(np.zeros((height, width, 3), np.uint8), value, bits=bits)


def read_code(image_bgr: np.ndarray, *, bits: int = 8,
              box_xyxy: BoxXYXY | None = None) -> int | None:
    """The value drawn by :func:`draw_code` in ``box_xyxy`` (px, default: the whole image),
    or None where no clean code is there (nothing drawn yet, a torn or blank image)."""
    h, w = image_bgr.shape[:2]
    x1, y1, x2, y2 = box_xyxy or (0, 0, w, h)
    bw, bh = (x2 - x1) / (2 * bits), y2 - y1
    band = image_bgr[y1 + int(bh * 0.3): y1 + max(int(bh * 0.7), int(bh * 0.3) + 1)]
    values = [float(band[:, int(x1 + bw * (k + 0.3)): max(int(x1 + bw * (k + 0.7)),
                                                           int(x1 + bw * (k + 0.3)) + 1)].mean())
              for k in range(2 * bits)]
    if any(60 < v < 195 for v in values):
        return None
    on = [v >= 128 for v in values]
    if any(on[k] == on[k + bits] for k in range(bits)):
        return None
    return sum(int(b) << (bits - 1 - k) for k, b in enumerate(on[:bits]))


def unwrap(codes: Iterable[int], *, bits: int) -> list[int]:
    """Codes read from frames in the order they were sent (each the frame index modulo
    ``2**bits``), turned back into indices: each is taken as the smallest index at or after
    the previous one. Right as long as frames are never reordered and no two neighbours are
    ``2**bits`` or more input frames apart; the first code is taken as is."""
    period = 1 << bits
    out: list[int] = []
    for code in codes:
        out.append(code if not out else out[-1] + (code - out[-1]) % period)
    return out


def write_coded_clip(path: Path, base_bgr: ImageBGR, *, n_frames: int, fps: float,
                     bits: int, box_xyxy: BoxXYXY) -> Path:
    """A clip of ``n_frames`` copies of ``base_bgr`` (H, W, 3) uint8 with frame k's index in
    ``box_xyxy``, as lossless H.264 (libx264rgb, qp 0, no B-frames) in MP4: decoded by
    ``file:`` input (OpenCV's FFmpeg) it gives back exactly ``draw_code(base_bgr, k, ...)``,
    so a test can compare an output frame with its input pixel for pixel. ``n_frames`` should
    be ``2**bits`` (or a divisor of it) for a looping input to keep index ≡ code."""
    import av

    h, w = base_bgr.shape[:2]
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream("libx264rgb", rate=Fraction(fps).limit_denominator(1001))
        stream.width, stream.height, stream.pix_fmt = w, h, "bgr24"
        stream.options = {"qp": "0", "preset": "ultrafast", "bf": "0"}
        for k in range(n_frames):
            image = draw_code(base_bgr, k, bits=bits, box_xyxy=box_xyxy)
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="bgr24")):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return path
