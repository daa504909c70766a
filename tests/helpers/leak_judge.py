"""The leak judge: which output frames show a face that is in the frame as the real face.

A *leak* is an output frame in which a face present in the input frame it shows (ground truth
from :mod:`tests.helpers.clips`) is shown as the real face: neither swapped nor covered. It is
judged from pixels only, output against input, never from livecam's own bookkeeping:

1. Which input frame does output frame k show? Live mode drops and repeats frames; each clip
   frame carries its index (:func:`tests.helpers.leak_clips.stamp`), read back here.
2. For each face visible in that input frame, compare the face's *core* (eyes, nose, mouth: the
   middle of its landmark box, only the pixels where the face itself is seen; the filter
   weighs those pixels alone, in output and input, so neither what the output shows over an
   occluder or beside the face nor the input's own edge there, another face's outline or an
   occluder's, enters the band) in output and input, both scaled so the face is
   :data:`FACE_PX` wide, in a band of spatial frequencies
   (a difference of Gaussians, sigma 1 and 4 px at that scale: features 2-10 % of the face
   width, which is where eyes, brows, nostrils and lips, the parts that identify a person,
   live). The *residual* is the energy of the band's change relative to the band's energy in
   the input: about 0 for the face untouched (re-encoded), 1 or more for a face replaced by
   another one's features or smoothed away.
3. The face leaked when the residual is below :data:`LEAK_RESIDUAL`.

The threshold is set on measured crops (``scripts/leak_calibrate.py``, table in
docs/fail-closed.md): real faces re-encoded, real faces with a light blur (still the person:
a viewer and dlib recognise them) and with ``swap.cover`` at its default strength, and the
classic swap (offline, and in the leak runs: ``scripts/leak_table.py`` prints each run's lowest
residual). Real and lightly blurred faces must read as leaks; covered and swapped ones not.
The classic swap keeps the streamer's own eyes inside the lids and mouth interior
(``advanced.swap.keep_eyes``, ``swap.keep_mouth``): the judge still compares them, so they count as
unchanged pixels of the face; a viewer knows people by their eyes too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import cv2
import numpy as np

from livecam.core.types import ImageBGR
from tests.helpers.clips import FrameTruth, box_region
from tests.helpers.leak_clips import read_index

#: Face width the core is compared at, px.
FACE_PX = 64
#: The core of a landmark box (fractions of its width, height): cheeks to cheeks, brows to
#: below the lips.
CORE_X = (0.15, 0.85)
CORE_Y = (0.30, 0.92)
#: Below this residual a face is shown as the real face (see the module docstring): halfway
#: between the real face with a light blur (2 % of the face width: at most 0.31 measured) and
#: the weakest swap (0.49 in the live runs: the classic swap of a three-quarter face, whose
#: profile nose and lips stay the streamer's and whose eyes and mouth interior are the
#: streamer's by design), 0.09 from each. A 3 % blur (0.39-0.51, still the person to dlib on
#: most faces) now falls mostly above it: docs/fail-closed.md says why that is the price.
LEAK_RESIDUAL = 0.40
#: A face is fully seen from this share of its box on screen and uncovered (reported apart:
#: the goal counts every face from its first visible pixel).
FULL_VIEW = 0.97
#: Fewer judged pixels than this (at :data:`FACE_PX`: a 4x4 patch, ~6 % of the face width
#: square) cannot be judged: such face-frames are reported as ``unjudged``, not leaks.
MIN_JUDGED_PX = 16
#: The face's own region when too little of its core is seen (a face cut by an edge or a
#: board showing only its forehead or chin): the box's inscribed ellipse, these half-axes.
ELLIPSE = (0.45, 0.48)
#: A hidden face's swap painted on what hides it (a *ghost*) adds detail that the occluder
#: does not have: the band's RMS over the face's hidden pixels grows by at least this many
#: grey levels (at FACE_PX; a cover smooths, so it lowers it). Calibrated in tests/leak/
#: test_judge.py: the face pasted on the board adds 10-20 levels, the cover removes detail.
GHOST_LEVELS = 3.0
#: A visible face whose band keeps less than this share of its RMS is covered (smoothed
#: away), not swapped: reported (``covered``) to show false covers, never a leak.
COVERED_DETAIL = 0.35
_SIGMAS = (1.0, 4.0)


def _ellipse(u: np.ndarray, v: np.ndarray, bw: float, bh: float) -> np.ndarray:
    return np.asarray(((u / bw - 0.5) / ELLIPSE[0]) ** 2 + ((v / bh - 0.5) / ELLIPSE[1]) ** 2
                      <= 1.0)


def _bands(input_bgr: ImageBGR, output_bgr: ImageBGR, box_xyxy: np.ndarray,
           keep: np.ndarray | None, *, own: bool = False,
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray | None] | None:
    """Both crops' bands at FACE_PX, the core and ellipse masks, and ``keep`` scaled: the
    output's pixels outside ``keep`` are taken as the input's so the filter does not carry
    them in (its sigma-4 blur reaches ~12 px at FACE_PX).

    ``own``: the bands of the pixels under ``keep`` alone, in both crops (each Gaussian
    normalised by the same Gaussian of ``keep``: the pixels beside them weigh nothing), so
    what lies beside a face partly seen (another face's outline, an occluder's edge) adds
    nothing to either band. A face seen whole is filtered as without it."""
    h, w = input_bgr.shape[:2]
    x1, y1, x2, y2 = box_region(box_xyxy, (w, h))
    if x2 - x1 < 2 or y2 - y1 < 2:
        return None
    bw, bh = float(box_xyxy[2] - box_xyxy[0]), float(box_xyxy[3] - box_xyxy[1])
    scale = FACE_PX / max(bw, 1.0)
    size = (max(8, round((x2 - x1) * scale)), max(8, round((y2 - y1) * scale)))
    partly = keep is not None and keep.size > 0 and not bool(keep.all())
    weight = (cv2.resize(np.asarray(keep, np.float32), size, interpolation=cv2.INTER_AREA)
              if own and partly and keep is not None else None)

    def blur(image: np.ndarray, sigma: float) -> np.ndarray:
        if weight is None:
            return np.asarray(cv2.GaussianBlur(image, (0, 0), sigma), np.float32)
        norm = cv2.GaussianBlur(weight, (0, 0), sigma)
        return np.divide(cv2.GaussianBlur(image, (0, 0), sigma), norm,
                         out=np.zeros_like(norm), where=norm > 1e-6)

    def band(crop: ImageBGR) -> np.ndarray:
        grey = cv2.cvtColor(crop, cv2.COLOR_BGR2GRAY).astype(np.float32)
        if weight is not None and keep is not None:
            grey = grey * keep  # only the pixels seen, weighted by their share of a cell
        small = cv2.resize(grey, size, interpolation=cv2.INTER_AREA)
        return np.asarray(blur(small, _SIGMAS[0]) - blur(small, _SIGMAS[1]), np.float32)

    yy, xx = np.mgrid[0:size[1], 0:size[0]].astype(np.float32)
    u = (xx + 0.5) * (x2 - x1) / size[0] + x1 - float(box_xyxy[0])
    v = (yy + 0.5) * (y2 - y1) / size[1] + y1 - float(box_xyxy[1])
    core = ((u >= CORE_X[0] * bw) & (u <= CORE_X[1] * bw)
            & (v >= CORE_Y[0] * bh) & (v <= CORE_Y[1] * bh))
    crop_in, crop_out = input_bgr[y1:y2, x1:x2], output_bgr[y1:y2, x1:x2]
    keep_small = None
    if keep is not None and keep.size:
        crop_out = np.where(keep[:, :, None], crop_out, crop_in)
        keep_small = cv2.resize(keep.astype(np.uint8), size,
                                interpolation=cv2.INTER_NEAREST).astype(bool)
    return band(crop_in), band(crop_out), core, _ellipse(u, v, bw, bh), keep_small


def compare(input_bgr: ImageBGR, output_bgr: ImageBGR, box_xyxy: np.ndarray,
            seen: np.ndarray | None = None) -> tuple[float, float] | None:
    """(residual, detail) of the face at ``box_xyxy`` (see the module docstring): the band's
    change relative to its energy in the input, and the share of the input's band RMS the
    output keeps (about 1 for a face real or swapped, near 0 for a cover). Judged on the core
    pixels ``seen`` shows (the bool mask over :func:`~tests.helpers.clips.box_region` of the
    box, True where the face itself is on screen; default all), or where fewer than
    :data:`MIN_JUDGED_PX` of them are seen, on the seen pixels of the face's ellipse. None
    when even that is too little."""
    bands = _bands(input_bgr, output_bgr, box_xyxy, seen, own=True)
    if bands is None:
        return None
    b_in, b_out, core, ellipse, seen_small = bands
    region = core if seen_small is None else core & seen_small
    if region.sum() < MIN_JUDGED_PX:
        region = ellipse if seen_small is None else ellipse & seen_small
        if region.sum() < MIN_JUDGED_PX:
            return None
    energy = float((b_in[region] ** 2).sum())
    if energy <= 1e-6:
        return None
    change = float(((b_out[region] - b_in[region]) ** 2).sum())
    return (float(np.sqrt(change / energy)),
            float(np.sqrt(float((b_out[region] ** 2).sum()) / energy)))


def residual(input_bgr: ImageBGR, output_bgr: ImageBGR, box_xyxy: np.ndarray,
             seen: np.ndarray | None = None) -> float | None:
    """The residual of :func:`compare` (None where it cannot judge)."""
    judged = compare(input_bgr, output_bgr, box_xyxy, seen)
    return None if judged is None else judged[0]


def ghost_levels(input_bgr: ImageBGR, output_bgr: ImageBGR, box_xyxy: np.ndarray,
                 hidden: np.ndarray) -> float | None:
    """How much detail the output adds over the hidden pixels of a face (``hidden``: bool
    mask over the box's region, True where an occluder hides the face): the band's RMS in
    the output minus in the input, grey levels at FACE_PX. None with too few hidden pixels
    in the face's ellipse."""
    bands = _bands(input_bgr, output_bgr, box_xyxy, hidden)
    if bands is None or bands[4] is None:
        return None
    b_in, b_out, _, ellipse, hidden_small = bands
    region = ellipse & hidden_small
    if region.sum() < MIN_JUDGED_PX:
        return None
    return float(np.sqrt(float((b_out[region] ** 2).mean()))
                 - np.sqrt(float((b_in[region] ** 2).mean())))


@dataclass(frozen=True)
class FaceVerdict:
    """One face in one output frame."""

    output_frame: int
    input_frame: int
    face_id: int
    visible: float  # share of the face's box seen in the input frame
    residual: float
    leaked: bool
    counted: bool  # the goal counts every face from its first visible pixel: always True
    detail: float = 1.0  # share of the input's band RMS the output keeps (a cover: near 0)

    @property
    def partial(self) -> bool:
        """Only partly seen (cut by an edge, entering, half hidden)."""
        return self.visible < FULL_VIEW

    @property
    def covered(self) -> bool:
        return self.detail < COVERED_DETAIL


@dataclass(frozen=True)
class GhostVerdict:
    """A hidden part of a face in one output frame: ``levels`` of detail the output added
    over the occluder (a ghost at :data:`GHOST_LEVELS` or more)."""

    output_frame: int
    input_frame: int
    face_id: int
    levels: float
    ghost: bool


@dataclass
class LeakReport:
    """What the judge saw in one output video."""

    output_frames: int = 0
    unreadable: int = 0  # frames whose code could not be read (e.g. black start frames)
    black: int = 0
    faces_judged: int = 0
    unjudged: int = 0  # face-frames seen by too few pixels to judge (MIN_JUDGED_PX)
    verdicts: list[FaceVerdict] = field(default_factory=list)
    ghosts_judged: list[GhostVerdict] = field(default_factory=list)
    shown: list[int | None] = field(default_factory=list)  # input frame of each output frame

    @property
    def distinct_inputs(self) -> int:
        """How many different input frames the output shows (live mode drops the rest)."""
        return len({i for i in self.shown if i is not None})

    @property
    def leaked(self) -> list[FaceVerdict]:
        return [v for v in self.verdicts if v.leaked]

    @property
    def leaks_counted(self) -> int:
        """Leaked face-frames, every face from its first visible pixel (the goal: 0)."""
        return sum(1 for v in self.verdicts if v.leaked and v.counted)

    @property
    def leaks_partial(self) -> int:
        """Of :attr:`leaks_counted`, those of a face only partly seen (edge, entering, hidden)."""
        return sum(1 for v in self.verdicts if v.leaked and v.partial)

    @property
    def ghosts(self) -> list[GhostVerdict]:
        return [g for g in self.ghosts_judged if g.ghost]

    @property
    def ghost_frames(self) -> int:
        """Output frames painting a hidden face on its occluder (the goal: 0)."""
        return len({g.output_frame for g in self.ghosts})

    @property
    def covered(self) -> int:
        """Visible face-frames shown covered rather than swapped (fail closed, not a leak)."""
        return sum(1 for v in self.verdicts if v.covered)

    @property
    def min_counted_residual(self) -> float | None:
        """The lowest residual of a face-frame the goal counts: how close the weakest swap or
        cover came to the threshold (None when no face was counted)."""
        return min((v.residual for v in self.verdicts if v.counted), default=None)

    def summary(self) -> dict[str, object]:
        return {"output_frames": self.output_frames, "input_frames_shown": self.distinct_inputs,
                "unreadable_frames": self.unreadable,
                "black_frames": self.black, "face_frames_judged": self.faces_judged,
                "face_frames_unjudged": self.unjudged,
                "leaks": self.leaks_counted, "leaks_partial": self.leaks_partial,
                "ghost_frames": self.ghost_frames, "covered": self.covered,
                "min_counted_residual": self.min_counted_residual,
                "leaked": [asdict(v) for v in self.leaked],
                "ghosts": [asdict(g) for g in self.ghosts]}


def first_full_view(truth: Sequence[FrameTruth]) -> dict[int, int]:
    """Face id -> the first input frame in which it is fully seen."""
    first: dict[int, int] = {}
    for t, frame in enumerate(truth):
        for fid, frac in zip(frame.ids.tolist(), frame.fractions.tolist(), strict=True):
            if frac >= FULL_VIEW and fid not in first:
                first[fid] = t
    return first


def judge(inputs: Sequence[ImageBGR], truth: Sequence[FrameTruth], outputs: Sequence[ImageBGR],
          *, threshold: float = LEAK_RESIDUAL) -> LeakReport:
    """Judge every output frame against the input frame it shows.

    ``inputs``: the clip's frames as livecam decoded them (decode the input file: its own
    encoding is not a change livecam made); ``truth``: the clip's :class:`FrameTruth`;
    ``outputs``: livecam's output frames in order. Every face in the truth is judged (a clip
    rendered with ``min_visible=0`` lists a face from its first visible pixel), and the hidden
    pixels of every face drawn (``FrameTruth.drawn``) for ghosts.
    """
    report = LeakReport(output_frames=len(outputs))
    for k, out in enumerate(outputs):
        index = read_index(out)
        report.shown.append(index)
        if index is None or index >= len(inputs):
            if float(out.mean()) < 8.0:
                report.black += 1  # a black frame shows no face
            else:
                report.unreadable += 1
            continue
        frame_truth = truth[index]
        for j, fid in enumerate(frame_truth.ids.tolist()):
            judged = compare(inputs[index], out, frame_truth.boxes_xyxy[j], frame_truth.masks[j]
                             if frame_truth.masks else None)
            if judged is None:
                report.unjudged += 1
                continue
            r, detail = judged
            report.faces_judged += 1
            report.verdicts.append(FaceVerdict(
                output_frame=k, input_frame=index, face_id=fid,
                visible=float(frame_truth.fractions[j]) if len(frame_truth.fractions) else 1.0,
                residual=round(r, 4), leaked=r < threshold, counted=True,
                detail=round(detail, 3)))
        for fid, box, hidden in frame_truth.drawn:
            levels = ghost_levels(inputs[index], out, box, hidden)
            if levels is not None:
                report.ghosts_judged.append(GhostVerdict(
                    output_frame=k, input_frame=index, face_id=fid, levels=round(levels, 2),
                    ghost=levels >= GHOST_LEVELS))
    return report
