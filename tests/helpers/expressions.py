"""Blinks, speech-like mouth motion and glances made from one real photo, and their measurement.

Used to check that a swap shows the *streamer's* eyes and mouth, frame by frame: build a clip
where a real face blinks, talks and looks around (:func:`animate_face`, driven by an
:class:`ExpressionTrack`), swap it, then measure eye openness, mouth openness and gaze on the
input and on the output with the real face mesh (:func:`measure`, 478 points with the iris) and
compare the two series (:func:`follow`: correlation and lag in frames).

How a frame is made: the photo's own 468-point mesh is moved (upper lids towards the lower
lids, the lower lip and the skin below it away from the upper lip) and the photo is warped onto
the moved mesh piecewise-affinely (livecam's own ``DenseWarper``, one pixel grid), inside the
face only; inside each eye's (narrower) opening the eyeball is left where it was, so a closing
lid covers it instead of squashing it; then each eye's interior is shifted sideways by a smooth
bump that is zero on the lids, which moves the iris and pupil as a glance does. The result is
the real photo's pixels, rearranged; nothing is drawn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np
import numpy.typing as npt

from livecam.analysis import geometry
from livecam.core.types import ImageBGR

FloatArray = npt.NDArray[np.float32]

# (upper, lower) lid pairs along each eye, corner to corner (MediaPipe indices).
LID_PAIRS = (
    ((246, 7), (161, 163), (160, 144), (159, 145), (158, 153), (157, 154), (173, 155)),
    ((466, 249), (388, 390), (387, 373), (386, 374), (385, 380), (384, 381), (398, 382)),
)
# (upper, lower) inner-lip pairs, corner to corner; the corners 78/308 stay.
INNER_LIP_PAIRS = ((191, 95), (80, 88), (81, 178), (82, 87), (13, 14), (312, 317), (311, 402),
                   (310, 318), (415, 324))
# Upper-lip points (outer and inner contours) and the corners: never moved.
_UPPER_LIP = (61, 185, 40, 39, 37, 0, 267, 269, 270, 409, 291, 78, 191, 80, 81, 82, 13, 312,
              311, 310, 415, 308)
# Iris centres in the 478-point mesh and which eye's corners they sit between.
IRIS_CENTRES = (468, 473)
_EYE_CORNERS = (geometry.EYE_RIGHT_CORNERS, geometry.EYE_LEFT_CORNERS)


@dataclass(frozen=True)
class ExpressionTrack:
    """What the face does, one value per frame (T,):

    - ``eyes_open``: lid gap as a fraction of the photo's own (1 = as photographed, 0 = shut);
    - ``mouth_open``: inner-lip gap as a fraction of the photo's own (0 = lips together);
    - ``gaze``: iris shift as a fraction of the eye width (+ = towards image right).
    """

    eyes_open: FloatArray
    mouth_open: FloatArray
    gaze: FloatArray

    def __len__(self) -> int:
        return len(self.eyes_open)

    @classmethod
    def talking(cls, n_frames: int = 90, fps: float = 30.0) -> ExpressionTrack:
        """Three blinks, one half-lidded look down, syllables at ~4 Hz, two glances aside."""
        t = np.arange(n_frames, dtype=np.float64)
        eyes = np.ones(n_frames)
        blink = np.array([0.6, 0.2, 0.05, 0.05, 0.25, 0.55, 0.85])
        for start in (int(0.12 * n_frames), int(0.42 * n_frames), int(0.8 * n_frames)):
            stop = min(n_frames, start + len(blink))
            eyes[start:stop] = blink[: stop - start]
        lowered = slice(int(0.58 * n_frames), int(0.7 * n_frames))
        eyes[lowered] = 0.5
        sec = t / fps
        mouth = 0.5 + 0.35 * np.sin(2 * np.pi * 3.7 * sec) + 0.2 * np.sin(2 * np.pi * 1.3 * sec
                                                                          + 1.0)
        gaze = np.zeros(n_frames)
        gaze[int(0.2 * n_frames): int(0.38 * n_frames)] = 0.12
        gaze[int(0.5 * n_frames): int(0.75 * n_frames)] = -0.12
        gaze = np.convolve(gaze, np.ones(3) / 3, mode="same")  # a glance takes a few frames
        return cls(eyes.astype(np.float32), np.clip(mouth, 0.0, 1.2).astype(np.float32),
                   gaze.astype(np.float32))


def moved_landmarks(landmarks_xy: FloatArray, eyes_open: float, mouth_open: float) -> FloatArray:
    """(468, 2) mesh with the lids and the lower lip moved (see the module docstring)."""
    xy = landmarks_xy[:468].astype(np.float32).copy()
    for eye in LID_PAIRS:
        for up, low in eye:
            xy[up] = landmarks_xy[low] + eyes_open * (landmarks_xy[up] - landmarks_xy[low])
    # the lower lip moves by the change of each inner-lip gap; the skin below follows with a
    # falloff (Gaussian in the distance to the nearest moved lip point)
    anchors = np.array([landmarks_xy[low] for _, low in INNER_LIP_PAIRS], np.float32)
    shifts = np.array([(mouth_open - 1.0) * (landmarks_xy[low] - landmarks_xy[up])
                       for up, low in INNER_LIP_PAIRS], np.float32)
    corners = landmarks_xy[[61, 291]]
    mouth_w = float(np.linalg.norm(corners[1] - corners[0]))
    down = landmarks_xy[152] - landmarks_xy[13]
    down /= max(float(np.linalg.norm(down)), 1e-6)
    fixed = set(_UPPER_LIP) | set(geometry.MOUTH_CORNERS)
    oval_like = {10, 152, 234, 454, 132, 361, 58, 288, 172, 397, 136, 365, 150, 379, 149, 378,
                 148, 377, 176, 400}
    for i in range(468):
        if i in fixed or i in oval_like:
            continue
        rel = landmarks_xy[i] - landmarks_xy[13]
        if float(rel @ down) < -0.02 * mouth_w:  # above the mouth: unchanged
            continue
        d2 = ((anchors - landmarks_xy[i]) ** 2).sum(axis=1)
        w = np.exp(-d2 / (2 * (0.25 * mouth_w) ** 2))
        k = int(np.argmin(d2))
        xy[i] = landmarks_xy[i] + shifts[k] * float(w[k])
    for (_, low), shift in zip(INNER_LIP_PAIRS, shifts, strict=True):
        xy[low] = landmarks_xy[low] + shift  # the exact gap on the measured pairs
    return xy


def glance(image_bgr: ImageBGR, landmarks_xy: FloatArray,
           loops: Sequence[npt.NDArray[np.int32]], gaze: float) -> ImageBGR:
    """A copy of ``image_bgr`` with each eye's interior (``loops``: the lid rims, indices into
    ``landmarks_xy`` (468+, 2)) shifted sideways by ``gaze`` eye widths at its centre and not
    at all on the lids: the iris moves as in a glance."""
    if abs(gaze) < 1e-4:
        return image_bgr
    out = image_bgr.copy()
    for loop, corners in zip(loops, _EYE_CORNERS, strict=True):
        pts = landmarks_xy[loop]
        x1, y1 = np.floor(pts.min(axis=0)).astype(int) - 2
        x2, y2 = np.ceil(pts.max(axis=0)).astype(int) + 3
        x1, y1 = max(x1, 0), max(y1, 0)
        inside = np.zeros((y2 - y1, x2 - x1), np.uint8)
        cv2.fillPoly(inside, [np.round(pts - (x1, y1)).astype(np.int32)], (255,))
        if not inside.any():
            continue
        dist = np.asarray(cv2.distanceTransform(inside, cv2.DIST_L2, 3), np.float32)
        bump = np.sqrt(dist / max(float(dist.max()), 1e-6))
        width = float(np.linalg.norm(landmarks_xy[corners[0]] - landmarks_xy[corners[1]]))
        yy, xx = np.mgrid[y1:y2, x1:x2].astype(np.float32)
        map_x = xx - gaze * width * bump
        out[y1:y2, x1:x2] = cv2.remap(image_bgr, map_x, yy, cv2.INTER_LINEAR,
                                      borderMode=cv2.BORDER_REPLICATE)
    return out


def animate_face(image_bgr: ImageBGR, landmarks_xy: FloatArray, landmarks_z: FloatArray,
                 track: ExpressionTrack, *, noise_sigma: float = 2.0,
                 seed: int = 0) -> list[ImageBGR]:
    """Frames (H, W, 3) uint8 of the photo's face doing ``track`` (see the module docstring).

    ``landmarks_xy`` (468+, 2) / ``landmarks_z`` (468+,) float32 is the photo's mesh. Fresh
    sensor noise of ``noise_sigma`` grey levels per frame, as a camera gives.
    """
    from livecam.swap.mesh import build_topology
    from livecam.swap.warp import DenseWarper, SourceMesh

    topology = build_topology()
    xy0 = np.ascontiguousarray(landmarks_xy[:468], np.float32)
    z0 = np.ascontiguousarray(landmarks_z[:468], np.float32)
    source = SourceMesh.build(image_bgr, xy0, topology)
    warper = DenseWarper(topology, step_px=1)
    rng = np.random.default_rng(seed)
    frames = []
    for e, m, g in zip(track.eyes_open, track.mouth_open, track.gaze, strict=True):
        xy = moved_landmarks(xy0, float(e), float(m))
        frame = image_bgr.copy()
        warp = warper.warp(source, xy, z0, (image_bgr.shape[0], image_bgr.shape[1]))
        if warp is not None:
            x1, y1, x2, y2 = warp.box_xyxy
            inside = warp.tri_id_coarse > 0  # step 1: one grid point per pixel
            frame[y1:y2, x1:x2][inside] = warp.warped_bgr[inside]
        # a lid slides over the eyeball, it does not squash it: inside the (narrower) opening
        # the eyeball stays where it was
        for loop in (topology.eye_right, topology.eye_left):
            opening = np.zeros(image_bgr.shape[:2], np.uint8)
            cv2.fillPoly(opening, [np.round(xy[loop] * 16).astype(np.int32)], (1,), cv2.LINE_8, 4)
            frame[opening > 0] = image_bgr[opening > 0]
        frame = glance(frame, xy, (topology.eye_right, topology.eye_left), float(g))
        noisy = frame + rng.normal(0.0, noise_sigma, frame.shape)
        frames.append(np.clip(noisy + 0.5, 0, 255).astype(np.uint8))
    return frames


@dataclass(frozen=True)
class ExpressionSeries:
    """Measured per frame (T,) float64; NaN where the mesh found no face.

    ``eyes`` is the mean lid gap / eye width of both eyes, ``mouth`` the inner-lip gap / mouth
    width (``livecam.analysis.geometry``), ``gaze`` the iris centre's position between the eye
    corners (0 = the corner on the image's left, 1 = on its right), mean of both eyes.
    """

    eyes: npt.NDArray[np.float64]
    mouth: npt.NDArray[np.float64]
    gaze: npt.NDArray[np.float64]


def gaze_of(landmarks_xy: FloatArray) -> float:
    """Iris centre's position along the eye-corner line, 0..1, mean of both eyes (478 points)."""
    values = []
    for iris, (a, b) in zip(IRIS_CENTRES, _EYE_CORNERS, strict=True):
        pa, pb = landmarks_xy[a], landmarks_xy[b]
        axis = pb - pa
        values.append(float((landmarks_xy[iris] - pa) @ axis) / max(float(axis @ axis), 1e-9))
    # both corner pairs run from image left to image right, so both values grow as the eyes
    # look towards image right
    return 0.5 * (values[0] + values[1])


def measure(frames: Sequence[ImageBGR], landmarks_xy: Sequence[FloatArray]) -> ExpressionSeries:
    """Eye, mouth and gaze series of ``frames``, the mesh run on each frame at the ROI that
    ``landmarks_xy[t]`` (468+, 2) gives (use the input's tracked landmarks for input and output
    alike, so both are looked at in the same place). Runs the 478-point mesh (MediaPipe graph).
    """
    from livecam.analysis.mesh import FaceMeshLandmarker
    from livecam.analysis.roi import roi_from_landmarks

    eyes, mouth, gaze = [], [], []
    with FaceMeshLandmarker(refine_landmarks=True) as mesh:
        for frame, xy in zip(frames, landmarks_xy, strict=True):
            result = mesh.landmarks(frame, [roi_from_landmarks(xy[:468])])[0]
            if result is None:
                eyes.append(np.nan)
                mouth.append(np.nan)
                gaze.append(np.nan)
                continue
            lm = result.landmarks_xy
            eyes.append(float(np.mean(geometry.eye_openness(lm))))
            mouth.append(geometry.mouth_openness(lm))
            gaze.append(gaze_of(lm))
    return ExpressionSeries(np.asarray(eyes), np.asarray(mouth), np.asarray(gaze))


@dataclass(frozen=True)
class Follow:
    """How well an output series follows the input: Pearson correlation at lag 0, the lag
    (frames, + = output behind) where the correlation peaks, and that peak."""

    correlation: float
    lag_frames: int
    peak_correlation: float


def follow(input_series: npt.NDArray[np.float64], output_series: npt.NDArray[np.float64],
           max_lag: int = 5) -> Follow:
    """Correlation of two (T,) series (NaN frames dropped) and the lag that maximises it."""

    def corr(lag: int) -> float:
        a = input_series[: len(input_series) - lag] if lag >= 0 else input_series[-lag:]
        b = output_series[lag:] if lag >= 0 else output_series[: len(output_series) + lag]
        ok = np.isfinite(a) & np.isfinite(b)
        if ok.sum() < 5 or np.std(a[ok]) < 1e-9 or np.std(b[ok]) < 1e-9:
            return float("nan")
        return float(np.corrcoef(a[ok], b[ok])[0, 1])

    by_lag = {lag: corr(lag) for lag in range(-max_lag, max_lag + 1)}
    finite = {k: v for k, v in by_lag.items() if np.isfinite(v)}
    best = max(finite, key=lambda k: finite[k]) if finite else 0
    return Follow(by_lag[0], best, finite.get(best, float("nan")))


def streamer_clip(n_frames: int = 60, *, face_px: int = 600) -> tuple[list[ImageBGR],
                                                                       ExpressionTrack]:
    """The standard clip: skimage's astronaut (her head and shoulders, enlarged so the face is
    about a third of the ``face_px`` square frame) blinking, talking and glancing
    (:meth:`ExpressionTrack.talking`). Frames (face_px, face_px, 3) uint8."""
    from skimage import data

    from livecam.analysis.photo import analyze_photo

    photo = np.ascontiguousarray(data.astronaut()[0:300, 90:390, ::-1])
    image = np.asarray(cv2.resize(photo, (face_px, face_px), interpolation=cv2.INTER_CUBIC),
                       np.uint8)
    faces = analyze_photo(image)
    if len(faces) != 1:
        raise RuntimeError(f"expected one face in the astronaut photo, found {len(faces)}")
    track = ExpressionTrack.talking(n_frames)
    return animate_face(image, faces.landmarks_xy[0], faces.landmarks_z[0], track), track


@dataclass(frozen=True)
class FollowReport:
    """Input and output series of one clip through one swap, and how well each follows."""

    input: ExpressionSeries
    output: ExpressionSeries

    def follow(self, name: str, max_lag: int = 5) -> Follow:
        """``name`` is ``eyes``, ``mouth`` or ``gaze``."""
        return follow(getattr(self.input, name), getattr(self.output, name), max_lag)


def run_through(frames: Sequence[ImageBGR], stages: Sequence[object],
                state: object) -> tuple[list[ImageBGR], list[FloatArray]]:
    """Push ``frames`` through opened pipeline ``stages`` (analysis first, the swap last) as
    ``livecam run`` does; returns the output images and, per frame, the first face's landmarks
    as the swap stage received them (for measuring input and output at the same place)."""
    from livecam.core.types import Frame, Packet

    outputs: list[ImageBGR] = []
    landmarks: list[FloatArray] = []
    for i, image in enumerate(frames):
        packet = Packet.from_frame(Frame(i, i * 33_333_333, image), state)  # type: ignore[arg-type]
        for stage in stages:
            if stage is stages[-1]:
                if len(packet.faces) == 0:
                    raise RuntimeError(f"frame {i}: the analysis lost the face")
                landmarks.append(packet.faces.landmarks_xy[0])
            packet = stage.process(packet)  # type: ignore[attr-defined]
        outputs.append(packet.image_bgr)
    return outputs, landmarks


def follow_report(frames: Sequence[ImageBGR], outputs: Sequence[ImageBGR],
                  landmarks: Sequence[FloatArray]) -> FollowReport:
    """Measure input and output at the same places (see :func:`measure`)."""
    return FollowReport(measure(frames, landmarks), measure(outputs, landmarks))
