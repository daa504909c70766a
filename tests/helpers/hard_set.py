"""A hard test set for the classic swap: people of varied skin tone, age and gender, some with
glasses or a beard, each in even, dim and warm light, at webcam face sizes.

Real people come from photos that installed packages ship (skimage's astronaut, the six people
of insightface's ``t1.jpg``, insightface's Tom Hanks crop, matplotlib's Grace Hopper): 9 people,
5 women and 4 men, from their twenties to about 80. No installed package ships a photo of a
person with dark skin, glasses or a beard, so those are made from these photos, physically:

- **Skin tone** (:func:`tone_shift`): in linear light, the skin's reflectance is multiplied by
  the transmittance of an added layer of melanin, ``exp(-m * [0.28, 0.55, 0.90])`` for R, G, B
  (melanin absorbs more the shorter the wavelength). Only skin-coloured pixels (near the face's
  own skin colour) change: hair, eyes, lips keep theirs. These are the same people with more
  melanin, not other people: a limit of this set, stated in docs/classic-swap.md.
- **Glasses** (:func:`draw_glasses`): dark rims round each eye, a bridge and arms to the ears.
- **Beard** (:func:`draw_beard`): dark strands (random short lines) over the jaw, chin and upper
  lip, the lips left clear.

Each person's accessory mask (exact: drawn here) travels with it, so a judge can exclude it
from skin statistics and check it is kept on the target or absent from a swap.

Lights (:func:`relight`), on linearised sRGB (IEC 61966-2-1), then re-encoded:

- ``even``: the photo as shipped.
- ``dim``: exposure x0.3 and a lamp to one side (linear gain falling from 1 to 0.4 across the
  face, as a single source's falloff), then sensor noise (Gaussian, sigma 3 grey levels).
- ``warm``: a 3000 K tungsten cast the camera's white balance half corrects: linear channel
  gains R 1.0, G 0.72, B 0.45 (halfway, in log, between D65 and the 3000 K blackbody), x0.85.

Everything is deterministic (fixed seeds). Building the set runs MediaPipe on every image
(about 0.3 s each); any thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from tests.helpers.swap_eval import RealFace, enlarged, real_faces

ImageBGR = npt.NDArray[np.uint8]
Mask = npt.NDArray[np.bool_]

LIGHTS = ("even", "dim", "warm")
_MELANIN_ABSORB_RGB = np.array([0.28, 0.55, 0.90], np.float32)
_WARM_GAIN_RGB = np.array([1.0, 0.72, 0.45], np.float32)


@dataclass(frozen=True)
class HardFace:
    """One person in one light: ``face`` (photo + mesh found on this very image) and the
    accessory masks (H, W) bool drawn on it (all False when it has none)."""

    person: str
    light: str
    face: RealFace
    glasses: Mask
    beard: Mask
    description: str
    bare_bgr: ImageBGR  # the same image without the accessories (same tone and light)

    @property
    def accessories(self) -> Mask:
        return self.glasses | self.beard


# person label -> (base face label, description, melanin, glasses, beard)
PEOPLE: tuple[tuple[str, str, str, float, bool, bool], ...] = (
    ("astronaut+glasses", "astronaut", "woman, 40s, light, glasses", 0.0, True, False),
    ("t1-0 dark", "t1-0", "woman, 30s, dark (melanin 1.6)", 1.6, False, False),
    ("t1-1 medium", "t1-1", "woman, 30s, medium (melanin 0.8)", 0.8, False, False),
    ("t1-2+beard", "t1-2", "man, 30s, light, beard", 0.0, False, True),
    ("t1-3 medium+glasses", "t1-3", "man, 30s, medium, glasses", 0.8, True, False),
    ("t1-4", "t1-4", "man, 30s, light, turned 34 deg", 0.0, False, False),
    ("t1-5 dark", "t1-5", "woman, 30s, dark (melanin 1.3)", 1.3, False, False),
    ("hanks+beard", "hanks", "man, 50s, light, beard, small photo", 0.0, False, True),
    ("hopper", "hopper", "woman, about 80, light, her own glasses", 0.0, False, False),
)


def srgb_to_linear(image_u8: npt.NDArray[np.uint8]) -> npt.NDArray[np.float32]:
    v = image_u8.astype(np.float32) / 255.0
    return np.where(v <= 0.04045, v / 12.92, ((v + 0.055) / 1.055) ** 2.4).astype(np.float32)


def linear_to_srgb(linear: npt.NDArray[np.float32]) -> npt.NDArray[np.uint8]:
    v = np.clip(linear, 0.0, 1.0)
    s = np.where(v <= 0.0031308, v * 12.92, 1.055 * np.power(v, 1 / 2.4) - 0.055)
    return np.clip(np.round(s * 255.0), 0, 255).astype(np.uint8)


def relight(image_bgr: ImageBGR, light: str, face_xy: npt.NDArray[np.float32], *,
            noise: bool = True, seed: int = 0) -> ImageBGR:
    """``image_bgr`` under ``light`` (``LIGHTS``); ``face_xy`` (N, 2) places the dim lamp's
    falloff across the face. ``noise=False`` leaves out the sensor noise (the judge's
    reference colours)."""
    if light == "even":
        return image_bgr.copy()
    lin = srgb_to_linear(image_bgr)
    if light == "dim":
        x1, x2 = float(face_xy[:, 0].min()), float(face_xy[:, 0].max())
        xs = np.arange(image_bgr.shape[1], dtype=np.float32)
        ramp = np.clip((xs - x1) / max(x2 - x1, 1.0), 0.0, 1.0)
        lin = lin * (0.3 * (1.0 - 0.6 * ramp))[None, :, None]
        out = linear_to_srgb(lin).astype(np.float32)
        if noise:
            out += np.random.default_rng(seed).normal(0.0, 3.0, out.shape).astype(np.float32)
        return np.clip(np.round(out), 0, 255).astype(np.uint8)
    if light == "warm":
        return linear_to_srgb(lin * (_WARM_GAIN_RGB[::-1] * 0.85))
    raise ValueError(f"unknown light {light!r}: use one of {', '.join(LIGHTS)}")


def face_polygon(xy: npt.NDArray[np.float32], shape_hw: tuple[int, int]) -> Mask:
    from livecam.swap.mesh import build_topology

    mask = np.zeros(shape_hw, np.uint8)
    cv2.fillPoly(mask, [np.round(xy[build_topology().face_oval]).astype(np.int32)], (1,))
    return mask > 0


def skin_colour_mask(image_bgr: ImageBGR, xy: npt.NDArray[np.float32]) -> Mask:
    """Pixels of the whole image near the colour of the face's cheeks (robust Lab distance):
    the face's, ears' and neck's skin, without hair, eyes, brows or background."""
    lab = cv2.cvtColor(image_bgr, cv2.COLOR_BGR2LAB).astype(np.float32)
    cheeks = np.zeros(image_bgr.shape[:2], np.uint8)
    for idx in ((50, 101, 118, 117, 123, 187, 205), (280, 330, 347, 346, 352, 411, 425)):
        cv2.fillConvexPoly(cheeks, np.round(xy[list(idx)]).astype(np.int32), (1,))
    px = lab[cheeks > 0]
    centre = np.median(px, axis=0)
    spread = np.maximum(np.median(np.abs(px - centre), axis=0) * 1.4826, [6.0, 4.0, 4.0])
    d = (lab - centre) / spread * np.array([0.05, 1.0, 1.0], np.float32)  # shading: any L
    near = (np.sqrt((d * d).sum(axis=2)) < 5.0).astype(np.uint8)
    # only the head and neck: a face-sized region round the outline, extended down the neck
    width = float(np.ptp(xy[:, 0]))
    head = np.zeros_like(near)
    hull = cv2.convexHull(np.round(xy).astype(np.int32))
    cv2.fillConvexPoly(head, hull, (1,))
    grow = max(3, int(width * 0.2)) | 1
    head = cv2.dilate(head, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (grow, grow)))
    chin = xy[152]
    cv2.rectangle(head, (round(chin[0] - width * 0.35), round(chin[1] - width * 0.2)),
                  (round(chin[0] + width * 0.35), round(chin[1] + width * 0.7)), (1,), -1)
    k = max(3, int(width * 0.04)) | 1
    near = cv2.morphologyEx(near & head, cv2.MORPH_CLOSE,
                            cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k)))
    return np.asarray(near > 0, bool)


def tone_shift(image_bgr: ImageBGR, xy: npt.NDArray[np.float32], melanin: float) -> ImageBGR:
    """The skin with ``melanin`` more absorbance (0: unchanged), soft-edged."""
    if melanin <= 0.0:
        return image_bgr.copy()
    width = float(np.ptp(xy[:, 0]))
    skin = skin_colour_mask(image_bgr, xy).astype(np.float32)
    k = max(3, int(width * 0.03)) | 1
    skin = np.asarray(cv2.GaussianBlur(skin, (k, k), 0), np.float32)
    trans = np.exp(-melanin * _MELANIN_ABSORB_RGB[::-1]).astype(np.float32)  # BGR order
    lin = srgb_to_linear(image_bgr)
    lin = lin * (1.0 - skin[:, :, None] + skin[:, :, None] * trans)
    return linear_to_srgb(lin)


def draw_glasses(image_bgr: ImageBGR, xy: npt.NDArray[np.float32]) -> tuple[ImageBGR, Mask]:
    """Dark-rimmed glasses drawn on the face; returns the image and the frame's mask."""
    from livecam.swap.mesh import build_topology

    topo = build_topology()
    width = float(np.ptp(xy[:, 0]))
    thick = max(2, round(width * 0.03))
    mask = np.zeros(image_bgr.shape[:2], np.uint8)
    centres = []
    for loop in (topo.eye_right, topo.eye_left):
        eye = xy[loop]
        c = eye.mean(axis=0)
        centres.append(c)
        half_w = float(np.ptp(eye[:, 0])) * 0.85
        axes = (round(half_w), round(half_w * 0.72))
        cv2.ellipse(mask, (round(c[0]), round(c[1] + half_w * 0.1)), axes, 0, 0, 360, (1,),
                    thick, cv2.LINE_AA)
    ends = [xy[234], xy[454]]  # the face's outline at the eyes: where the arms run to the ears
    inner = sorted(centres, key=lambda p: p[0])
    bridge_y = round(float(xy[168, 1]))
    gap = float(np.ptp(np.array(centres)[:, 0])) * 0.25
    cv2.line(mask, (round(xy[168, 0] - gap), bridge_y), (round(xy[168, 0] + gap), bridge_y),
             (1,), thick, cv2.LINE_AA)
    for c, e in zip(inner, sorted(ends, key=lambda p: p[0]), strict=True):
        side = -1 if e[0] < c[0] else 1
        start = (round(c[0] + side * float(np.ptp(xy[topo.eye_right][:, 0])) * 0.85),
                 round(c[1]))
        cv2.line(mask, start, (round(e[0]), round(e[1])), (1,), thick, cv2.LINE_AA)
    frame = mask > 0
    out = image_bgr.copy()
    out[frame] = (28, 26, 30)
    return out, frame


def draw_beard(image_bgr: ImageBGR, xy: npt.NDArray[np.float32], *,
               seed: int = 0) -> tuple[ImageBGR, Mask]:
    """Dark strands over jaw, chin and upper lip (lips clear); returns image and beard mask."""
    from livecam.swap.mesh import build_topology

    topo = build_topology()
    width = float(np.ptp(xy[:, 0]))
    h, w = image_bgr.shape[:2]
    region = np.zeros((h, w), np.uint8)
    cv2.fillPoly(region, [np.round(xy[topo.face_oval]).astype(np.int32)], (1,))
    region[: round(float(xy[2, 1]) + width * 0.02)] = 0  # below the nose
    lips = np.zeros((h, w), np.uint8)
    cv2.fillConvexPoly(lips, cv2.convexHull(np.round(xy[topo.lips]).astype(np.int32)), (1,))
    region[cv2.dilate(lips, np.ones((3, 3), np.uint8)) > 0] = 0
    rng = np.random.default_rng(seed)
    strands = np.zeros((h, w), np.float32)
    ys, xs = np.nonzero(region)
    length = max(3.0, width * 0.03)
    for k in rng.choice(len(ys), size=min(len(ys), int(len(ys) * 0.25)), replace=False):
        angle = np.pi / 2 + rng.normal(0.0, 0.35)
        dx, dy = np.cos(angle) * length, np.sin(angle) * length
        cv2.line(strands, (int(xs[k]), int(ys[k])), (int(xs[k] + dx), int(ys[k] + dy)),
                 (float(rng.uniform(0.6, 1.0)),), 1, cv2.LINE_AA)
    cover = np.clip(cv2.GaussianBlur(strands, (3, 3), 0) * 1.3, 0, 0.92) * region
    hair = np.array([22, 30, 42], np.float32)  # dark brown, BGR
    out = image_bgr.astype(np.float32) * (1.0 - cover[:, :, None]) + hair * cover[:, :, None]
    return np.clip(np.round(out), 0, 255).astype(np.uint8), cover > 0.3


def hopper_face() -> RealFace:
    """Grace Hopper (matplotlib's sample photo): about 80, her own glasses, mouth closed."""
    import matplotlib.cbook

    from livecam.analysis.photo import analyze_photo

    sample: Any = matplotlib.cbook.get_sample_data("grace_hopper.jpg")  # an open file
    with sample as f:
        data = np.frombuffer(f.read(), np.uint8)
    image = np.asarray(cv2.imdecode(data, cv2.IMREAD_COLOR), np.uint8)
    found = analyze_photo(image)
    return RealFace("hopper", image, found.landmarks_xy[0, :468].copy(),
                    found.landmarks_z[0, :468].copy())


def _found(label: str, image: ImageBGR) -> RealFace:
    from livecam.analysis.photo import analyze_photo

    found = analyze_photo(image)
    if len(found) == 0:
        raise RuntimeError(f"{label}: no face found in the hard set's image")
    return RealFace(label, image, found.landmarks_xy[0, :468].copy(),
                    found.landmarks_z[0, :468].copy())


def build_people(face_px: float = 260.0) -> list[HardFace]:
    """The 9 people in even light, faces about ``face_px`` wide, accessories and tone applied
    (mesh found again on the final image)."""
    bases = {f.label: f for f in real_faces()}
    bases["hopper"] = hopper_face()
    people = []
    for seed, (label, base, desc, melanin, glasses, beard) in enumerate(PEOPLE):
        face = enlarged(bases[base], face_px)
        image = toned = tone_shift(face.image_bgr, face.landmarks_xy, melanin)
        empty = np.zeros(image.shape[:2], bool)
        g_mask, b_mask = empty, empty
        if beard:
            image, b_mask = draw_beard(image, face.landmarks_xy, seed=seed)
        if glasses:
            image, g_mask = draw_glasses(image, face.landmarks_xy)
        people.append(HardFace(label, "even", _found(label, image), g_mask, b_mask, desc, toned))
    return people


def bare(person: HardFace) -> HardFace:
    """``person`` without accessories but with ``person``'s own mesh, so a swap from it
    differs from one from ``person`` only in the accessories' pixels."""
    face = RealFace(person.person + " bare", person.bare_bgr, person.face.landmarks_xy,
                    person.face.landmarks_z)
    empty = np.zeros_like(person.glasses)
    return HardFace(person.person + " bare", person.light, face, empty, empty,
                    person.description, person.bare_bgr)


def in_light(person: HardFace, light: str, seed: int = 0) -> HardFace:
    """``person`` (even light) in ``light``, its mesh found again on the relit image."""
    xy = person.face.landmarks_xy
    image = relight(person.face.image_bgr, light, xy, seed=seed)
    face = _found(f"{person.person} {light}", image) if light != "even" else person.face
    return HardFace(person.person, light, face, person.glasses, person.beard, person.description,
                    relight(person.bare_bgr, light, xy, seed=seed))
