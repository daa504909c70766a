"""Do the swapped face's eyes and mouth follow the streamer's? Correlation and lag per mode.

A real photo (skimage's astronaut) is made to blink, talk and glance
(``tests.helpers.expressions``), run through the analysis stages and a swap exactly as
``livecam run`` builds them, and eye openness, mouth openness and gaze (iris between the eye
corners, 478-point mesh) are measured on input and output with MediaPipe's face mesh. Prints a
table, writes JSON.

    python -m scripts.eval_expressions --frames 90 --json expressions.json

Modes: ``classic`` (the defaults), ``classic, source eyes`` (``advanced.swap.keep_eyes=auto``: the
behaviour before the streamer's eyes were kept), ``neural`` (the neural stage as
``build_neural_stage`` configures it, on a stand-in generator that blurs the target crop, so
it keeps the pose but loses the eyes' and mouth's detail, as a 128 px generator does on a
large face) and ``neural, nothing kept`` (the same generator with the plain paste-back).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
from pathlib import Path

import numpy as np

from livecam.analysis import build_stages
from livecam.app import build_swap_stages
from livecam.config import load_config
from livecam.config.identity import IdentityConfig
from livecam.core.types import RuntimeState
from livecam.engines.onnxruntime_engine import OnnxRuntimeEngine
from livecam.identity import Identity, IdentityCollection, IdentityPhoto
from livecam.identity.photo import prepare_face
from livecam.swap.inswapper import InswapperModel
from livecam.swap.neural import NeuralSwapStage
from tests.helpers.expressions import follow_report, run_through, streamer_clip
from tests.helpers.standins import build_blurring_inswapper
from tests.helpers.swap_eval import real_faces

SOURCE = "t1-2"  # a real person from insightface's t1.jpg, photographed looking down


def _identities() -> IdentityCollection:
    face = {f.label: f for f in real_faces()}[SOURCE]
    prep = prepare_face(face.image_bgr, SOURCE.encode(), face.landmarks_xy, face.landmarks_z,
                        IdentityConfig(), label=SOURCE)
    photo = IdentityPhoto(prep.sha256, prep.texture_bgr, prep.landmarks_xy, prep.landmarks_z)
    return IdentityCollection({SOURCE: Identity(SOURCE, (photo,))})


def _neural_stage(model_path: Path, keep: bool) -> NeuralSwapStage:
    swap = load_config(None).swap
    embedding = np.random.default_rng(0).standard_normal(512).astype(np.float32)
    return NeuralSwapStage(InswapperModel(OnnxRuntimeEngine(model_path, device="cpu"),
                                          model_path), lambda _name: embedding,
                           keep_eyes=keep and swap.keep_eyes == "always",
                           keep_mouth=keep and swap.keep_mouth, mouth_size=swap.mouth_size)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=90, help="clip length (default 90)")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    frames, _track = streamer_clip(args.frames)
    identities = _identities()
    state = RuntimeState(active_identity=SOURCE)
    with tempfile.TemporaryDirectory() as tmp:
        model_path = build_blurring_inswapper(Path(tmp) / "blur.onnx")
        modes = {
            "classic": lambda: build_swap_stages(load_config(None), identities),
            "classic, source eyes": lambda: build_swap_stages(
                load_config(None, ["advanced.swap.keep_eyes=auto"]), identities),
            "neural": lambda: [_neural_stage(model_path, True)],
            "neural, nothing kept": lambda: [_neural_stage(model_path, False)],
        }
        report: dict = {"frames": len(frames), "source": SOURCE, "modes": {}}
        print(f"{'mode':22} {'what':6} {'corr':>6} {'lag':>4} {'peak':>6} "
              f"{'input range':>14} {'output range':>14}")
        for mode, make in modes.items():
            stages = [*build_stages(load_config(None).analysis), *make()]
            for stage in stages:
                stage.open()
            try:
                outputs, landmarks = run_through(frames, stages, state)
            finally:
                for stage in stages:
                    stage.close()
            result = follow_report(frames, outputs, landmarks)
            report["modes"][mode] = {}
            for what in ("eyes", "mouth", "gaze"):
                f = result.follow(what)
                a, b = getattr(result.input, what), getattr(result.output, what)
                found = np.isfinite(b)
                report["modes"][mode][what] = {
                    "correlation": f.correlation, "lag_frames": f.lag_frames,
                    "peak_correlation": f.peak_correlation,
                    "output_found_frames": int(found.sum()),
                    "input": a.tolist(), "output": b.tolist()}
                out_range = (f"{np.nanmin(b):.3f}-{np.nanmax(b):.3f}" if found.any()
                             else "no face")
                print(f"{mode:22} {what:6} {f.correlation:>6.3f} {f.lag_frames:>4d} "
                      f"{f.peak_correlation:>6.3f} {np.nanmin(a):>6.3f}-{np.nanmax(a):.3f} "
                      f"{out_range:>14}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
