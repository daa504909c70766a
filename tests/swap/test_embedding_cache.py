"""The neural swap's embedding cache on disk is only a cache (issue 39, item 4): an empty or
damaged entry is computed again and replaced, a folder that cannot be written (read-only, a
full disk) is said once and the run goes on from memory, and nothing half-written is left.

Real parts: the identity library's astronaut photo (MediaPipe), a stand-in ArcFace ONNX model
(no recognizer weights ship in any package) run by onnxruntime, a real full/read-only tmpfs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np
import pytest

from livecam.swap.arcface import IdentityEmbeddings
from tests.disk_faults import full_folder, read_only_folder

RECOGNIZER = "ab" * 32


@pytest.fixture(scope="module")
def make_embeddings(tmp_path_factory: pytest.TempPathFactory
                    ) -> Callable[[Path], IdentityEmbeddings]:
    from skimage import data

    from livecam.analysis.landmarks import five_point
    from livecam.engines.onnxruntime_engine import OnnxRuntimeEngine
    from livecam.identity import IdentityLibrary
    from livecam.swap.arcface import ArcFaceEmbedder
    from tests.helpers.standins import build_arcface

    root = tmp_path_factory.mktemp("embeddings")
    photo = root / "astronaut.png"
    astronaut = np.ascontiguousarray(data.astronaut()[:, :, ::-1])
    cv2.imwrite(str(photo), cv2.resize(astronaut, None, fx=2, fy=2))
    library = IdentityLibrary(root / "lib")
    library.add("astro", [photo])
    embedder = ArcFaceEmbedder(OnnxRuntimeEngine(build_arcface(root / "arcface.onnx"),
                                                 device="cpu"))
    embedder.open()

    def make(cache_dir: Path) -> IdentityEmbeddings:  # a new run: nothing in memory yet
        return IdentityEmbeddings(embedder, library.load, five_point, recognizer_id=RECOGNIZER,
                                  cache_dir=cache_dir)

    return make


def entries(cache_dir: Path) -> list[Path]:
    folder = cache_dir / RECOGNIZER[:16]
    return sorted(folder.iterdir()) if folder.is_dir() else []


@pytest.mark.parametrize("damage", [b"", b"\x93NUMPY garbage", b"x" * 300])
def test_a_damaged_entry_is_computed_again_and_replaced(
        tmp_path: Path, make_embeddings: Callable[[Path], IdentityEmbeddings],
        damage: bytes) -> None:
    # before: np.load raised on the 0-byte entry a full disk left, on every frame, for good
    first = make_embeddings(tmp_path)("astro")
    assert first is not None
    [entry] = entries(tmp_path)
    entry.write_bytes(damage)
    again = make_embeddings(tmp_path)("astro")
    assert again is not None
    np.testing.assert_allclose(again, first, atol=1e-6)
    assert entries(tmp_path) == [entry] and entry.stat().st_size > len(damage)
    np.testing.assert_allclose(np.load(entry), np.load(entry))  # a whole .npy again


@pytest.mark.parametrize("fault", ["read-only", "full"])
def test_an_unwritable_cache_warns_once_and_runs_from_memory(
        tmp_path: Path, make_embeddings: Callable[[Path], IdentityEmbeddings],
        caplog: pytest.LogCaptureFixture, fault: str) -> None:
    # before: the OSError (or a half-written entry) failed every frame's swap
    reference = make_embeddings(tmp_path / "ok")("astro")
    broken = read_only_folder if fault == "read-only" else full_folder
    with broken(tmp_path / "cache") as folder, caplog.at_level(logging.WARNING):
        embeddings = make_embeddings(folder)
        for _ in range(3):
            got = embeddings("astro")
            assert got is not None
            np.testing.assert_allclose(got, reference, atol=1e-6)
            embeddings._memory.clear()  # each call goes to the cache again
        said = [r for r in caplog.records if "embedding cache" in r.getMessage()]
        assert len(said) == 1 and "memory" in said[0].getMessage()
        assert entries(folder) == []  # nothing half-written, no temp file
