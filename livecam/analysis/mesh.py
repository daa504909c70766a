"""MediaPipe face mesh run on one region of interest at a time, so landmarks belong to a track.

Two ways to run the same model on the same crop:

- **direct** (468 points, the default): ``face_landmark.tflite`` from ``mediapipe==0.10.21`` run
  by LiteRT's interpreter (``ai-edge-litert``). We crop the ROI to 192x192 ourselves exactly as
  MediaPipe's ``ImageToTensorCalculator`` does (its corner-to-corner perspective map, bilinear,
  BORDER_REPLICATE), run the network, and project the points back as its
  ``LandmarkProjectionCalculator`` does. Same landmarks as MediaPipe's graph (tests/analysis
  compare them: thousandths of a pixel apart), at 3.4 ms per face on this CPU against 5.3 ms
  through the graph's packets.
- **graph**: MediaPipe's own ``FaceLandmarkCpu`` subgraph (the one inside
  ``mp.solutions.face_mesh``) in a two-node graph fed with an image and a rotated ROI. Used for
  478 points (``face_landmark_with_attention.tflite``, whose refinement heads the direct path
  does not reproduce) and wherever LiteRT cannot be imported. To avoid
  copying a whole 1080p frame into MediaPipe per face, only the ROI's bounding box is cropped
  out (with the image's own border behaviour preserved, see ``_crop``).

Either way it runs no detector of its own and never mixes faces up: we say where each face is.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from livecam.analysis import litert
from livecam.analysis.litert import open_mediapipe_model
from livecam.analysis.roi import Roi
from livecam.core.types import FloatArray, ImageBGR

_GRAPH = """
input_stream: "IMAGE:image"
input_stream: "ROI:roi"
input_side_packet: "WITH_ATTENTION:with_attention"
output_stream: "LANDMARKS:landmarks"
node {
  calculator: "FaceLandmarkCpu"
  input_stream: "IMAGE:image"
  input_stream: "ROI:roi"
  input_side_packet: "WITH_ATTENTION:with_attention"
  output_stream: "LANDMARKS:landmarks"
}
"""


@dataclass(frozen=True, slots=True)
class MeshResult:
    """One face's mesh: ``landmarks_xy`` (K, 2) float32 px, ``landmarks_z`` (K,) float32 px
    (relative depth, same scale as x; smaller = nearer the camera). K = 468 or 478."""

    landmarks_xy: FloatArray
    landmarks_z: FloatArray


class FaceMeshLandmarker:
    """Face mesh on given ROIs. Construct cheaply; ``open()`` loads the model.

    Only one thread may call :meth:`landmarks` at a time (MediaPipe graphs are sequential).
    """

    def __init__(self, *, refine_landmarks: bool = False, num_threads: int = 1) -> None:
        self.refine_landmarks = refine_landmarks
        self.num_threads = num_threads
        self._graph: Any = None
        self._direct: _DirectMesh | None = None
        self._results: list[Any] = []
        self._timestamp = 0

    @property
    def runner(self) -> str:
        """``direct`` or ``graph`` (see the module docstring); ``closed`` before ``open()``."""
        if self._direct is not None:
            return "direct"
        return "graph" if self._graph is not None else "closed"

    @property
    def num_landmarks(self) -> int:
        return 478 if self.refine_landmarks else 468

    def open(self) -> None:
        if self._graph is not None or self._direct is not None:
            return
        if not self.refine_landmarks and litert.litert_interpreter() is not None:
            self._direct = _DirectMesh(self.num_threads)
            return
        import mediapipe as mp
        from google.protobuf import text_format
        from mediapipe.framework import calculator_pb2
        from mediapipe.python import packet_creator, packet_getter
        from mediapipe.python._framework_bindings import calculator_graph, resource_util

        # Model paths inside the subgraph are relative to the directory holding `mediapipe/`.
        resource_util.set_resource_dir(os.path.dirname(os.path.dirname(mp.__file__)))
        config = text_format.Parse(_GRAPH, calculator_pb2.CalculatorGraphConfig())
        graph = calculator_graph.CalculatorGraph(graph_config=config)
        graph.observe_output_stream(
            "landmarks", lambda _name, packet: self._results.append(packet_getter.get_proto(packet))
        )
        graph.start_run({"with_attention": packet_creator.create_bool(self.refine_landmarks)})
        self._graph = graph

    def close(self) -> None:
        self._direct = None
        graph, self._graph = self._graph, None
        if graph is not None:
            graph.close()

    def __enter__(self) -> FaceMeshLandmarker:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def landmarks(self, image_bgr: ImageBGR, rois: Sequence[Roi]) -> list[MeshResult | None]:
        """Mesh for each ROI (None where the model says no face is there), in ROI order."""
        if self._direct is not None:
            return [self._direct.run(image_bgr, roi) for roi in rois]
        if self._graph is None:
            raise RuntimeError("FaceMeshLandmarker.open() was not called")
        return [self._one(image_bgr, roi) for roi in rois]

    def _one(self, image_bgr: ImageBGR, roi: Roi) -> MeshResult | None:
        from mediapipe.framework.formats import rect_pb2
        from mediapipe.python import packet_creator
        from mediapipe.python._framework_bindings import image_frame

        if not (roi.size_px >= 4 and math.isfinite(roi.size_px)):
            return None
        crop = _crop(image_bgr, roi)
        if crop is None:
            return None
        crop_rgb, x0, y0 = crop
        h_c, w_c = crop_rgb.shape[:2]
        rect = rect_pb2.NormalizedRect(
            x_center=(roi.center_x_px - x0) / w_c, y_center=(roi.center_y_px - y0) / h_c,
            width=roi.size_px / w_c, height=roi.size_px / h_c, rotation=roi.rotation_rad)
        self._timestamp += 1
        self._results.clear()
        self._graph.add_packet_to_input_stream(
            "image", packet_creator.create_image_frame(
                image_format=image_frame.ImageFormat.SRGB, data=crop_rgb).at(self._timestamp))
        self._graph.add_packet_to_input_stream(
            "roi", packet_creator.create_proto(rect).at(self._timestamp))
        self._graph.wait_until_idle()
        if not self._results:
            return None
        marks = self._results[0].landmark
        arr = np.array([(m.x, m.y, m.z) for m in marks], dtype=np.float32)
        xy = arr[:, :2] * np.array([w_c, h_c], np.float32) + np.array([x0, y0], np.float32)
        # LandmarkProjectionCalculator scales z by the ROI width normalised to the image width.
        z = arr[:, 2] * np.float32(w_c)
        return MeshResult(landmarks_xy=xy.astype(np.float32), landmarks_z=z.astype(np.float32))


def _crop(image_bgr: ImageBGR, roi: Roi) -> tuple[np.ndarray, int, int] | None:
    """RGB copy of the ROI's bounding box clipped to the image, and its top-left corner.

    Clipping to the image keeps MediaPipe's BORDER_REPLICATE behaviour identical to running on
    the whole image: the crop's edges that replicate are the image's own edges. A 2 px margin
    covers bilinear sampling at the ROI's rim.
    """
    h, w = image_bgr.shape[:2]
    bx1, by1, bx2, by2 = roi.bounds_xyxy()
    x0 = max(0, math.floor(bx1) - 2)
    y0 = max(0, math.floor(by1) - 2)
    x1 = min(w, math.ceil(bx2) + 2)
    y1 = min(h, math.ceil(by2) + 2)
    if x1 - x0 < 2 or y1 - y0 < 2:
        return None
    # cvtColor, not a reversed-stride numpy copy: 0.06 against 2.3 ms for a 400x400 crop here
    crop_rgb = cv2.cvtColor(image_bgr[y0:y1, x0:x1], cv2.COLOR_BGR2RGB)
    return crop_rgb, x0, y0


_INPUT_PX = 192
# FaceLandmarkCpu drops a face whose presence score (sigmoid of the flag output) is below this.
MIN_PRESENCE = 0.5


class _DirectMesh:
    """``face_landmark.tflite`` on a LiteRT interpreter, with MediaPipe's crop and projection."""

    def __init__(self, num_threads: int) -> None:
        self._net = open_mediapipe_model("face_landmark", "face_landmark.tflite", num_threads)
        self._input = self._net.get_input_details()[0]["index"]
        outputs = {int(np.prod(o["shape"])): o["index"] for o in self._net.get_output_details()}
        self._landmarks_out, self._flag_out = outputs[468 * 3], outputs[1]

    def run(self, image_bgr: ImageBGR, roi: Roi) -> MeshResult | None:
        if not (roi.size_px >= 4 and math.isfinite(roi.size_px)):
            return None
        size, cos, sin = roi.size_px, math.cos(roi.rotation_rad), math.sin(roi.rotation_rad)
        # ImageToTensorCalculator maps the ROI's corners onto the tensor's corners: tensor pixel
        # (u, v) reads centre + (u/192 - 1/2) * size * (cos, sin) + (v/192 - 1/2) * size *
        # (-sin, cos), with no half-pixel shift. It warps with cv::warpPerspective; the map is
        # affine, and warpAffine gives the same pixels in 0.35 ms against 0.5 here.
        k = size / _INPUT_PX
        x0 = roi.center_x_px - 0.5 * size * (cos - sin)
        y0 = roi.center_y_px - 0.5 * size * (sin + cos)
        tensor_to_image = np.array([[k * cos, -k * sin, x0], [k * sin, k * cos, y0]])
        crop = cv2.warpAffine(image_bgr, tensor_to_image, (_INPUT_PX, _INPUT_PX),
                              flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                              borderMode=cv2.BORDER_REPLICATE)
        rgb = cv2.cvtColor(crop, cv2.COLOR_BGR2RGB).astype(np.float32) * np.float32(1 / 255)
        self._net.set_tensor(self._input, rgb[None])
        self._net.invoke()
        flag = float(self._net.get_tensor(self._flag_out).reshape(-1)[0])
        if 1.0 / (1.0 + math.exp(-flag)) < MIN_PRESENCE:
            return None
        points = self._net.get_tensor(self._landmarks_out).reshape(468, 3) / np.float32(_INPUT_PX)
        x, y = points[:, 0] - 0.5, points[:, 1] - 0.5
        xy = np.stack((roi.center_x_px + (cos * x - sin * y) * size,
                       roi.center_y_px + (sin * x + cos * y) * size), axis=1)
        return MeshResult(landmarks_xy=xy.astype(np.float32),
                          landmarks_z=(points[:, 2] * np.float32(size)).astype(np.float32))
