"""The clips the leak measure runs through ``livecam run``: real faces, true boxes, numbered frames.

Every clip is 1280x720 at 30 fps, built from the six people of insightface's ``t1`` photo (the
source identity of the measure is skimage's astronaut, who is in none of them), with sensor
noise, and each frame's index drawn in the bottom-left corner (:mod:`frame_code`, in
``CODE_BOX_XYXY``). The faces stay clear of that corner.

======================  ==========================================================================
``still_2``             two people, still
``still_6``             the ``t1`` photo itself (six people, faces ~105 px wide), still
``still_6_max4``        the same with ``analysis.max_faces: 4`` (two faces beyond it)
``enter``               one person still, a second walks in from the left edge and stops
``leave_reenter``       a person walks out at the right edge and comes back 20 frames later
``crossing``            two people walk past each other, the second in front
``turn``                a person turns the head 70 degrees to one side, back, to the other, back
``half_hidden``         a board slides over half of a face, stays, slides away
``cut_top`` ...         a still face cut by the top (``_bottom``, ``_left``, ``_right``) edge:
                        about half of it in view
``slide_top`` ...       a face slides in from beyond the top (``_bottom``, ``_left``,
                        ``_right``) edge and stops inside
``hidden``              a board slides over the whole face, stays, slides away (where its swap
                        must not be painted on the board: a *ghost*)
======================  ==========================================================================

The truth lists every face from its first visible pixel (``render_clip(min_visible=0)``): a face
partly in view, entering or half hidden is a face, and the judge counts it.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path

import cv2
import numpy as np

from livecam.core.types import ImageBGR
from tests.helpers import frame_code
from tests.helpers.clips import (
    FaceSprite,
    FrameTruth,
    Occluder,
    Trajectory,
    face_sprites,
    render_clip,
)

SIZE = (1280, 720)
FPS = 30.0
NOISE_SIGMA = 2.0
_Y = 300.0  # faces' centre height: well above the frame code
CODE_BITS = 12  # clips are far shorter than 2**12 frames, so a code is the frame's index
# 24 bars of 10x14 px in the bottom-left corner: wide enough to read back through H.264
CODE_BOX_XYXY = (6, SIZE[1] - 20, 6 + 2 * CODE_BITS * 10, SIZE[1] - 6)


def stamp(image_bgr: ImageBGR, index: int) -> ImageBGR:
    """A copy of clip frame ``image_bgr`` (720, 1280, 3) uint8 with its ``index`` drawn."""
    if not 0 <= index < 1 << CODE_BITS:
        raise ValueError(f"frame index {index} does not fit in {CODE_BITS} bits")
    return frame_code.draw_code(image_bgr, index, bits=CODE_BITS, box_xyxy=CODE_BOX_XYXY)


def read_index(image_bgr: ImageBGR) -> int | None:
    """The index :func:`stamp` drew into a clip frame (or livecam's output of it), or None
    where no clean code is there (livecam's black start frames, a damaged code)."""
    return frame_code.read_code(image_bgr, bits=CODE_BITS, box_xyxy=CODE_BOX_XYXY)


@dataclass(frozen=True)
class LeakClip:
    """A named clip: ``frames()`` renders it (frame code drawn) with its truth; ``settings``
    are ``--set`` overrides the clip is run with (e.g. a smaller ``analysis.max_faces``)."""

    name: str
    description: str
    n_frames: int
    frames: Callable[[], Iterator[tuple[ImageBGR, FrameTruth]]]
    settings: tuple[str, ...] = ()


def t1_photo() -> ImageBGR:
    """insightface's six-person photo (1280x886 BGR), from the installed wheel, or
    ``$LIVECAM_TEST_PHOTOS/t1.png`` on a GPU machine without insightface (the folder
    ``scripts/device/export_bench_assets.py`` writes)."""
    folder = os.environ.get("LIVECAM_TEST_PHOTOS")
    if folder and importlib.util.find_spec("insightface") is None:
        image = cv2.imread(str(Path(folder) / "t1.png"), cv2.IMREAD_COLOR)
        if image is None:
            raise FileNotFoundError(f"no t1.png in {folder}")
        return np.ascontiguousarray(image)
    from insightface.data import get_image

    return np.ascontiguousarray(get_image("t1"))


def leak_clips(photo_bgr: ImageBGR | None = None) -> dict[str, LeakClip]:
    """Every clip of the module docstring, by name (nothing is rendered until ``frames()``)."""
    photo = t1_photo() if photo_bgr is None else photo_bgr
    people = face_sprites(photo)
    w = SIZE[0]
    fw = 180.0
    clips = [
        LeakClip("still_2", "two people, still", 60, _sprites_clip(
            people[:2], [Trajectory.still((420, _Y), 60, 190),
                         Trajectory.still((860, _Y + 10), 60, 180)])),
        LeakClip("still_6", "the t1 photo, six people, still", 60, _photo_clip(photo, 60)),
        LeakClip("still_6_max4", "the t1 photo with analysis.max_faces: 4", 60,
                 _photo_clip(photo, 60), ("analysis.max_faces=4",)),
        LeakClip("enter", "one still, one walks in from the left edge", 75, _sprites_clip(
            [people[2], people[0]],
            [Trajectory.still((900, _Y), 75, fw),
             _then_still(Trajectory.linear((-fw, _Y + 20), (420, _Y + 20), 30, fw), 75)])),
        LeakClip("leave_reenter", "out at the right edge, back 20 frames later", 80,
                 _sprites_clip([people[1]], [_leave_and_return(80, fw, w)])),
        LeakClip("crossing", "two people cross, the second in front", 70, _sprites_clip(
            [people[0], people[3]],
            [Trajectory.linear((220, _Y - 10), (w - 220, _Y - 10), 70, 170),
             Trajectory.linear((w - 220, _Y + 15), (220, _Y + 15), 70, 170)])),
        LeakClip("turn", "a head turning 70 degrees each way", 100, _sprites_clip(
            [people[0]], [Trajectory.still((640, _Y), 100, 200).turning(_turns(100, 70.0))])),
        LeakClip("half_hidden", "a board slides over half of a face and away", 80,
                 _sprites_clip([people[1]], [Trajectory.still((640, _Y), 80, 200)],
                               _sliding_board(80, 640.0, _Y, 200.0))),
        *_edge_clips(people, fw),
        LeakClip("hidden", "a board slides over the whole face, stays, slides away", 70,
                 _sprites_clip([people[2]], [Trajectory.still((640, _Y), 70, fw)],
                               _hiding_board(70, 640.0, _Y, fw))),
    ]
    return {c.name: c for c in clips}


# -- scenario parts ---------------------------------------------------------------------------

def _then_still(traj: Trajectory, n_frames: int) -> Trajectory:
    extra = n_frames - len(traj.centers_xy)
    return Trajectory(np.r_[traj.centers_xy, np.repeat(traj.centers_xy[-1:], extra, axis=0)],
                      np.r_[traj.face_widths_px, np.repeat(traj.face_widths_px[-1:], extra)])


def _leave_and_return(n: int, fw: float, w: int) -> Trajectory:
    out_at, away = 25, 20
    back = n - out_at - away
    xs = np.r_[np.linspace(700, w + fw, out_at), np.full(away, w + fw),
               np.linspace(w + fw, 760, back // 2), np.full(back - back // 2, 760.0)]
    shown = np.r_[np.ones(out_at, bool), np.zeros(away, bool), np.ones(back, bool)]
    return Trajectory(np.stack([xs, np.full(n, _Y)], 1), np.full(n, fw), shown)


def _turns(n: int, peak_deg: float) -> np.ndarray:
    q = n // 4
    return np.r_[np.linspace(0, peak_deg, q), np.linspace(peak_deg, 0, q),
                 np.linspace(0, -peak_deg, q), np.linspace(-peak_deg, 0, n - 3 * q)]


def _sliding_board(n: int, cx: float, cy: float, fw: float) -> list[Occluder]:
    """A board from the left edge to the face's middle (and back): one occluder per frame."""
    third = n // 3
    edge = np.r_[np.linspace(cx - fw, cx, third), np.full(n - 2 * third, cx),
                 np.linspace(cx, cx - fw, third)]
    top, bottom = int(cy - fw), int(cy + fw)
    return [Occluder((0, top, int(x), bottom), t, t + 1) for t, x in enumerate(edge)]


def _edge_clips(people: Sequence[FaceSprite], fw: float) -> list[LeakClip]:
    """A face cut by each edge (still, about half of its box in view: one eye, nose and lips
    at the top edge), and a face sliding in from beyond each edge and stopping inside."""
    w, h = SIZE
    cx = 700.0  # clear of the frame code in the bottom-left corner
    half_in = 0.05 * fw  # the box centre this far inside the edge: a little over half in view
    cut = {"top": (cx, half_in), "bottom": (cx, h - half_in), "left": (half_in, _Y),
           "right": (w - half_in, _Y)}
    out = {"top": (cx, -fw), "bottom": (cx, h + fw), "left": (-fw, _Y), "right": (w + fw, _Y)}
    inside = {"top": (cx, 1.0 * fw), "bottom": (cx, h - 1.0 * fw), "left": (1.2 * fw, _Y),
              "right": (w - 1.2 * fw, _Y)}
    clips = []
    for k, side in enumerate(("top", "bottom", "left", "right")):
        person = people[k % len(people)]
        clips.append(LeakClip(f"cut_{side}", f"a still face cut by the {side} edge", 45,
                              _sprites_clip([person], [Trajectory.still(cut[side], 45, fw)])))
        slide = _then_still(Trajectory.linear(out[side], inside[side], 36, fw), 50)
        clips.append(LeakClip(f"slide_{side}", f"a face slides in from the {side} edge", 50,
                              _sprites_clip([person], [slide])))
    return clips


def _hiding_board(n: int, cx: float, cy: float, fw: float) -> list[Occluder]:
    """A board from the left edge over the whole face (and back): one occluder per frame."""
    third = n // 3
    edge = np.r_[np.linspace(cx - fw, cx + 1.2 * fw, third), np.full(n - 2 * third, cx + 1.2 * fw),
                 np.linspace(cx + 1.2 * fw, cx - fw, third)]
    top, bottom = int(cy - 1.2 * fw), int(cy + 1.2 * fw)
    return [Occluder((0, top, int(x), bottom), t, t + 1) for t, x in enumerate(edge)]


def _code_board(n: int) -> Occluder:
    return Occluder(CODE_BOX_XYXY, 0, n, (128, 128, 128))


def _sprites_clip(sprites: Sequence[FaceSprite], trajectories: Sequence[Trajectory],
                  occluders: Sequence[Occluder] = (),
                  ) -> Callable[[], Iterator[tuple[ImageBGR, FrameTruth]]]:
    n = len(trajectories[0].centers_xy)

    def frames() -> Iterator[tuple[ImageBGR, FrameTruth]]:
        for t, (frame, truth) in enumerate(render_clip(
                sprites, trajectories, SIZE, occluders=[*occluders, _code_board(n)],
                noise_sigma=NOISE_SIGMA, min_visible=0.0)):
            yield stamp(frame, t), truth

    return frames


def _photo_clip(photo: ImageBGR, n: int) -> Callable[[], Iterator[tuple[ImageBGR, FrameTruth]]]:
    """The photo cropped to 1280x720 around its faces, still, with fresh noise per frame."""
    from livecam.analysis.photo import analyze_photo

    w, h = SIZE
    faces = analyze_photo(photo, max_faces=16)
    top = int(np.clip(faces.boxes_xyxy[:, 1].min() - 40, 0, photo.shape[0] - h))
    crop = np.ascontiguousarray(photo[top:top + h, :w])
    boxes = faces.boxes_xyxy - np.array([0, top, 0, top], np.float32)
    masks = tuple(np.ones((max(0, y2 - y1), max(0, x2 - x1)), bool) for x1, y1, x2, y2 in (
        (max(0, round(float(b[0]))), max(0, round(float(b[1]))), min(w, round(float(b[2]))),
         min(h, round(float(b[3])))) for b in boxes))
    truth = FrameTruth(np.arange(1, len(boxes) + 1, dtype=np.int64), boxes,
                       np.ones(len(boxes), np.float32), masks)

    def frames() -> Iterator[tuple[ImageBGR, FrameTruth]]:
        rng = np.random.default_rng(0)
        bank = [rng.normal(0.0, NOISE_SIGMA, crop.shape).astype(np.float32) for _ in range(4)]
        for t in range(n):
            shift = (int(rng.integers(0, h)), int(rng.integers(0, w)))
            noise = np.roll(bank[t % len(bank)], shift, axis=(0, 1))
            noisy = np.clip(crop + noise + 0.5, 0, 255)
            yield stamp(noisy.astype(np.uint8), t), truth

    return frames


# -- files ------------------------------------------------------------------------------------

def write_clip(clip: LeakClip, path: Path, *, crf: int = 12) -> list[FrameTruth]:
    """Encode ``clip`` as H.264 (``crf``: near-lossless by default) at 30 fps; its truth."""
    import av

    truths = []
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=Fraction(int(FPS)))
        stream.width, stream.height = SIZE
        stream.pix_fmt = "yuv420p"
        stream.options = {"crf": str(crf), "preset": "veryfast"}
        for frame, truth in clip.frames():
            truths.append(truth)
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="bgr24")):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return truths


def decode(path: Path) -> list[ImageBGR]:
    """Every frame of a video file, BGR."""
    import av

    with av.open(str(path)) as container:
        return [np.asarray(f.to_ndarray(format="bgr24"), np.uint8)
                for f in container.decode(video=0)]


def with_settings(clip: LeakClip, *settings: str) -> LeakClip:
    """``clip`` run with more ``--set`` overrides."""
    return replace(clip, settings=(*clip.settings, *settings))
