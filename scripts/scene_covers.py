"""Covers on no face in the GPU benchmark's scene (``scripts/bench_gpu_scenes.py``): the 1-face
1080p scene as ``bench_streams``' clip moves it (a 3 px circle, reflected borders), through
livecam's analysis stage as ``livecam run`` builds it on the CPU, every ``--step``-th frame
(6: a stream at 5 of 30 fps), counting the frames with a withheld box (a cover) that touches no
face of the scene.

    python -m scripts.scene_covers --photos DIR --models-dir DIR [--background blobs|wall]
                                   [--step 6] [--frames 60] [--set KEY=VALUE ...]
                                   [--json scene_covers.json]

``DIR``: ``scripts/device/export_bench_assets.py``'s photos and MediaPipe modules (the GPU
benchmark's). Prints a line a frame and a total; writes JSON.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np


def main() -> None:
    import cv2
    import torch

    from livecam.analysis import build_stages
    from livecam.config import load_config
    from livecam.core.boxes import meets_any
    from livecam.core.types import Frame, Packet, RuntimeState
    from livecam.gpupipe.networks.models import load_blazeface
    from scripts.bench_gpu_scenes import (
        BACKGROUNDS,
        CLIP_FRAMES,
        CLIP_SWAY_PX,
        build_scene,
        find_faces,
        load_photos,
    )

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--photos", type=Path, required=True)
    parser.add_argument("--models-dir", required=True)
    parser.add_argument("--background", choices=BACKGROUNDS, default="blobs")
    parser.add_argument("--step", type=int, default=6)
    parser.add_argument("--frames", type=int, default=60)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--json", type=Path, default=Path("scene_covers.json"))
    args = parser.parse_args()

    faces = find_faces(load_blazeface("full", models_dir=args.models_dir),
                       load_photos(args.photos), torch.device("cpu"))
    scene = build_scene(faces, 1, 1080, 1920, background=args.background)
    config = load_config(None, ["advanced.pipeline.realtime=false", *args.set])
    analysis = build_stages(config.analysis, fps=config.capture.fps)[0]
    state = RuntimeState(active_identity="astro", identities=("astro",))
    rows = []
    with analysis:
        for t in range(0, args.frames, args.step):
            angle = 2 * np.pi * (t % CLIP_FRAMES) / CLIP_FRAMES
            shift = np.float32([[1, 0, CLIP_SWAY_PX * np.cos(angle)],
                                [0, 1, CLIP_SWAY_PX * np.sin(angle)]])
            image = cv2.warpAffine(scene.frame_bgr, shift, (1920, 1080), flags=cv2.INTER_LINEAR,
                                   borderMode=cv2.BORDER_REFLECT)
            packet = analysis.process(Packet.from_frame(Frame(t, 0, image), state))
            stray = [[round(float(v)) for v in box] for box in packet.withheld.boxes_xyxy
                     if not meets_any(box.tolist(), scene.boxes_xyxy.tolist())]
            rows.append({"frame": t, "faces": len(packet.faces), "stray": stray})
            print(f"frame {t:3d}: {len(packet.faces)} face(s), covers on no face: {stray}")
    with_stray = sum(1 for r in rows if r["stray"])
    print(f"{with_stray} of {len(rows)} frames with a cover on no face")
    args.json.write_text(json.dumps({"set": args.set, "background": args.background,
                                     "step": args.step, "frames": rows},
                                    indent=1))
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
