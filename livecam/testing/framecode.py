"""A frame number drawn into a corner of each clip frame, read back from livecam's output.

In live mode ``livecam run`` drops and repeats frames, so output frame k is not input frame k.
Each clip frame carries its own index as a row of black and white cells in the bottom-left
corner (away from the faces); :func:`read` recovers it from an output frame, through H.264 at
any sane quality. Layout, left to right: a white and a black start cell, ``BITS`` data bits
(most significant first), an even-parity cell, a black and a white end cell. A frame whose
cells do not read cleanly (the black frames sent before the first result, a damaged code)
gives None.
"""

from __future__ import annotations

import numpy as np

from livecam.core.types import ImageBGR

BITS = 12
CELL_PX = 10
MARGIN_PX = 6
_CELLS = 2 + BITS + 1 + 2
# a cell must be clearly black or white: grey levels between these are unreadable
_BLACK_MAX, _WHITE_MIN = 80, 175


def code_box_xyxy(size: tuple[int, int]) -> tuple[int, int, int, int]:
    """Where the code is drawn in a (W, H) frame (clips keep faces out of it)."""
    x0, y1 = MARGIN_PX, size[1] - MARGIN_PX
    return (x0 - 2, y1 - CELL_PX - 2, x0 + _CELLS * CELL_PX + 2, y1 + 2)


def _bits(index: int) -> list[int]:
    data = [(index >> (BITS - 1 - i)) & 1 for i in range(BITS)]
    return [1, 0, *data, sum(data) % 2, 0, 1]


def stamp(image_bgr: ImageBGR, index: int) -> ImageBGR:
    """A copy of ``image_bgr`` (H, W, 3) uint8 with ``index`` (0 <= index < 2**BITS) drawn."""
    if not 0 <= index < 1 << BITS:
        raise ValueError(f"frame index {index} does not fit in {BITS} bits")
    out = image_bgr.copy()
    x0, y0, x1, y1 = code_box_xyxy((out.shape[1], out.shape[0]))
    out[y0:y1, x0:x1] = 128
    top = y1 - 2 - CELL_PX
    for k, bit in enumerate(_bits(index)):
        x = MARGIN_PX + k * CELL_PX
        out[top:top + CELL_PX, x:x + CELL_PX] = 255 if bit else 0
    return out


def read(image_bgr: ImageBGR) -> int | None:
    """The index drawn by :func:`stamp`, or None where no clean code is there."""
    h, w = image_bgr.shape[:2]
    _, _, _, y1 = code_box_xyxy((w, h))
    top = y1 - 2 - CELL_PX
    grey = image_bgr[top + 2:top + CELL_PX - 2].astype(np.float32).mean(axis=2)
    values = []
    for k in range(_CELLS):
        x = MARGIN_PX + k * CELL_PX
        level = float(grey[:, x + 2:x + CELL_PX - 2].mean())
        if _BLACK_MAX < level < _WHITE_MIN:
            return None
        values.append(1 if level >= _WHITE_MIN else 0)
    if values[:2] != [1, 0] or values[-2:] != [0, 1]:
        return None
    data = values[2:2 + BITS]
    if sum(data) % 2 != values[2 + BITS]:
        return None
    return int("".join(map(str, data)), 2)
