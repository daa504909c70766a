"""Peak memory (RSS) of `livecam run` and `livecam identity add` on one very large, small
image file (issue 39, item 14): print a table, write JSON.

    python -m scripts.bench_big_image [--side 10000] [--json bench_big_image.json]

Each command runs as a user runs it (the CLI in a subprocess; its peak RSS is its own
VmHWM, see :mod:`tests.helpers.peak_rss`): ``run --input image:BIG --output null --frames
3`` and ``identity add`` with a library in a temp folder. The images: a PNG and a JPEG of
``--side`` x ``--side`` px, a flat colour canvas with a real face (skimage's astronaut, 2048
px) in the middle, so the files stay small (a few MB) while their pixels are 100 MP; and a
720x720 PNG of the face, for the baseline of each command. The script uses only the CLI, so
it also measures another checkout: ``PYTHONPATH=/path/to/before python -m scripts.bench_big_image``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path


def make_images(folder: Path, side: int) -> dict[str, Path]:
    import cv2
    import numpy as np
    from skimage import data

    face = cv2.resize(np.ascontiguousarray(data.astronaut()[:, :, ::-1]), (2048, 2048),
                      interpolation=cv2.INTER_CUBIC)
    canvas = np.empty((side, side, 3), np.uint8)
    canvas[:] = (60, 110, 170)
    top = (side - 2048) // 2
    canvas[top:top + 2048, top:top + 2048] = face
    paths = {f"{side}x{side} png": folder / "big.png", f"{side}x{side} jpeg": folder / "big.jpg"}
    cv2.imwrite(str(paths[f"{side}x{side} png"]), canvas)
    cv2.imwrite(str(paths[f"{side}x{side} jpeg"]), canvas, [cv2.IMWRITE_JPEG_QUALITY, 90])
    del canvas
    small = cv2.resize(face, (720, 720))
    paths["720x720 png (baseline)"] = folder / "small.png"
    cv2.imwrite(str(paths["720x720 png (baseline)"]), small)
    return paths


def measure(args: list[str]) -> tuple[float | None, int, float, str]:
    """(peak RSS MB, exit status, wall s, last `livecam` stderr line) of ``livecam ARGS``."""
    from tests.helpers.peak_rss import peak_rss_mb

    t0 = time.perf_counter()
    peak, code, err = peak_rss_mb(args)
    lines = [ln for ln in err.splitlines() if ln.startswith("livecam")]
    return peak, code, time.perf_counter() - t0, (lines or [""])[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", type=int, default=10000)
    parser.add_argument("--json", type=Path, default=Path("bench_big_image.json"))
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        images = make_images(folder, args.side)
        for label, path in images.items():
            size_kb = path.stat().st_size / 1e3
            commands = {
                "run": ["run", "--input", f"image:{path}", "--output", "null", "--frames", "3",
                        "--set", "control.api=false", "--set", "control.hotkeys=false"],
                "identity add": ["identity", "--set",
                                 f"identity.library_dir={folder / ('lib-' + path.stem)}",
                                 "add", "astro", str(path), "--force"],
            }
            for command, argv in commands.items():
                rss, code, wall, said = measure(argv)
                rows.append({"image": label, "file_kb": round(size_kb), "command": command,
                             "peak_rss_mb": None if rss is None else round(rss, 1),
                             "exit": code, "wall_s": round(wall, 1), "error": said})
    print(f"{'image':24} {'file':>9} {'command':13} {'peak RSS':>10} {'exit':>4} {'wall':>6}")
    for r in rows:
        print(f"{r['image']:24} {r['file_kb']:>6} KB {r['command']:13} "
              f"{r['peak_rss_mb'] or float('nan'):>7.0f} MB {r['exit']:>4} {r['wall_s']:>5.1f}s"
              + (f"  {r['error']}" if r["error"] else ""))
    args.json.write_text(json.dumps({"side": args.side, "rows": rows}, indent=2) + "\n")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
