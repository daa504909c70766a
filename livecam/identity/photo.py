"""Read a source photo, find its face and check it is usable.

:func:`read_photo` turns a path into a BGR image or an :class:`IdentityError` that says what is
wrong (missing, unreadable, not an image, too large). :func:`prepare_photo` finds the face,
crops and scales the texture the classic swap needs and lists quality warnings (several faces
of similar size, small, turned, eyes closed, greyscale, blurry). Heavy: it runs face detection
and the face mesh (~0.3 s). Any thread.

The size limits (``advanced.identity.min_face_px``, ``advanced.identity.warn_face_px``) come from
``scripts/bench_source_face_size.py``: the independent judge's identity score of the classic
swap holds for source faces down to 48 px wide and falls below 40 px, while the swapped face's
detail falls with every step below the live face's own width (the texture is stretched).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import stat
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import numpy.typing as npt

from livecam.analysis import geometry
from livecam.capture.still import DECODE_PIXELS, decode_image
from livecam.config.identity import IdentityConfig
from livecam.core.errors import IdentityError, InputError

log = logging.getLogger(__name__)

ImageBGR = npt.NDArray[np.uint8]
FloatArray = npt.NDArray[np.float32]

_TEXTURE_MARGIN = 0.35  # crop margin around the mesh box, as a fraction of its size
_GREY_CHANNEL_SPREAD = 4.0  # mean |B-G|+|G-R| below this (grey levels) = greyscale photo
_BLUR_LAPLACIAN_VAR = 20.0  # variance of the Laplacian of the face below this = blurry
#: Another face at least this share of the largest one's width makes the choice ambiguous (a
#: group or couple photo): the photo gets a warning. Smaller ones (people in the background)
#: only get a note.
_RIVAL_FACE_SHARE = 0.5
THUMB_PX = 128


@dataclass(frozen=True)
class PreparedPhoto:
    """A source photo reduced to what the swap needs.

    - ``sha256``: hex digest of the photo file's bytes (the cache key).
    - ``texture_bgr``: (h, w, 3) uint8 crop around the face, scaled so the face is at most
      ``texture_face_px`` wide.
    - ``landmarks_xy`` (468, 2) / ``landmarks_z`` (468,) float32 in ``texture_bgr`` pixels.
    - ``thumb_bgr``: (128, 128, 3) uint8 square thumbnail of the face.
    - ``face_width_px``: face width in the original photo.
    - ``warnings``: quality problems, each a sentence; empty when the photo is good.
    - ``notes``: remarks that are not problems (several faces: the largest was used).
    """

    sha256: str
    texture_bgr: ImageBGR
    landmarks_xy: FloatArray
    landmarks_z: FloatArray
    thumb_bgr: ImageBGR
    face_width_px: float
    warnings: tuple[str, ...]
    notes: tuple[str, ...] = ()


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def max_photo_bytes(max_megapixels: float) -> int:
    """The largest file a photo of ``max_megapixels`` can be: 8 bytes a pixel (a 16-bit RGBA
    PNG stored uncompressed) and 16 MiB of metadata (ICC profiles, EXIF, thumbnails)."""
    return round(max_megapixels * 1e6 * 8) + (16 << 20)


def read_photo(path: str | Path, *, max_megapixels: float) -> tuple[ImageBGR, bytes]:
    """(image (H, W, 3) uint8 BGR, the file's bytes), or :class:`IdentityError`. What is no
    photo file (a pipe, a device) or larger than any photo of ``max_megapixels`` is refused
    before it is read: reading first, ``/dev/zero`` filled the memory."""
    p = Path(path)
    limit = max_photo_bytes(max_megapixels)
    try:
        st = p.stat()
        if stat.S_ISDIR(st.st_mode):
            raise IdentityError(f"photo {p} is a folder: give an image file")
        if not stat.S_ISREG(st.st_mode):
            raise IdentityError(f"photo {p} is not a file (a pipe or a device): save the photo "
                                "to a file first")
        size = st.st_size
        data = b""
        if size <= limit:
            with p.open("rb") as fh:
                data = fh.read(limit + 1)  # bounded, should the file grow meanwhile
            size = max(size, len(data))
    except FileNotFoundError:
        raise IdentityError(f"photo {p} does not exist: check the path") from None
    except OSError as exc:
        raise IdentityError(f"photo {p} cannot be read: {exc.strerror}") from None
    if size > limit:
        raise IdentityError(f"photo {p} is {size / 1e6:.0f} MB: more than a photo of "
                            f"advanced.capture.max_image_megapixels ({max_megapixels:g} MP) can "
                            "be; give a JPEG or PNG photo")
    if not data:
        raise IdentityError(f"photo {p} is empty: give a JPEG or PNG photo of a face")
    try:  # the size is checked from the header, before decoding (a 40000x40000 PNG is small)
        image = decode_image(data, max_pixels=round(max_megapixels * 1e6), label=f"photo {p}",
                             knob="advanced.capture.max_image_megapixels",
                             decode_pixels=DECODE_PIXELS)
    except InputError as exc:
        raise IdentityError(str(exc)) from None
    return image, data


def _is_greyscale(image_bgr: ImageBGR) -> bool:
    small = cv2.resize(image_bgr, (64, 64), interpolation=cv2.INTER_AREA).astype(np.int16)
    spread = np.abs(small[:, :, 0] - small[:, :, 1]) + np.abs(small[:, :, 1] - small[:, :, 2])
    return float(spread.mean()) < _GREY_CHANNEL_SPREAD


def _crop(image: ImageBGR, box_xyxy: npt.NDArray[np.float32], margin: float,
          ) -> tuple[ImageBGR, npt.NDArray[np.float32]]:
    """Square crop around the box (padded by replication where it leaves the image)."""
    x1, y1, x2, y2 = (float(v) for v in box_xyxy)
    side = max(x2 - x1, y2 - y1) * (1.0 + 2.0 * margin)
    cx, cy = (x1 + x2) / 2.0, (y1 + y2) / 2.0
    ox, oy = round(cx - side / 2), round(cy - side / 2)
    s = round(side)
    h, w = image.shape[:2]
    pad = [max(0, -oy), max(0, oy + s - h), max(0, -ox), max(0, ox + s - w)]
    padded = image
    if any(pad):
        padded = np.asarray(cv2.copyMakeBorder(image, pad[0], pad[1], pad[2], pad[3],
                                               cv2.BORDER_REPLICATE), np.uint8)
    crop = padded[oy + pad[0]: oy + pad[0] + s, ox + pad[2]: ox + pad[2] + s]
    return np.ascontiguousarray(crop), np.array([ox, oy], np.float32)


def prepare_photo(image_bgr: ImageBGR, data: bytes, config: IdentityConfig, *,
                  label: str = "photo") -> PreparedPhoto:
    """Find the face in ``image_bgr`` and build a :class:`PreparedPhoto` (see module doc).

    Raises :class:`IdentityError` when there is no face, it is narrower than
    ``config.min_face_px`` or turned sideways more than ``config.max_turn_deg``. Several faces:
    the largest is used; a warning when another one is at least half as wide (which person is
    meant is then a guess), else a note.
    """
    from livecam.analysis.photo import analyze_photo

    h, w = image_bgr.shape[:2]
    scale = min(1.0, config.analysis_max_side_px / max(h, w))
    work = image_bgr if scale >= 1.0 else np.asarray(cv2.resize(
        image_bgr, (round(w * scale), round(h * scale)), interpolation=cv2.INTER_AREA), np.uint8)
    faces = analyze_photo(work)
    if len(faces) == 0:
        raise IdentityError(f"{label}: no face found; use a sharp, well-lit photo where the "
                            "face is clearly visible and roughly frontal")
    notes: tuple[str, ...] = ()
    rival: tuple[str, ...] = ()
    if len(faces) > 1:
        widths = [geometry.face_width_px(faces.landmarks_xy[i, :468]) / scale
                  for i in range(len(faces))]
        largest, next_px = widths[0], max(widths[1:])
        if next_px >= _RIVAL_FACE_SHARE * largest:
            rival = (f"{len(faces)} faces of similar size (the largest {largest:.0f} px wide, "
                     f"another {next_px:.0f} px): crop the photo to the one face you mean; "
                     "otherwise the largest is used",)
        else:
            notes = (f"{len(faces)} faces found; using the largest ({largest:.0f} px wide, the "
                     "others under half of that)",)
    prep = prepare_face(image_bgr, data, faces.landmarks_xy[0, :468] / scale,
                        faces.landmarks_z[0, :468] / scale, config, label=label, notes=notes)
    return dataclasses.replace(prep, warnings=rival + prep.warnings) if rival else prep


def prepare_face(image_bgr: ImageBGR, data: bytes, landmarks_xy: FloatArray,
                 landmarks_z: FloatArray, config: IdentityConfig, *, label: str = "photo",
                 notes: tuple[str, ...] = ()) -> PreparedPhoto:
    """Like :func:`prepare_photo` for a face whose mesh is already known: ``landmarks_xy``
    (468, 2) / ``landmarks_z`` (468,) float32 in ``image_bgr`` pixels. ``data`` is hashed for
    the cache key."""
    warnings: list[str] = []
    xy = np.asarray(landmarks_xy, np.float32)[:468]
    z = np.asarray(landmarks_z, np.float32)[:468]
    width = geometry.face_width_px(xy)
    if width < config.min_face_px:
        raise IdentityError(f"{label}: the face is {width:.0f} px wide, below the minimum of "
                            f"{config.min_face_px} px (advanced.identity.min_face_px); use a "
                            "larger or closer photo")
    if width < config.warn_face_px:
        warnings.append(f"face is only {width:.0f} px wide (under {config.warn_face_px}, "
                        "advanced.identity.warn_face_px): the swapped face carries the photo's "
                        "detail, so it looks soft on a larger live face; use a larger or closer "
                        "photo")
    pose = geometry.head_pose(xy, z)
    if abs(pose.yaw_deg) > config.max_turn_deg:
        raise IdentityError(f"{label}: the head is turned {abs(pose.yaw_deg):.0f}° sideways "
                            "(more than advanced.identity.max_turn_deg="
                            f"{config.max_turn_deg:g}): its far side would be pasted "
                            "stretched; use a photo where the face looks at the camera")
    # the mesh gives pitch only up to a person-dependent offset (~10°), so pitch gets slack
    if abs(pose.yaw_deg) > config.warn_turn_deg or abs(pose.pitch_deg) > config.warn_turn_deg + 15:
        warnings.append(f"head is turned (yaw {pose.yaw_deg:.0f}°, pitch {pose.pitch_deg:.0f}°):"
                        " a frontal photo covers the face better")
    eyes = geometry.eye_openness(xy)
    if min(eyes) < 0.12:
        warnings.append("eyes look closed: the live face's own eyes will be kept "
                        "(advanced.swap.keep_eyes=auto) or will look closed")
    if _is_greyscale(image_bgr):
        warnings.append("photo is greyscale: the swapped face will be grey")
    lo, hi = xy.min(axis=0), xy.max(axis=0)
    crop, origin = _crop(image_bgr, np.concatenate([lo, hi]), _TEXTURE_MARGIN)
    crop_xy = xy - origin
    texture_scale = min(1.0, config.texture_face_px / width)
    if texture_scale < 1.0:
        old_side = crop.shape[0]
        side = max(1, round(old_side * texture_scale))
        crop = np.asarray(cv2.resize(crop, (side, side), interpolation=cv2.INTER_AREA), np.uint8)
        texture_scale = side / old_side  # exact, after rounding the size
    tex_xy = (crop_xy * texture_scale).astype(np.float32)
    tex_z = (z * texture_scale).astype(np.float32)
    face_grey = cv2.cvtColor(crop, cv2.COLOR_BGR2GRAY)
    sharpness = float(cv2.Laplacian(face_grey, cv2.CV_32F).var())
    if sharpness < _BLUR_LAPLACIAN_VAR:
        warnings.append(f"photo looks blurry (sharpness {sharpness:.0f}): the face will too")
    thumb = np.asarray(cv2.resize(crop, (THUMB_PX, THUMB_PX), interpolation=cv2.INTER_AREA),
                       np.uint8)
    return PreparedPhoto(sha256=sha256_of(data), texture_bgr=crop, landmarks_xy=tex_xy,
                         landmarks_z=tex_z, thumb_bgr=thumb, face_width_px=width,
                         warnings=tuple(warnings), notes=notes)

