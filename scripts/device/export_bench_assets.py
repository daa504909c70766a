"""Export what the GPU benchmark needs onto a machine without mediapipe/skimage/insightface.

    python scripts/device/export_bench_assets.py .device/bench_assets

writes ``photos/`` (real face photos from the installed scikit-image and insightface packages,
as PNG) and ``mediapipe_modules/`` (the face detection, face landmark and selfie segmentation
``.tflite`` files of the installed mediapipe 0.10.21, in their ``mediapipe/modules`` layout).
Then, on the device:

    python -m scripts.bench_gpu --photos .device/bench_assets/photos \\
        --models-dir .device/bench_assets/mediapipe_modules

Keep the folder out of git (``/.device/`` is ignored): the photos belong to their packages.
``--no-photos`` writes only the models (``scripts/bench_triton.py`` takes its photo from
scikit-image, which the GPU machine has), 2.1 MB instead of 4.2.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
from pathlib import Path

import cv2
import numpy as np

TFLITE = ("face_detection/face_detection_short_range.tflite",
          "face_detection/face_detection_full_range_sparse.tflite",
          "face_landmark/face_landmark.tflite",
          "selfie_segmentation/selfie_segmentation_landscape.tflite")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--no-photos", action="store_true", help="only the face models")
    args = parser.parse_args()
    photos = args.out / "photos"
    if not args.no_photos:
        photos.mkdir(parents=True, exist_ok=True)
        import skimage.data
        from insightface.data import get_image

        cv2.imwrite(str(photos / "astronaut.png"), np.ascontiguousarray(
            skimage.data.astronaut()[:, :, ::-1]))
        cv2.imwrite(str(photos / "t1.png"), get_image("t1"))
    spec = importlib.util.find_spec("mediapipe")
    if spec is None or spec.origin is None:
        raise SystemExit("mediapipe is not installed (pip install mediapipe==0.10.21)")
    modules = Path(spec.origin).parent / "modules"
    for rel in TFLITE:
        dst = args.out / "mediapipe_modules" / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(modules / rel, dst)
    n_photos = 0 if args.no_photos else len(list(photos.iterdir()))
    print(f"wrote {args.out}: {n_photos} photos, {len(TFLITE)} models")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
