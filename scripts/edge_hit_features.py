"""Can a weak edge hit be told from a face cut by the frame's edge? Three measures of every weak
edge hit (score under ``edges.SURE_SCORE``) the face follower covers, on faces and not:

- ``skin``: the share of skin-coloured pixels (YCrCb: Cr 133-173, Cb 77-127) of the box in view;
- ``look``: a second look (:func:`livecam.analysis.second_look.score_again`, five pictures about
  the hit, the average score) on the frame mirrored at its edges, as the strips see it;
- ``mesh``: whether the face mesh finds a face (presence >= 0.5) at the hit on the mirrored frame.

    python -m scripts.edge_hit_features [--clips enter cut_top ...] [--photos DIR --models-dir DIR]
                                        [--json edge_hit_features.json]

The hits on faces come from the leak clips (``tests.helpers.leak_clips``, rendered, every frame,
livecam's analysis stage as ``livecam run`` builds it; a hit touching a face of the truth is on
a face). With ``--photos``/``--models-dir`` (the GPU benchmark's exported assets) the hits of
the benchmark's 1-face scene on its ``blobs`` background (every 3rd of 30 frames, none on a
face) are measured too. Prints each measure's low quantiles on faces and the other hits' values;
writes JSON.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

EDGE_CLIPS = ("enter", "leave_reenter", "cut_top", "slide_top", "cut_bottom", "slide_bottom",
              "cut_left", "slide_left", "cut_right", "slide_right")


def _skin(image: np.ndarray, box: list[float]) -> float:
    import cv2

    h, w = image.shape[:2]
    x1, y1 = max(0, int(box[0])), max(0, int(box[1]))
    x2, y2 = min(w, math.ceil(box[2])), min(h, math.ceil(box[3]))
    if x2 <= x1 or y2 <= y1:
        return 0.0
    ycc = cv2.cvtColor(image[y1:y2, x1:x2], cv2.COLOR_BGR2YCrCb)
    cr, cb = ycc[..., 1], ycc[..., 2]
    return float(((cr >= 133) & (cr <= 173) & (cb >= 77) & (cb <= 127)).mean())


def _mirrored(image: np.ndarray, box: list[float]) -> tuple[np.ndarray, float]:
    """The frame mirrored outward far enough for a second look at ``box`` (5 times its size),
    and the padding (px)."""
    import cv2

    pad = math.ceil(3.0 * max(box[2] - box[0], box[3] - box[1], 1.0))
    pad = min(pad, min(image.shape[:2]) - 1)  # a reflection reaches one frame across
    return cv2.copyMakeBorder(image, pad, pad, pad, pad, cv2.BORDER_REFLECT_101), float(pad)


def measure(networks: Any, image: np.ndarray, box: list[float],
            keypoints: np.ndarray) -> dict[str, float]:
    from livecam.analysis.roi import roi_from_detection
    from livecam.analysis.second_look import score_again, second_look_places

    padded, pad = _mirrored(image, box)
    moved = [box[0] + pad, box[1] + pad, box[2] + pad, box[3] + pad]
    h, w = padded.shape[:2]
    looks = [score_again(networks.detect(np.ascontiguousarray(padded[np.ix_(p.rows, p.cols)])),
                         moved, p.offset_xy, scale)
             for p, scale in second_look_places(moved, h, w)]
    roi = roi_from_detection(np.asarray(moved, np.float32), np.asarray(keypoints) + pad)
    mesh = networks.landmarks(padded, [roi])[0]
    return {"skin": round(_skin(image, box), 3), "look": round(float(np.mean(looks)), 3),
            "mesh": float(mesh is not None)}


def main() -> None:
    import cv2

    from livecam.analysis import build_stages, edges
    from livecam.config import load_config
    from livecam.core.boxes import meets_any
    from livecam.core.types import Frame, Packet, RuntimeState
    from tests.helpers.leak_clips import leak_clips

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clips", nargs="*", default=list(EDGE_CLIPS))
    parser.add_argument("--photos", type=Path)
    parser.add_argument("--models-dir")
    parser.add_argument("--json", type=Path, default=Path("edge_hit_features.json"))
    args = parser.parse_args()

    rows: list[dict[str, Any]] = []
    where: dict[str, Any] = {}
    found_hits = edges.edge_hits

    def recorded(found: Any, image: np.ndarray, min_score: float) -> Any:
        hits = found_hits(found, image, min_score)
        for box, score, keypoints in hits:
            if score < edges.SURE_SCORE:
                b = [float(v) for v in box]
                truth = where["truth"]
                rows.append({"source": where["source"], "frame": where["frame"],
                             "score": round(score, 3), "box": [round(v) for v in b],
                             "face": bool(len(truth) and meets_any(box, truth)),
                             **measure(where["networks"], image, b, keypoints)})
        return hits

    # the follower calls edges.edge_hits through the module: every hit it takes is recorded
    edges.edge_hits = recorded
    state = RuntimeState(active_identity="astro", identities=("astro",))
    frames: list[tuple[str, list[tuple[np.ndarray, np.ndarray]], tuple[str, ...]]] = []
    clips = leak_clips()
    for name in args.clips:
        frames.append((name, [(image, truth.boxes_xyxy.reshape(-1, 4))
                              for image, truth in clips[name].frames()], clips[name].settings))
    if args.photos is not None and args.models_dir:
        import torch

        from livecam.gpupipe.networks.models import load_blazeface
        from scripts.bench_gpu_scenes import (
            CLIP_FRAMES,
            CLIP_SWAY_PX,
            build_scene,
            find_faces,
            load_photos,
        )

        faces = find_faces(load_blazeface("full", models_dir=args.models_dir),
                           load_photos(args.photos), torch.device("cpu"))
        scene = build_scene(faces, 1, 1080, 1920, background="blobs")
        swayed = []
        for t in range(0, CLIP_FRAMES, 3):
            angle = 2 * np.pi * t / CLIP_FRAMES
            shift = np.float32([[1, 0, CLIP_SWAY_PX * np.cos(angle)],
                                [0, 1, CLIP_SWAY_PX * np.sin(angle)]])
            swayed.append((cv2.warpAffine(scene.frame_bgr, shift, (1920, 1080),
                                          flags=cv2.INTER_LINEAR,
                                          borderMode=cv2.BORDER_REFLECT), scene.boxes_xyxy))
        frames.append(("scene_blobs", swayed, ()))
    for source, images, settings in frames:
        config = load_config(None, ["advanced.pipeline.realtime=false", *settings])
        analysis = build_stages(config.analysis, fps=config.capture.fps)[0]
        with analysis:
            where["networks"] = analysis.follower.networks
            for t, (image, truth) in enumerate(images):
                where.update(source=source, frame=t, truth=truth)
                analysis.process(Packet.from_frame(Frame(t, 0, image), state))
    edges.edge_hits = found_hits

    on = [r for r in rows if r["face"]]
    off = [r for r in rows if not r["face"]]
    print(f"{len(rows)} weak edge hits: {len(on)} on a face, {len(off)} on none")
    print("measure | on faces: min, 1 %, 5 %, 10 % | on none (source frame: value)")
    for key in ("skin", "look", "mesh"):
        q = np.quantile([r[key] for r in on], [0, 0.01, 0.05, 0.1]) if on else []
        print(f"{key:>7} | {', '.join(f'{v:.3f}' for v in q)} | "
              f"{[(r['source'], r['frame'], r[key]) for r in off][:12]}")
    args.json.write_text(json.dumps({"clips": args.clips, "hits": rows}, indent=1))
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
