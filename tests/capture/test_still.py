"""decode_image decodes JPEG, PNG, WebP and BMP with Pillow (silent on stderr, strict about a
file cut short): the pixels must stay those OpenCV's ``IMREAD_COLOR`` gave before, whatever
the file's subsampling, coding, colours, alpha, bit depth and EXIF orientation."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np
import pytest
from PIL import Image

from livecam.capture.still import decode_image
from livecam.core.errors import InputError

Encode = Callable[[np.ndarray], bytes]  # (H, W, 3) uint8 RGB -> file bytes


def _pillow(fmt: str, mode: str | None = None, orientation: int | None = None,
            **save: object) -> Encode:
    def encode(rgb: np.ndarray) -> bytes:
        picture = Image.fromarray(rgb)
        if mode == "RGBA":  # an alpha that varies across the picture
            alpha = np.linspace(0, 255, rgb.shape[1], dtype=np.uint8)
            picture = Image.fromarray(np.dstack([rgb, np.tile(alpha, (rgb.shape[0], 1))]))
        elif mode is not None:
            picture = picture.convert(mode)
        if orientation is not None:
            exif = picture.getexif()
            exif[0x0112] = orientation
            save["exif"] = exif
        out = io.BytesIO()
        picture.save(out, fmt, **save)
        return out.getvalue()

    return encode


def _png_16_bit(grey: bool) -> Encode:
    def encode(rgb: np.ndarray) -> bytes:
        image = rgb[:, :, ::-1].astype(np.uint16) * 257 + 3  # low bytes that differ
        return cv2.imencode(".png", image[:, :, 0] if grey else image)[1].tobytes()

    return encode


CASES: dict[str, Encode] = {
    "jpeg 4:2:0": _pillow("JPEG", quality=90, subsampling="4:2:0"),
    "jpeg 4:4:4": _pillow("JPEG", quality=90, subsampling="4:4:4"),
    "jpeg 4:2:2 progressive": _pillow("JPEG", quality=90, subsampling="4:2:2",
                                      progressive=True),
    "jpeg greyscale": _pillow("JPEG", "L"),
    "jpeg turned (EXIF 6)": _pillow("JPEG", orientation=6),
    "jpeg mirrored (EXIF 2)": _pillow("JPEG", orientation=2),
    "jpeg upside down (EXIF 3)": _pillow("JPEG", orientation=3),
    "png": _pillow("PNG"),
    "png with alpha": _pillow("PNG", "RGBA"),
    "png greyscale": _pillow("PNG", "L"),
    "png greyscale with alpha": _pillow("PNG", "LA"),
    "png palette": _pillow("PNG", "P"),
    "png palette with transparency": _pillow("PNG", "P", transparency=0),
    "png 1 bit": _pillow("PNG", "1"),
    "png 16 bit": _png_16_bit(grey=False),
    "png 16 bit greyscale": _png_16_bit(grey=True),
    "webp": _pillow("WEBP", quality=80),
    "webp lossless": _pillow("WEBP", lossless=True),
    "bmp": _pillow("BMP"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_pixels_are_opencvs(tmp_path: Path, astronaut_bgr: np.ndarray, case: str) -> None:
    rgb = np.ascontiguousarray(astronaut_bgr[:, :400, ::-1])  # not square: a turn shows
    data = CASES[case](rgb)
    expected = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    path = tmp_path / "photo"
    path.write_bytes(data)
    for source in (data, path):
        image = decode_image(source, max_pixels=10**7, label="x", knob="k")
        assert image.dtype == np.uint8 and image.shape == expected.shape
        assert np.array_equal(image, expected), case
        assert image.flags.writeable


def test_a_cmyk_jpeg_is_within_one_level_of_opencv(astronaut_bgr: np.ndarray) -> None:
    data = _pillow("JPEG", "CMYK")(np.ascontiguousarray(astronaut_bgr[:, :, ::-1]))
    expected = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    image = decode_image(data, max_pixels=10**7, label="x", knob="k")
    assert image.shape == expected.shape
    assert np.abs(image.astype(int) - expected.astype(int)).max() <= 1


def test_an_image_over_the_limit_is_refused_before_decoding(astronaut_bgr: np.ndarray) -> None:
    data = _pillow("JPEG")(np.ascontiguousarray(astronaut_bgr[:, :, ::-1]))
    with pytest.raises(InputError, match="above k="):
        decode_image(data, max_pixels=512 * 512 - 1, label="x", knob="k")
