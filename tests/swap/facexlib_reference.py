"""The face enhancers' reference implementation, run here: facexlib 0.3's ``FaceRestoreHelper``.

GFPGAN and CodeFormer restore faces with facexlib's helper (alignment, crop, paste-back) and
basicsr's ``img2tensor``/``tensor2img``. facexlib installs with ``pip install --no-deps
facexlib==0.3.0`` (CI does that); its package ``__init__`` imports torchvision, which cannot
load beside this CPU torch build (docs/enhance.md), and its face detector and parsing network,
which need downloaded weights. Neither is what is compared: the helper's module is imported
with those two sub-packages and ``torchvision.transforms.functional.normalize`` stubbed, and
the helper's own ``align_warp_face``, ``get_inverse_affine`` and ``paste_faces_to_input_image``
run unchanged on landmarks we hand it. ``normalize`` is torchvision's documented in-place
``sub_(mean).div_(std)``; basicsr (an sdist that imports torchvision) is not installable here,
so :func:`tensor2img` is its published conversion for a (3, H, W) tensor, written out.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest


def _normalize(tensor: Any, mean: Sequence[float], std: Sequence[float],
               inplace: bool = False) -> Any:
    import torch

    out = tensor if inplace else tensor.clone()
    m = torch.as_tensor(mean, dtype=out.dtype)[:, None, None]
    s = torch.as_tensor(std, dtype=out.dtype)[:, None, None]
    return out.sub_(m).div_(s)


def load_facexlib() -> tuple[type, Callable[..., Any]]:
    """(``FaceRestoreHelper``, facexlib's ``img2tensor``); skips when facexlib is absent."""
    spec = importlib.util.find_spec("facexlib")
    if spec is None or spec.origin is None:
        pytest.skip("facexlib is not installed: pip install --no-deps facexlib==0.3.0")
    root = str(Path(spec.origin).parent)
    package = types.ModuleType("facexlib")
    package.__path__ = [root]
    detection = types.ModuleType("facexlib.detection")
    detection.init_detection_model = lambda *a, **k: None  # type: ignore[attr-defined]
    parsing = types.ModuleType("facexlib.parsing")
    parsing.init_parsing_model = lambda *a, **k: None  # type: ignore[attr-defined]
    functional = types.ModuleType("torchvision.transforms.functional")
    functional.normalize = _normalize  # type: ignore[attr-defined]
    stubs = {"facexlib": package, "facexlib.detection": detection,
             "facexlib.parsing": parsing, "torchvision": types.ModuleType("torchvision"),
             "torchvision.transforms": types.ModuleType("torchvision.transforms"),
             "torchvision.transforms.functional": functional}
    before = set(sys.modules)
    with pytest.MonkeyPatch.context() as patch:
        for name, module in stubs.items():
            patch.setitem(sys.modules, name, module)
        helper = importlib.import_module("facexlib.utils.face_restoration_helper")
        misc = importlib.import_module("facexlib.utils.misc")
    for name in set(sys.modules) - before:  # leave no half-imported facexlib behind
        if name.startswith("facexlib"):
            del sys.modules[name]
    return helper.FaceRestoreHelper, misc.img2tensor


def tensor2img(tensor: Any) -> np.ndarray:
    """basicsr's ``tensor2img(t, rgb2bgr=True, out_type=np.uint8, min_max=(-1, 1))`` for one
    (3, H, W) tensor, as GFPGAN calls it."""
    import cv2

    t = tensor.squeeze(0).float().detach().cpu().clamp_(-1, 1)
    t = (t - (-1)) / (1 - (-1))
    img = cv2.cvtColor(t.numpy().transpose(1, 2, 0), cv2.COLOR_RGB2BGR)
    return np.asarray((img * 255.0).round()).astype(np.uint8)


def reference_enhance(image_bgr: np.ndarray, kps: np.ndarray,
                      run_model: Callable[[np.ndarray], np.ndarray], *, face_size: int = 512,
                      template: np.ndarray | None = None,
                      all_points: bool = True) -> dict[str, Any]:
    """GFPGANer.enhance's path (``paste_back=True``, upscale 1, no parsing model) for faces
    with keypoints ``kps`` (N, 5, 2); ``run_model`` maps the (1, 3, S, S) input to the output.
    Returns the pasted image and the helper's intermediate results.

    ``all_points``: the helper's ``cv2.estimateAffinePartial2D`` call is made with FaceFusion's
    arguments (RANSAC, reprojection threshold 100: a least-squares fit over all five points, as
    livecam's) instead of facexlib's LMEDS, which may leave a point out.
    """
    import cv2

    if not all_points:
        return _reference_enhance(image_bgr, kps, run_model, face_size, template)
    original = cv2.estimateAffinePartial2D

    def fit_all(src: np.ndarray, dst: np.ndarray, method: int = 0) -> Any:
        return original(src, dst, method=cv2.RANSAC, ransacReprojThreshold=100)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cv2, "estimateAffinePartial2D", fit_all)
        return _reference_enhance(image_bgr, kps, run_model, face_size, template)


def _reference_enhance(image_bgr: np.ndarray, kps: np.ndarray,
                       run_model: Callable[[np.ndarray], np.ndarray], face_size: int,
                       template: np.ndarray | None) -> dict[str, Any]:
    import torch

    helper_cls, img2tensor = load_facexlib()
    helper = helper_cls(1, face_size=face_size, crop_ratio=(1, 1),
                        det_model="retinaface_resnet50", save_ext="png", use_parse=False,
                        device=torch.device("cpu"))
    if template is not None:
        helper.face_template = np.asarray(template, np.float64)
    helper.read_image(image_bgr)
    helper.all_landmarks_5 = [np.asarray(k, np.float32) for k in kps]
    helper.align_warp_face()
    inputs, restored = [], []
    for crop in helper.cropped_faces:
        t = img2tensor(crop / 255.0, bgr2rgb=True, float32=True)
        _normalize(t, (0.5, 0.5, 0.5), (0.5, 0.5, 0.5), inplace=True)
        inputs.append(t.numpy())
        out = torch.from_numpy(run_model(t[None].numpy()))
        face = tensor2img(out.squeeze(0)).astype("uint8")
        restored.append(face)
        helper.add_restored_face(face)
    helper.get_inverse_affine(None)
    pasted = helper.paste_faces_to_input_image()
    return {"image": pasted, "matrices": np.stack(helper.affine_matrices),
            "crops": np.stack(helper.cropped_faces), "inputs": np.stack(inputs),
            "restored": np.stack(restored)}
