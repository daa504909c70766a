"""One compiled call for every face count from two up
(:mod:`livecam.gpupipe.networks.dynamic_rows`):
what makes the swap's alignment and paste-back compile twice a paste window instead of once a
face bucket. Compiled for real on the CPU (Inductor's C++ backend) with a small module shaped
like the swap's parts: frames gathered by a per-face index, per-face rows, a window size."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from livecam.engines import compile_progress
from livecam.gpupipe.networks import compiled, precompiled
from livecam.gpupipe.networks.compiled import CompiledNetwork


class _PerFace(torch.nn.Module):
    """The swap parts' pattern: each face reads its frame by index and adds its own rows."""

    def forward(self, frames: torch.Tensor, index: torch.Tensor, rows: torch.Tensor,
                window: int) -> torch.Tensor:
        pixels = frames[index].float().mean(dim=(1, 2, 3))
        return pixels[:, None] + rows.sum(-1) * window


class _LoopsOverFaces(_PerFace):
    """Code that reads the count on the host: the compiled call cannot be dynamic."""

    def forward(self, frames: torch.Tensor, index: torch.Tensor, rows: torch.Tensor,
                window: int) -> torch.Tensor:
        return torch.stack([super(_LoopsOverFaces, self).forward(frames, index[i:i + 1],
                                                                 rows[i:i + 1], window)[0]
                            for i in range(int(index.shape[0]))])


FRAMES = torch.arange(4 * 8 * 8 * 3, dtype=torch.int64).remainder(251).to(
    torch.uint8).reshape(4, 8, 8, 3)


def _args(n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    index = torch.arange(n).remainder(4)
    rows = torch.arange(n * 5 * 2, dtype=torch.float32).reshape(n, 5, 2) / 7
    return FRAMES, index, rows, 640


class _Heard:
    """A :class:`~livecam.engines.compile_progress.CompileListener` that keeps what it hears."""

    def __init__(self) -> None:
        self.starts: list[tuple[str, tuple[object, ...]]] = []
        self.hows: list[str] = []

    def started(self, part: str, inputs: tuple[object, ...]) -> None:
        self.starts.append((part, inputs))

    def finished(self, part: str, inputs: tuple[object, ...], how: str,
                 took_s: float) -> None:
        self.hows.append(how)


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new process's view: nothing compiled or loaded in memory yet."""
    import torch._dynamo

    torch._dynamo.reset()
    monkeypatch.setattr(precompiled, "_LOADED", {})
    monkeypatch.setattr(compiled, "_KEPT", {})


def _a_later_start() -> None:
    """What a new process starts from: the engine cache on disk, nothing in memory."""
    torch._dynamo.reset()
    precompiled._LOADED.clear()
    compiled._KEPT.clear()


def _saved_whole(cache_dir: Path) -> list[Path]:
    """The calls saved whole in ``cache_dir``; fails on any a start could not save."""
    folder = cache_dir / precompiled.FOLDER
    assert not [p.read_text() for p in folder.glob("*.cannot")]
    return sorted(folder.glob("*.bin"))


@pytest.mark.slow
@pytest.mark.usefixtures("fresh")
def test_counts_from_two_up_compile_once_and_a_later_start_loads_that_one(
        tmp_path: Path) -> None:
    module = _PerFace()
    heard = _Heard()
    with compile_progress.listening(heard):
        net = CompiledNetwork(module, cache_dir=tmp_path, name="per-face part",
                              part="swap alignment", rows_args=(1, 2))
        for n in (1, 2, 4, 8, 3):
            torch.testing.assert_close(net(*_args(n)), module(*_args(n)))
    # one face on its own (static, as before), every other count one compile
    assert heard.starts == [("swap alignment", ((4, 8, 8, 3), 1, 640)),
                             ("swap alignment", ((4, 8, 8, 3), "2+", 640))]
    saved = sorted((tmp_path / precompiled.FOLDER).glob("*.bin"))
    if precompiled.available():
        assert len(saved) == 2
    # a later start: the dynamic call is loaded whole and takes a count it never saw
    torch._dynamo.reset()
    precompiled._LOADED.clear()
    later = _Heard()
    with compile_progress.listening(later):
        again = CompiledNetwork(_PerFace(), cache_dir=tmp_path, name="per-face part",
                                part="swap alignment", rows_args=(1, 2))
        torch.testing.assert_close(again(*_args(16)), module(*_args(16)))
        torch.testing.assert_close(again(*_args(2)), module(*_args(2)))
    assert later.hows == (["loaded"] if precompiled.available() else ["compiled"])


@pytest.mark.slow
@pytest.mark.usefixtures("fresh")
def test_code_that_needs_the_exact_count_still_runs_each_count_right(tmp_path: Path) -> None:
    """A part whose code reads the count cannot be dynamic: each count then compiles on its
    own (the guards of the call compiled for two refuse four), with the right result."""
    module = _LoopsOverFaces()
    net = CompiledNetwork(module, cache_dir=tmp_path, name="looping part", rows_args=(1, 2))
    for n in (2, 4, 2):
        torch.testing.assert_close(net(*_args(n)), module(*_args(n)))
    if precompiled.available():  # the saved call's guards refused four: compiled on its own
        assert net._static_rows == {4}


def test_counts_from_two_up_share_a_signature_and_the_callers_tensors_stay_unmarked() -> None:
    from livecam.gpupipe.networks import dynamic_rows

    sig = {dynamic_rows.rows_signature(_args(n), {}, (1, 2), compiled._signature)
           for n in (2, 4, 16)}
    assert len(sig) == 1
    assert len({compiled._signature(_args(n), {}) for n in (2, 4, 16)}) == 3
    assert not dynamic_rows.dynamic(_args(1), (1, 2)) and dynamic_rows.dynamic(_args(2), (1, 2))
    args = _args(4)
    marked = dynamic_rows.marked(args, (1, 2))
    assert marked[0] is args[0] and marked[3] == 640  # the frames and the window as they are
    for i in (1, 2):  # views of the same memory, marked; the caller's tensors are not
        assert marked[i] is not args[i] and marked[i].data_ptr() == args[i].data_ptr()
        assert hasattr(marked[i], "_dynamo_weak_dynamic_indices")
        assert not hasattr(args[i], "_dynamo_weak_dynamic_indices")


@pytest.mark.slow
@pytest.mark.usefixtures("fresh")
def test_the_face_mesh_compiled_once_for_two_regions_serves_four(
        tmp_path: Path, astronaut_bgr: object, caplog: pytest.LogCaptureFixture) -> None:
    """``advanced.gpu.compile_dynamic_batches`` on the face mesh (the real port, compiled on the
    CPU): 2 and 4 regions run one compiled call and find what the mesh as it is finds."""
    import logging

    import numpy as np

    from livecam.analysis.roi import Roi, roi_from_detection
    from livecam.gpupipe.networks.shared import one_stream

    frame = np.full((360, 640, 3), 90, np.uint8)
    frame[20:340, 160:480] = np.asarray(astronaut_bgr)[40:360, 100:420]
    plain = one_stream(device="cpu", detector_model="short", max_rois=4, detect_ahead=False)
    plain.open()
    faces = plain.detect(frame)
    roi = roi_from_detection(faces.boxes_xyxy[0], faces.keypoints_xy[0])
    rois = [Roi(roi.center_x_px + dx, roi.center_y_px, roi.size_px, roi.rotation_rad)
            for dx in (0.0, 1.5, -1.5, 3.0)]
    want = {n: plain.landmarks(frame, rois[:n]) for n in (2, 4)}
    plain.close()

    def landmarks(counts: tuple[int, ...]) -> dict[int, list[Any]]:
        nets = one_stream(device="cpu", detector_model="short", max_rois=4,
                          detect_ahead=False, compile_dir=tmp_path, dynamic_batches=True)
        nets.open()
        try:
            return {n: nets.landmarks(frame, rois[:n]) for n in counts}
        finally:
            nets.close()

    with caplog.at_level(logging.INFO, logger="livecam.gpupipe.networks.compiled"):
        got = landmarks((2, 4))
    for n in (2, 4):
        for g, w in zip(got[n], want[n], strict=True):
            assert g is not None and w is not None
            assert np.linalg.norm(g.landmarks_xy - w.landmarks_xy, axis=1).max() < 0.5
    compiled_lines = [r.getMessage() for r in caplog.records
                      if r.getMessage().startswith("compiled the face mesh")]
    assert len(compiled_lines) == 1, compiled_lines
    if not precompiled.available():
        return
    # a later start loads the mesh's call for any count whole (on the H200 the streams'
    # calls of the detector and mesh could not be saved, and each start traced them again)
    assert len(_saved_whole(tmp_path)) == 2  # the detector's frame, the mesh's regions
    _a_later_start()
    later = _Heard()
    with compile_progress.listening(later):
        again = landmarks((4,))
    assert later.hows == ["loaded", "loaded"], later.hows
    for g, w in zip(again[4], got[4], strict=True):
        assert g is not None and w is not None
        np.testing.assert_allclose(g.landmarks_xy, w.landmarks_xy, atol=1e-4)


@pytest.mark.slow
@pytest.mark.usefixtures("fresh")
def test_the_face_detector_compiled_once_for_two_frames_serves_four(
        tmp_path: Path, astronaut_bgr: object, caplog: pytest.LogCaptureFixture) -> None:
    """The streams' detector call (the real port, compiled on the CPU) for 2 and 4 frames of
    the stack: one compiled call, the same detections as the detector as it is."""
    import logging

    import numpy as np

    from livecam.gpupipe.networks.calls import load_detectors, run_detectors

    frame = np.full((360, 640, 3), 90, np.uint8)
    frame[20:340, 160:480] = np.asarray(astronaut_bgr)[40:360, 100:420]
    stack = torch.from_numpy(np.stack([frame, frame[:, ::-1], frame, frame[:, ::-1]]).copy())

    def detect(compile_dir: Path | None) -> dict[int, list[torch.Tensor]]:
        (detector,) = load_detectors("short", models_dir=None, min_score=0.5,
                                     device=torch.device("cpu"), dtype=torch.float32,
                                     compile_dir=compile_dir, dynamic_batches=True)
        out: dict[int, list[torch.Tensor]] = {}
        with torch.inference_mode():
            for n in (2, 4):
                index = torch.tensor([3, 0, 1, 2][:n])
                first = detector(stack, None, index)
                outs = [t.clone() for t in first]
                run_detectors([detector], stack, outs, index)
                out[n] = outs
        return out

    want = detect(None)
    with caplog.at_level(logging.INFO, logger="livecam.gpupipe.networks.compiled"):
        got = detect(tmp_path)
    for n in (2, 4):
        boxes, _, scores, valid = got[n]
        assert torch.equal(valid, want[n][3]) and bool(valid.any())
        torch.testing.assert_close(boxes[valid], want[n][0][valid], atol=0.5, rtol=0)
        torch.testing.assert_close(scores[valid], want[n][2][valid], atol=1e-3, rtol=0)
    compiled_lines = [r.getMessage() for r in caplog.records
                      if r.getMessage().startswith("compiled the face detector")]
    assert len(compiled_lines) == 1, compiled_lines
    if not precompiled.available():
        return
    # a later start loads the streams' detector call whole
    assert len(_saved_whole(tmp_path)) == 1
    _a_later_start()
    later = _Heard()
    with compile_progress.listening(later):
        again = detect(tmp_path)
    assert later.hows == ["loaded"], later.hows
    for n in (2, 4):
        for a, g in zip(again[n], got[n], strict=True):
            torch.testing.assert_close(a, g, atol=1e-4, rtol=0)
