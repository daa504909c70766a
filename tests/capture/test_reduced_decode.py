"""Very large images decoded shrunk, without their full-size pixels in memory (issue 39,
item 14): the same pixels as a whole decode plus an area resize, and the memory of `livecam
run` / `identity add` on a 100 MP PNG measured from outside (peak RSS, as a user sees it)."""

from __future__ import annotations

import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
from PIL import Image

import livecam.capture.reduced as reduced
from livecam.capture.still import decode_image


def whole_then_area(path: Path, factor: int) -> np.ndarray:
    full = decode_image(path, max_pixels=10**8, label="x", knob="k")
    h, w = full.shape[:2]
    size = (w // factor, h // factor)
    return cv2.resize(full[:size[1] * factor, :size[0] * factor], size,
                      interpolation=cv2.INTER_AREA)


@pytest.fixture(scope="module")
def pngs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Every PNG pixel kind livecam reads: colour, with alpha, 16-bit grey, palette, grey with
    alpha, 1-bit; real photo content (skimage's astronaut) where colour matters."""
    from skimage import data

    folder = tmp_path_factory.mktemp("pngs")
    rng = np.random.default_rng(1)
    astronaut = np.ascontiguousarray(data.astronaut()[:301, :417])
    images = {
        "rgb": Image.fromarray(astronaut),
        "rgba": Image.fromarray(np.dstack([astronaut, astronaut[:, :, :1]])),
        "grey16": Image.fromarray(rng.integers(0, 65535, (123, 77)).astype(np.uint16)),
        "palette": Image.fromarray(astronaut).convert("P"),
        "la": Image.fromarray(rng.integers(0, 256, (211, 333, 2)).astype(np.uint8), "LA"),
        "bits": Image.fromarray(rng.integers(0, 2, (97, 203)).astype(bool)),
    }
    paths = []
    for name, image in images.items():
        paths.append(folder / f"{name}.png")
        image.save(paths[-1])
    return paths


@pytest.mark.parametrize("factor", [1, 2, 3])
def test_png_strips_give_the_pixels_of_a_whole_decode(pngs: list[Path], factor: int,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reduced, "_STRIP_BYTES", 3000)  # many strips, and a partial last one
    for path in pngs:
        got = reduced.decode_reduced(path, factor)
        assert got is not None, path
        np.testing.assert_array_equal(got, whole_then_area(path, factor), err_msg=str(path))


def test_a_big_jpeg_is_decoded_shrunk(tmp_path: Path) -> None:
    from skimage import data

    path = tmp_path / "big.jpg"
    image = cv2.resize(np.ascontiguousarray(data.astronaut()[:, :, ::-1]), (4800, 3200))
    cv2.imwrite(str(path), image, [cv2.IMWRITE_JPEG_QUALITY, 95])
    got = decode_image(path, max_pixels=10**8, label="x", knob="k", decode_pixels=1_000_000)
    assert got.shape == (3200 // 4, 4800 // 4, 3)  # factor 4: 1200 x 800
    expected = whole_then_area(path, 4)
    assert np.abs(got.astype(int) - expected).mean() < 2.0


def test_an_image_input_keeps_a_photo_whole_and_says_when_it_shrinks_one(
        tmp_path: Path, t1_bgr: np.ndarray, caplog: pytest.LogCaptureFixture) -> None:
    """``image:`` frames are at most 2048 x 2048 px (or the camera size asked, when larger):
    insightface's t1 (1280 x 886) stays whole; a 3000 x 2000 photo becomes 1500 x 1000, and
    the log says so."""
    import logging

    from livecam.capture import make_source, parse_input
    from livecam.config.schema import CaptureConfig

    def frame_of(path: Path, config: CaptureConfig) -> np.ndarray:
        source = make_source(parse_input(f"image:{path}"), config)
        source.open()
        try:
            frame = source.read()
            assert frame is not None
            return frame
        finally:
            source.close()

    cv2.imwrite(str(tmp_path / "t1.png"), t1_bgr)
    cv2.imwrite(str(tmp_path / "photo.png"), cv2.resize(t1_bgr, (3000, 2000)))
    with caplog.at_level(logging.INFO, logger="livecam.capture.sources"):
        np.testing.assert_array_equal(frame_of(tmp_path / "t1.png", CaptureConfig()), t1_bgr)
        assert "decoded at" not in caplog.text
        assert frame_of(tmp_path / "photo.png", CaptureConfig()).shape == (1000, 1500, 3)
        assert "is 3000x2000 (6 MP): decoded at 1500x1000" in caplog.text
    asked = CaptureConfig(width=3000, height=2000)
    assert frame_of(tmp_path / "photo.png", asked).shape == (2000, 3000, 3)


def peak_rss_mb(*args: str) -> float:
    from tests.helpers.peak_rss import peak_rss_mb as measure

    peak, code, err = measure(list(args))
    assert code == 0 and peak is not None, err[-2000:]
    return peak


def _write_big_png(path: Path, face: np.ndarray) -> None:
    """A 10000x10000 PNG (100 MP, under 8 MB: a flat colour) with ``face`` 2048 px across."""
    big = np.empty((10000, 10000, 3), np.uint8)
    big[:] = (60, 110, 170)
    big[4000:6048, 4000:6048] = cv2.resize(face, (2048, 2048))
    cv2.imwrite(str(path), big)


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="ru_maxrss is KiB on Linux")
def test_a_100_megapixel_png_costs_no_more_than_a_small_one(tmp_path: Path) -> None:
    # before: 1,075 MB (run) and 1,064 MB (identity add) with a 10000x10000 PNG
    from skimage import data

    face = np.ascontiguousarray(data.astronaut()[:, :, ::-1])
    _write_big_png(tmp_path / "big.png", face)
    cv2.imwrite(str(tmp_path / "small.png"), cv2.resize(face, (720, 720)))
    quiet = ["--output", "null", "--frames", "3", "--set", "control.api=false", "--set",
             "control.hotkeys=false"]
    for name in ("small", "big"):
        assert (tmp_path / f"{name}.png").stat().st_size < 8e6
    run = {n: peak_rss_mb("run", "--input", f"image:{tmp_path / n}.png", *quiet)
           for n in ("small", "big")}
    add = {n: peak_rss_mb("identity", "--set", f"identity.library_dir={tmp_path / n}", "add",
                          "astro", str(tmp_path / f"{n}.png"), "--force")
           for n in ("small", "big")}
    # the goal is 300 MB; the whole image's pixels alone are 286 MiB, so a big image
    # costing less than that over a small one was never decoded whole (before: about 950 more)
    for peaks in (run, add):
        assert peaks["big"] < 300 and peaks["big"] - peaks["small"] < 250, (run, add)


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="peak RSS is read from /proc")
def test_a_100_megapixel_png_swapped_costs_little_more_than_a_small_one(tmp_path: Path) -> None:
    """`run --input image:BIG --identity astro`, a face swapped in each frame: 428-476 MB
    before, about 200 MB over the same run on a 720x720 image (the decode's strips and its
    three copies of the result, the detector's RGB copy of each frame, and 3333 x 3333
    frames; 95 MB over it with the decode and detector mended, the frames still 3333 x 3333);
    the run says the size it decoded the image at. Against the small image's run in the same
    place, not against the issue's 300 MB (``scripts/bench_big_image.py`` measures that): the
    same run read 242 MB in one virtualenv and 274 in a freshly installed copy of it (the
    shared libraries' resident pages), which put a bound of 300 at the mercy of the install."""
    from skimage import data

    from tests.helpers.peak_rss import peak_rss_mb as measure

    face = np.ascontiguousarray(data.astronaut()[:, :, ::-1])
    _write_big_png(tmp_path / "big.png", face)
    cv2.imwrite(str(tmp_path / "small.png"), cv2.resize(face, (720, 720)))
    cv2.imwrite(str(tmp_path / "astronaut.png"), face)
    library = f"identity.library_dir={tmp_path / 'library'}"
    _, code, err = measure(["identity", "--set", library, "add", "astro",
                            str(tmp_path / "astronaut.png"), "--force"])
    assert code == 0, err[-2000:]
    peaks, logs = {}, {}
    for name in ("small", "big"):
        peak, code, err = measure(["run", "--input", f"image:{tmp_path / name}.png", "--output",
                                   "null", "--frames", "3", "--identity", "astro", "--set",
                                   library, "--set", "control.api=false", "--set",
                                   "control.hotkeys=false"])
        assert code == 0 and peak is not None, err[-2000:]
        assert "identity astro loaded" in err
        peaks[name], logs[name] = peak, err
    # measured: 25-37 MB more (2000 x 2000 frames)
    assert peaks["big"] - peaks["small"] < 60, peaks
    assert "is 10000x10000 (100 MP): decoded at 2000x2000" in logs["big"], logs["big"][-2000:]
