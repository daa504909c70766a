"""The fail-closed cover's cost a face (``livecam.swap.cover.FaceCover.cover_into``), per face
size on a 1080p frame, for the blur and pixelate styles. The GPU pipeline's collector draws it
on the host every frame a face is withheld (a face the edge search finds without a mesh stays
withheld while it stays), so it bounds that thread's frame rate.

    python -m scripts.bench_cover --out /tmp/bench_cover.json

Prints a table (best and median ms of ``--repeat`` calls) and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np

FACE_SIZES_PX = (100, 300, 600)


def _frame(height: int, width: int) -> np.ndarray:
    """A textured frame (smooth noise), so resizes and blends see real pixel values."""
    import cv2

    rng = np.random.default_rng(0)
    small = rng.integers(0, 256, (height // 40, width // 40, 3), dtype=np.uint8)
    return np.asarray(cv2.resize(small, (width, height), interpolation=cv2.INTER_CUBIC), np.uint8)


def measure(style: str, size_px: int, repeat: int) -> dict[str, float]:
    from livecam.core.types import Unswappable, WithheldFaces
    from livecam.swap.cover import FaceCover

    frame = _frame(1080, 1920)
    x0, y0 = 960 - size_px // 2, 540 - size_px // 2
    withheld = WithheldFaces(
        boxes_xyxy=np.array([[x0, y0, x0 + size_px, y0 + size_px]], np.float32),
        landmarks_xy=np.full((1, 0, 2), np.nan, np.float32), track_ids=np.array([1]),
        reasons=np.array([Unswappable.NO_MESH], np.uint8))
    cover = FaceCover(mode="cover", style=style)
    times = []
    for _ in range(repeat):
        out = frame.copy()
        t0 = time.perf_counter()
        cover.cover_into(out, withheld, 0)
        times.append((time.perf_counter() - t0) * 1e3)
    return {"best_ms": min(times), "median_ms": statistics.median(times)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--out", type=Path, default=Path("bench_cover.json"))
    args = parser.parse_args(argv)
    rows = []
    print("| style | face px | best ms | median ms |\n|---|---|---|---|")
    for style in ("blur", "pixelate"):
        for size in FACE_SIZES_PX:
            row = {"style": style, "face_px": size, **measure(style, size, args.repeat)}
            rows.append(row)
            print(f"| {style} | {size} | {row['best_ms']:.2f} | {row['median_ms']:.2f} |")
    args.out.write_text(json.dumps({"frame": "1920x1080", "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
