"""Run a leak clip through ``livecam run`` as a user would, in live mode, and judge the output.

:class:`LeakBench` owns a scratch folder with its own user data/config/cache dirs (nothing
touches the real home), an identity made from skimage's astronaut with ``livecam identity
add``, and the clips written as H.264 files. :meth:`LeakBench.measure` runs

    livecam run --input file:CLIP --output file:OUT --identity astro --frames N
                --set advanced.capture.loop=true ... (the clip's and the caller's --set)

in a subprocess (the ``livecam`` command's own entry point), live mode (the default
``advanced.pipeline.realtime: true``: the file is paced at its 30 fps like a camera, frames are
dropped and repeated as the machine's load dictates; it plays :data:`PASSES` times and the run stops
after as many output frames, plus the black ones at start-up), then decodes the output and
hands it to
:func:`tests.helpers.leak_judge.judge`. Used by ``scripts/leak_table.py`` and ``tests/leak``.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Collection
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

import numpy as np

from livecam.core.types import ImageBGR
from tests.helpers.clips import FrameTruth
from tests.helpers.leak_clips import LeakClip, decode, write_clip
from tests.helpers.leak_judge import LeakReport, judge

IDENTITY = "astro"
#: The clip plays this many times (``advanced.capture.loop``, as a camera never stops): start-up
#: under load (black frames until the first result) may eat much of the first pass, never the
#: second, and the jump back to frame 0 is one more scene cut to get right.
PASSES = 2
#: Output frames sent beyond the passes: the black frames before the first result.
EXTRA_FRAMES = 30
# live mode said explicitly: a file-to-file run is offline by default
_RUN_SETTINGS = ("advanced.pipeline.realtime=true", "advanced.capture.loop=true",
                 "control.api=false", "control.hotkeys=false",
                 "advanced.pipeline.status_interval_s=0", "advanced.output.file_crf=14")


@dataclass
class Measured:
    """One run: the judge's report, the run's wall time and its log's last lines."""

    clip: str
    settings: tuple[str, ...]
    report: LeakReport
    wall_s: float
    log_tail: str


class LeakBench:
    """A scratch home for leak runs (see the module docstring). ``livecam_path``: run the
    ``livecam`` package found there instead of this one (a checkout to compare with). Any one
    thread."""

    def __init__(self, root: Path, *, livecam_path: Path | None = None) -> None:
        self.root = root.resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.env = dict(os.environ, XDG_DATA_HOME=str(root / "data"),
                        XDG_CONFIG_HOME=str(root / "config"), XDG_CACHE_HOME=str(root / "cache"))
        if livecam_path is not None:  # measure another checkout (e.g. before a change)
            self.env["PYTHONPATH"] = str(livecam_path)
        else:  # this process's livecam, wherever it was imported from
            import livecam

            here = str(Path(livecam.__file__).resolve().parents[1])
            self.env["PYTHONPATH"] = os.pathsep.join(
                p for p in (here, os.environ.get("PYTHONPATH", "")) if p)
        self._clips: dict[str, tuple[Path, list[FrameTruth], list[ImageBGR]]] = {}

    def livecam(self, *args: str, timeout_s: float = 600.0) -> subprocess.CompletedProcess[str]:
        # cwd: ``python -m`` puts the working directory first on sys.path, where a checkout
        # would shadow the package asked for (``livecam_path``)
        return subprocess.run([sys.executable, "-m", "livecam.cli", *args], capture_output=True,
                              text=True, timeout=timeout_s, env=self.env, check=False,
                              cwd=self.root)

    def add_identity(self) -> None:
        """``livecam identity add astro astronaut.png --force`` (93 px face: a warning only)."""
        import cv2
        from skimage import data

        photo = self.root / "astronaut.png"
        cv2.imwrite(str(photo), np.ascontiguousarray(data.astronaut()[:, :, ::-1]))
        done = self.livecam("identity", "add", IDENTITY, str(photo), "--force")
        if done.returncode != 0:
            raise RuntimeError(f"identity add failed: {done.stderr[-2000:]}")

    def clip_file(self, clip: LeakClip) -> tuple[Path, list[FrameTruth], list[ImageBGR]]:
        """The clip as an H.264 file, its truth, and its frames as decoded (what livecam sees)."""
        if clip.name not in self._clips:
            path = self.root / f"{clip.name}.mp4"
            truth = write_clip(clip, path)
            self._clips[clip.name] = (path, truth, decode(path))
        return self._clips[clip.name]

    def measure(self, clip: LeakClip, *settings: str) -> Measured:
        """Run ``clip`` through ``livecam run`` (live mode) with ``settings`` and judge it."""
        path, truth, inputs = self.clip_file(clip)
        # one file name per setting list; settings may hold paths (the stand-ins' folders)
        tag = hashlib.sha1("\n".join(settings).encode()).hexdigest()[:12] if settings \
            else "default"
        out = self.root / f"{clip.name}__{tag}.out.mp4"
        sets = [x for s in (*_RUN_SETTINGS, *clip.settings, *settings) for x in ("--set", s)]
        t0 = time.perf_counter()
        done = self.livecam("run", "--input", f"file:{path}", "--output", f"file:{out}",
                            "--identity", IDENTITY,
                            "--frames", str(PASSES * len(inputs) + EXTRA_FRAMES),
                            *sets)
        wall_s = time.perf_counter() - t0
        if done.returncode != 0:
            raise RuntimeError(f"livecam run failed ({done.returncode}): {done.stderr[-3000:]}")
        outputs = decode(out)
        report = judge(inputs, truth, outputs)
        return Measured(clip.name, tuple(settings), report, wall_s,
                        "\n".join(done.stderr.strip().splitlines()[-3:]))


def run_in_process(clip: LeakClip, identity_photo: Path, *settings: str,
                   frames: int | None = None, only: Collection[int] | None = None,
                   encoded: bool = False, passes: int = 1,
                   ) -> tuple[list[ImageBGR], list[FrameTruth], LeakReport]:
    """``clip`` (its first ``frames``) through livecam's analysis and classic swap stages in
    this process, offline (every frame, in order, nothing encoded), judged: a quick,
    deterministic twin of :meth:`LeakBench.measure` for the fast tests. ``only``: the input
    frames to process (the others are dropped, as live mode drops frames under load: the
    follower sees the gaps in the frame indices). ``encoded``: the clip's frames as the live
    measure feeds them (:func:`~tests.helpers.leak_clips.write_clip`'s H.264, decoded), not
    as rendered: the detector and the face mesh answer a little differently on them, which
    decides some frames at the edge of a rule. ``passes``: the clip played this many times,
    as the live measure loops it (:data:`PASSES`; the frame index runs on, so ``only``
    counts over every pass). Returns the outputs (one per frame processed), the truth (every
    frame of one pass) and the report."""
    from livecam.analysis import build_stages
    from livecam.config import load_config
    from livecam.core.types import Frame, Packet, RuntimeState
    from livecam.identity import IdentityCollection, identity_from_photo
    from livecam.swap.stage import ClassicSwapStage

    config = load_config(None, ["advanced.pipeline.realtime=false", *clip.settings, *settings])
    identities = IdentityCollection({IDENTITY: identity_from_photo(identity_photo,
                                                                   config.identity)})
    state = RuntimeState(active_identity=IDENTITY, identities=(IDENTITY,))
    if encoded:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"{clip.name}.mp4"
            truths = write_clip(clip, path)[:frames]
            inputs = decode(path)[:frames]
    else:  # only the frames asked for are rendered
        rendered = list(islice(clip.frames(), frames))
        inputs, truths = [image for image, _ in rendered], [truth for _, truth in rendered]
    outputs: list[ImageBGR] = []
    analysis = build_stages(config.analysis, fps=config.capture.fps)[0]
    analysis.open()
    try:
        with ClassicSwapStage(config.swap, identities) as swap:
            for t in range(passes * len(inputs)):
                if only is not None and t not in only:
                    continue
                image = inputs[t % len(inputs)]
                packet = analysis.process(Packet.from_frame(Frame(t, 0, image), state))
                outputs.append(swap.process(packet).image_bgr)
    finally:
        analysis.close()
    return outputs, truths, judge(inputs, truths, outputs)
