"""Peak memory (RSS) of `livecam run` and `livecam identity add` on one very large, small
image file (issue 39, item 14): print a table, write JSON.

    python -m scripts.bench_big_image [--side 10000] [--repeat 3] [--checkout DIR ...]
                                      [--json bench_big_image.json]

Each command runs as a user runs it (the CLI in a subprocess; its peak RSS is its own
VmHWM, see :mod:`tests.helpers.peak_rss`): ``run --input image:BIG --output null --frames
3`` with an empty identity library (frames pass through), the same with ``--identity astro``
(a face swapped in each frame), that to an MP4 file (``--output file:out.mp4``), and
``identity add``, each library in a temp folder. The
images: a PNG and a JPEG of ``--side`` x ``--side`` px, a flat colour canvas with a real face
(skimage's astronaut, 2048 px) in the middle, so the files stay small (a few MB) while their
pixels are 100 MP; and a 720x720 PNG of the face, for the baseline of each command.

``--checkout DIR`` (repeatable) measures the livecam in DIR (put first on ``PYTHONPATH`` of
the command): before/after pairs run in turn, each measurement ``--repeat`` times, and the
table gives the median and the range. Without it, the livecam this script imports.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
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


def measure(args: list[str], env: dict[str, str] | None
            ) -> tuple[float | None, int, float, str]:
    """(peak RSS MB, exit status, wall s, last `livecam` stderr line) of ``livecam ARGS``."""
    from tests.helpers.peak_rss import peak_rss_mb

    t0 = time.perf_counter()
    peak, code, err = peak_rss_mb(args, env=env)
    lines = [ln for ln in err.splitlines() if ln.startswith("livecam")]
    return peak, code, time.perf_counter() - t0, (lines or [""])[-1]


def checkout_env(checkout: Path | None) -> dict[str, str] | None:
    if checkout is None:
        return None
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(checkout), *filter(None, [env.get("PYTHONPATH")])])
    return env


def commands(folder: Path, path: Path) -> dict[str, list[str]]:
    quiet = ["--output", "null", "--frames", "3", "--set", "control.api=false", "--set",
             "control.hotkeys=false"]
    return {
        "run": ["run", "--input", f"image:{path}", *quiet,
                "--set", f"identity.library_dir={folder / 'empty'}"],
        "run --identity": ["run", "--input", f"image:{path}", *quiet, "--identity", "astro",
                           "--set", f"identity.library_dir={folder / 'astro'}"],
        # the issue's own command: the H.264 encoder's buffers grow with the frame too
        "run --identity mp4": ["run", "--input", f"image:{path}", *quiet[2:], "--output",
                               f"file:{folder / ('out-' + path.stem)}.mp4", "--identity",
                               "astro", "--set", f"identity.library_dir={folder / 'astro'}"],
        "identity add": ["identity", "--set",
                         f"identity.library_dir={folder / ('lib-' + path.stem)}",
                         "add", "astro", str(path), "--force"],
    }


@dataclass
class Sample:
    peak_rss_mb: float | None
    exit: int
    wall_s: float
    error: str


def summary(label: str, file_kb: int, command: str, checkout: str,
            runs: list[Sample]) -> dict[str, object]:
    peaks = [r.peak_rss_mb for r in runs if r.peak_rss_mb is not None]
    return {"image": label, "file_kb": file_kb, "command": command, "checkout": checkout,
            "peak_rss_mb_median": round(statistics.median(peaks), 1) if peaks else None,
            "peak_rss_mb_min": min(peaks, default=None),
            "peak_rss_mb_max": max(peaks, default=None),
            "exits": sorted({r.exit for r in runs}),
            "wall_s_median": round(statistics.median(r.wall_s for r in runs), 1),
            "error": next((r.error for r in runs if r.error), ""),
            "runs": [asdict(r) for r in runs]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--checkout", type=Path, action="append", default=[])
    parser.add_argument("--json", type=Path, default=Path("bench_big_image.json"))
    args = parser.parse_args()
    checkouts: list[Path | None] = list(args.checkout) or [None]
    samples: dict[tuple[str, str, str], list[Sample]] = {}
    sizes_kb: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        images = make_images(folder, args.side)
        sizes_kb = {label: round(path.stat().st_size / 1e3) for label, path in images.items()}
        # the library of the `run --identity` rows: the small photo's face as `astro`
        _, code, _, said = measure(["identity", "--set", f"identity.library_dir={folder / 'astro'}",
                                    "add", "astro", str(images["720x720 png (baseline)"]),
                                    "--force"], checkout_env(checkouts[0]))
        if code != 0:
            raise SystemExit(f"identity add for the `run --identity` rows failed: {said}")
        for _ in range(args.repeat):
            for label, path in images.items():
                for command, argv in commands(folder, path).items():
                    for checkout in checkouts:  # before/after in turn
                        shutil.rmtree(folder / f"lib-{path.stem}", ignore_errors=True)
                        rss, code, wall, said = measure(argv, checkout_env(checkout))
                        samples.setdefault((label, command, str(checkout or "this")), []).append(
                            Sample(None if rss is None else round(rss, 1), code,
                                   round(wall, 1), said))
    rows = [summary(label, sizes_kb[label], command, checkout, runs)
            for (label, command, checkout), runs in samples.items()]
    print(f"{'image':24} {'file':>9} {'command':18} {'checkout':18} {'median':>9} "
          f"{'range':>9} {'n':>2} {'exit':>4} {'wall':>6}")
    for r in rows:
        median = r["peak_rss_mb_median"]
        span = "-" if median is None else f"{r['peak_rss_mb_min']:.0f}-{r['peak_rss_mb_max']:.0f}"
        exits = ",".join(map(str, r["exits"]))  # type: ignore[call-overload]
        print(f"{r['image']:24} {r['file_kb']:>6} KB {r['command']:18} "
              f"{str(r['checkout'])[-18:]:18} {median or float('nan'):>6.0f} MB {span:>9} "
              f"{len(r['runs']):>2} {exits:>4} "  # type: ignore[arg-type]
              f"{r['wall_s_median']:>5.1f}s" + (f"  {r['error']}" if r["error"] else ""))
    args.json.write_text(json.dumps({"side": args.side, "repeat": args.repeat,
                                     "rows": rows}, indent=2) + "\n")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
