"""The data that flows through the pipeline: :class:`Frame`, :class:`Faces`, :class:`Packet`.

All are immutable containers. Stages return new objects and never write into their inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from enum import IntEnum
from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.int64]
ImageBGR = npt.NDArray[np.uint8]
#: (H * 3 / 2, W) uint8: the Y plane, then U, then V (4:2:0; BT.601, limited range)
ImageI420 = npt.NDArray[np.uint8]


@dataclass(frozen=True, slots=True)
class Frame:
    """One captured image.

    ``image_bgr`` is (H, W, 3) uint8 in BGR order and is never copied by the pipeline.
    ``t_capture_ns`` is ``time.perf_counter_ns()`` when the frame left the source.
    ``index`` counts frames read from the source, starting at 0; it only grows.
    ``received_i420``: the I420 planes ``image_bgr`` was decoded from, where the source
    decoded it from yuv420p and a stage asked for them (:func:`~livecam.core.stage.
    source_i420_wanted`): plain arrays copied out of the decoder at read time, so a frame
    never holds a decoder's frame (nor, through it, the decoder and its threads).
    """

    index: int
    t_capture_ns: int
    image_bgr: ImageBGR
    received_i420: ReceivedI420 | None = None

    @property
    def height_px(self) -> int:
        return int(self.image_bgr.shape[0])

    @property
    def width_px(self) -> int:
        return int(self.image_bgr.shape[1])


def _empty(shape: tuple[int, ...], dtype: type = np.float32) -> np.ndarray:
    return np.zeros(shape, dtype=dtype)


@dataclass(frozen=True, slots=True)
class Faces:
    """The faces found in one frame, one array per field (N faces).

    - ``boxes_xyxy``: (N, 4) float32, pixels, x1 y1 x2 y2.
    - ``scores``: (N,) float32 in [0, 1].
    - ``keypoints_xy``: (N, 6, 2) float32 pixels: detector keypoints (right eye, left eye, nose
      tip, mouth centre, right ear tragion, left ear tragion: BlazeFace order), or (N, 0, 2).
    - ``landmarks_xy``: (N, K, 2) float32 pixels, K = 468 or 478 (face mesh) or 0 (none yet).
    - ``landmarks_z``: (N, K) float32, relative depth in the same pixel scale (smaller = nearer).
    - ``track_ids``: (N,) int64, -1 where the face is not tracked.

    Indexing with a boolean mask or an index array returns a new ``Faces``.
    """

    boxes_xyxy: FloatArray = field(default_factory=lambda: _empty((0, 4)))
    scores: FloatArray = field(default_factory=lambda: _empty((0,)))
    keypoints_xy: FloatArray = field(default_factory=lambda: _empty((0, 0, 2)))
    landmarks_xy: FloatArray = field(default_factory=lambda: _empty((0, 0, 2)))
    landmarks_z: FloatArray = field(default_factory=lambda: _empty((0, 0)))
    track_ids: IntArray = field(default_factory=lambda: np.zeros((0,), dtype=np.int64))

    def __post_init__(self) -> None:
        n = len(self.boxes_xyxy)
        if self.boxes_xyxy.shape != (n, 4):
            raise ValueError(f"boxes_xyxy must be (N, 4), got {self.boxes_xyxy.shape}")
        for name in ("scores", "track_ids"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"{name} has {len(getattr(self, name))} rows, boxes have {n}")
        for name in ("keypoints_xy", "landmarks_xy", "landmarks_z"):
            arr = getattr(self, name)
            if len(arr) not in (0, n) or (len(arr) == 0 and n != 0 and arr.ndim < 2):
                raise ValueError(f"{name} has {len(arr)} rows, boxes have {n}")

    @classmethod
    def empty(cls) -> Faces:
        return cls()

    def __len__(self) -> int:
        return len(self.boxes_xyxy)

    def __getitem__(self, index: Any) -> Faces:
        """Select faces by boolean mask, index array or slice; returns a new object."""
        if isinstance(index, (int, np.integer)):
            index = [int(index)]

        def pick(arr: np.ndarray) -> np.ndarray:
            if len(arr) == 0 and len(self) != 0:
                # optional field absent: keep it absent but with the right trailing shape
                return arr
            return np.asarray(arr[index])

        return Faces(
            boxes_xyxy=pick(self.boxes_xyxy),
            scores=pick(self.scores),
            keypoints_xy=pick(self.keypoints_xy),
            landmarks_xy=pick(self.landmarks_xy),
            landmarks_z=pick(self.landmarks_z),
            track_ids=pick(self.track_ids),
        )

    def with_fields(self, **changes: Any) -> Faces:
        """A copy with some fields replaced (the arrays themselves are not copied)."""
        return replace(self, **changes)

    @property
    def has_landmarks(self) -> bool:
        return self.landmarks_xy.ndim == 3 and self.landmarks_xy.shape[1] > 0 and len(
            self.landmarks_xy
        ) == len(self)

    @property
    def areas_px(self) -> FloatArray:
        w = np.clip(self.boxes_xyxy[:, 2] - self.boxes_xyxy[:, 0], 0, None)
        h = np.clip(self.boxes_xyxy[:, 3] - self.boxes_xyxy[:, 1], 0, None)
        return (w * h).astype(np.float32)


class Unswappable(IntEnum):
    """Why a face that is in the frame is not swapped in it (see :class:`WithheldFaces`).

    What the viewer sees there instead is ``advanced.swap.unswappable`` (``livecam.swap.cover``).
    """

    PENDING = 1  # found this frame, not yet confirmed by the tracker
    LOST = 2  # followed until recently, not seen this frame: drawn where the tracker predicts it
    OVER_MAX = 3  # more faces than ``analysis.max_faces``
    NO_MESH = 4  # detected, but the face mesh did not fit (hidden, turned, blurred)
    #: turned past ``advanced.swap.fade_end_deg`` (the swap fades onto the cover before that)
    TURNED = 5
    NO_SWAP = 6  # the swap could not be drawn (too small, off the frame)
    IDENTITY_LOADING = 7  # its identity is still being prepared
    IDENTITY_MISSING = 8  # its identity cannot be loaded
    STAGE_ERROR = 9  # a stage raised on this frame
    ENGINE_DOWN = 10  # the (remote) swap engine did not answer in time


def _nan_landmarks(n: int) -> FloatArray:
    return np.full((n, 0, 2), np.nan, np.float32)


@dataclass(frozen=True, slots=True)
class WithheldFaces:
    """Faces that are in the frame but are not swapped in it (M faces), one array per field.

    - ``boxes_xyxy``: (M, 4) float32 px: where the face is (for a lost face: where the tracker
      predicts it).
    - ``landmarks_xy``: (M, K, 2) float32 px, NaN rows where no mesh is known (a detection
      only), or (M, 0, 2) when no face has one.
    - ``track_ids``: (M,) int64, -1 where the face is not tracked.
    - ``reasons``: (M,) uint8 :class:`Unswappable` codes.
    """

    boxes_xyxy: FloatArray = field(default_factory=lambda: _empty((0, 4)))
    landmarks_xy: FloatArray = field(default_factory=lambda: _nan_landmarks(0))
    track_ids: IntArray = field(default_factory=lambda: np.zeros((0,), dtype=np.int64))
    reasons: npt.NDArray[np.uint8] = field(default_factory=lambda: np.zeros((0,), np.uint8))

    def __post_init__(self) -> None:
        n = len(self.boxes_xyxy)
        if self.boxes_xyxy.shape != (n, 4):
            raise ValueError(f"boxes_xyxy must be (M, 4), got {self.boxes_xyxy.shape}")
        for name in ("landmarks_xy", "track_ids", "reasons"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"{name} has {len(getattr(self, name))} rows, boxes have {n}")

    def __len__(self) -> int:
        return len(self.boxes_xyxy)

    def __getitem__(self, index: Any) -> WithheldFaces:
        """Select faces by boolean mask or index array; returns a new object."""
        return WithheldFaces(boxes_xyxy=np.asarray(self.boxes_xyxy[index]).reshape(-1, 4),
                             landmarks_xy=np.asarray(self.landmarks_xy[index]),
                             track_ids=np.asarray(self.track_ids[index]).reshape(-1),
                             reasons=np.asarray(self.reasons[index]).reshape(-1))

    @classmethod
    def from_faces(cls, faces: Faces, reason: Unswappable | npt.ArrayLike) -> WithheldFaces:
        """``faces`` withheld for ``reason`` (one code for all, or (N,) codes)."""
        n = len(faces)
        landmarks = faces.landmarks_xy if faces.has_landmarks else _nan_landmarks(n)
        return cls(boxes_xyxy=faces.boxes_xyxy.astype(np.float32),
                   landmarks_xy=landmarks.astype(np.float32), track_ids=faces.track_ids,
                   reasons=np.broadcast_to(np.asarray(reason, np.uint8), (n,)).copy())

    @classmethod
    def concat(cls, parts: Sequence[WithheldFaces]) -> WithheldFaces:
        """One object with the faces of ``parts`` in order (landmark counts must agree, or be
        0 where a part has none: those rows become NaN)."""
        parts = [p for p in parts if len(p)]
        if not parts:
            return cls()
        if len(parts) == 1:
            return parts[0]
        k = max(p.landmarks_xy.shape[1] for p in parts)
        marks = [p.landmarks_xy if p.landmarks_xy.shape[1] == k
                 else np.full((len(p), k, 2), np.nan, np.float32) for p in parts]
        return cls(boxes_xyxy=np.concatenate([p.boxes_xyxy for p in parts]),
                   landmarks_xy=np.concatenate(marks),
                   track_ids=np.concatenate([p.track_ids for p in parts]),
                   reasons=np.concatenate([p.reasons for p in parts]))


@dataclass(frozen=True, slots=True)
class RuntimeState:
    """What may change during a run, only through commands (see ``livecam.core.commands``).

    ``active_identity`` is a name from the identity library or None (pass through).
    ``bypass`` sends the real face through. ``track_identities`` maps track id -> identity name.
    ``identities`` lists the library's names in display order (hotkey 1 = first); commands that
    select by index or step next/previous resolve against it, and a reload replaces it.
    ``generation`` grows by one with every change, so a reader can tell two states apart.
    """

    active_identity: str | None = None
    bypass: bool = False
    track_identities: tuple[tuple[int, str], ...] = ()
    generation: int = 0
    identities: tuple[str, ...] = ()

    def chosen_identity(self, track_id: int) -> str | None:
        """The identity chosen at runtime for this track (``assign``), None if none was."""
        for tid, name in self.track_identities:
            if tid == track_id:
                return name
        return None

    def identity_for_track(self, track_id: int) -> str | None:
        chosen = self.chosen_identity(track_id)
        return chosen if chosen is not None else self.active_identity


@dataclass(frozen=True, slots=True, eq=False)
class ReceivedI420:
    """A picture that arrived as I420 (the thin client's decoded frames, a source's decoded
    yuv420p frames), beside the ``image_bgr`` converted from it: ``planes()`` gives its
    :data:`ImageI420` planes as they arrived, made on first ask. A sink that takes I420 sends
    these instead of converting ``image_bgr`` back (see :meth:`Packet.planes_i420`), as the
    thin client's encoder does. ``planes`` may be called from any thread and returns the
    same array each time."""

    image_bgr: ImageBGR
    planes: Callable[[], ImageI420]

    @classmethod
    def holding(cls, image_bgr: ImageBGR, planes_i420: ImageI420) -> ReceivedI420:
        """``image_bgr`` with planes already made (a plain array, nothing else held)."""
        return cls(image_bgr, lambda: planes_i420)


@dataclass(frozen=True, slots=True)
class Packet:
    """What one stage hands the next for one frame.

    ``image_bgr`` is the picture as it will be sent (the captured image until a stage changes it);
    ``faces`` is what analysis found and selected for the swap; ``withheld`` the faces that are
    in the frame too but must not be swapped in it (the swap stage covers them, see
    ``advanced.swap.unswappable``); ``state`` is the runtime state the frame is processed under;
    ``received_i420`` the planes ``image_bgr`` arrived as, when it did (:meth:`planes_i420`).
    """

    frame: Frame
    image_bgr: ImageBGR
    faces: Faces = field(default_factory=Faces)
    state: RuntimeState = field(default_factory=RuntimeState)
    withheld: WithheldFaces = field(default_factory=WithheldFaces)
    received_i420: ReceivedI420 | None = None

    @classmethod
    def from_frame(cls, frame: Frame, state: RuntimeState | None = None) -> Packet:
        return cls(frame=frame, image_bgr=frame.image_bgr, state=state or RuntimeState(),
                   received_i420=frame.received_i420)

    def with_fields(self, **changes: Any) -> Packet:
        return replace(self, **changes)

    def planes_i420(self) -> ImageI420 | None:
        """``image_bgr`` as the I420 planes it arrived as (:class:`ReceivedI420`), or None:
        it did not arrive so, or a stage has changed the picture since (the planes belong to
        that very ``image_bgr`` array, so they can never describe another picture)."""
        received = self.received_i420
        if received is None or received.image_bgr is not self.image_bgr:
            return None
        return received.planes()
