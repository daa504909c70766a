"""Frames copied by the capture thread into the host memory a stage uploads from (``host_frames``
of :class:`~livecam.core.stage.HostFrames`; on CUDA, page-locked memory:
``advanced.gpu.pinned_capture``).

The real copy needs CUDA's page-locked memory, which this machine cannot have: the run test
gives its stage a copy of its own through the same seam (``host_frames``) and checks that every
frame the pipeline sees went through it. The page-locked path itself is tested on the H200
(``tests/gpupipe/networks/test_pinned_frames.py``); here, what it does where there is no CUDA."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from livecam.app import App, gpu_sections
from livecam.capture.sources import SyntheticSource
from livecam.config import load_config
from livecam.core.stage import StageBase, host_frames_of
from livecam.core.types import ImageBGR, Packet
from livecam.gpupipe.networks import host
from livecam.output.sinks import NullSink


class Uploading(StageBase):
    """A stage with a ``host_frames`` copy of its own (its copies remembered by id), which
    records the frames it is given."""

    name = "uploading"

    def __init__(self) -> None:
        self.copies: dict[int, tuple[ImageBGR, ImageBGR]] = {}  # id(copy) -> (source, copy)
        self.copied_on: set[str] = set()
        self.seen: list[ImageBGR] = []

    def _copy(self, image: ImageBGR) -> ImageBGR:
        out = image.copy()
        out.flags.writeable = False
        self.copies[id(out)] = (image, out)
        self.copied_on.add(threading.current_thread().name)
        return out

    @property
    def host_frames(self) -> object:
        return self._copy

    def process(self, packet: Packet) -> Packet:
        self.seen.append(packet.image_bgr)
        return packet


def test_every_frame_reaches_the_stages_as_the_host_frames_copy_made_on_capture() -> None:
    stage = Uploading()
    app = App(load_config(None, ["advanced.pipeline.status_interval_s=0",
                                 "advanced.pipeline.realtime=false"]),
              source=SyntheticSource(width=64, height=48, fps=60.0), sink=NullSink(),
              stages=[stage], max_frames=12)
    app.run()
    assert app.metrics.counter("sent") == 12
    assert len(stage.seen) >= 12
    for image in stage.seen:
        source, copy = stage.copies[id(image)]
        assert copy is image and source is not image
        assert np.array_equal(source, image)
    assert stage.copied_on == {"livecam-capture"}


def test_a_still_image_is_copied_once_and_the_stages_see_one_array(tmp_path: Path) -> None:
    """``image:`` hands the same read-only array every frame: the capture copies it once, so
    the stages see one array, as without the copy (the GPU's face networks upload and search
    an array they have seen only once)."""
    import cv2

    from livecam.capture.sources import ImageSource

    path = tmp_path / "still.png"
    cv2.imwrite(str(path), np.full((48, 64, 3), 120, np.uint8))
    stage = Uploading()
    app = App(load_config(None, ["advanced.pipeline.status_interval_s=0",
                                 "advanced.pipeline.realtime=false"]),
              source=ImageSource(path=path, fps=60.0, max_pixels=10**6), sink=NullSink(),
              stages=[stage], max_frames=6)
    app.run()
    assert app.metrics.counter("sent") == 6 and len(stage.seen) >= 6
    assert len(stage.copies) == 1
    ((source, copy),) = stage.copies.values()
    assert all(image is copy for image in stage.seen)
    assert np.array_equal(copy, source)


def test_without_a_stage_that_asks_frames_go_as_the_source_gives_them() -> None:
    class Plain(StageBase):
        name = "plain"

    assert host_frames_of([Plain(), Plain()]) is None
    stage = Uploading()
    assert host_frames_of([Plain(), stage]) == stage._copy


def test_the_cpu_pipeline_asks_for_no_pinned_frames(tmp_path: Path) -> None:
    """``advanced.gpu.pinned_capture`` is on by default, and ``advanced.gpu.pipeline=always`` on a
    machine without CUDA (the CPU's face networks): no stage asks, so no capture tries to pin."""
    from livecam.app import SharedStages
    from livecam.gpupipe.factory import build_gpu_stages
    from tests.gpupipe.test_stage import _NoIdentities

    config = load_config(None, ["swap.mode=neural", f"advanced.models.dir={tmp_path}",
                                "advanced.engine.device=cpu", "advanced.gpu.pipeline=always"])
    assert config.gpu.pinned_capture
    stages = build_gpu_stages(gpu_sections(config), identities=_NoIdentities(),
                              shared=SharedStages())
    assert stages[0].name == "analysis"
    assert host_frames_of(stages) is None


@pytest.mark.parametrize("streams", [1, 2])
def test_on_cuda_the_analysis_stage_asks_for_pinned_frames_unless_turned_off(
        tmp_path: Path, streams: int) -> None:
    """The stages ``livecam run`` builds for a CUDA device (built, not opened: nothing here
    touches CUDA) offer :func:`pinned_copy` for the capture thread, for a stream of its own
    and for a stream of several (the shared networks); ``advanced.gpu.pinned_capture=false`` offers
    none."""
    from livecam.app import SharedStages
    from livecam.gpupipe.factory import build_gpu_stages
    from tests.gpupipe.test_stage import _NoIdentities

    def offered(*extra: str) -> object:
        config = load_config(None, ["swap.mode=neural", f"advanced.models.dir={tmp_path}",
                                    "advanced.engine.device=cuda", "advanced.gpu.pipeline=always",
                                    *extra])
        stages = build_gpu_stages(gpu_sections(config), identities=_NoIdentities(),
                                  shared=SharedStages(streams), stream=streams - 1)
        return host_frames_of(stages)

    assert offered() is host.pinned_copy
    assert offered("advanced.gpu.pinned_capture=false") is None


def test_pinned_tensor_is_only_the_whole_block_of_a_pinned_copy() -> None:
    frame = np.arange(6 * 8 * 3, dtype=np.uint8).reshape(6, 8, 3)
    assert host.pinned_tensor(frame) is None  # numpy's own memory
    unpinned = torch.zeros((6, 8, 3), dtype=torch.uint8).numpy()
    assert host.pinned_tensor(unpinned) is None  # torch's, not page-locked
    assert host.pinned_tensor(unpinned[:3]) is None
    assert host.pinned_tensor(unpinned[:, ::-1]) is None


def test_where_frames_cannot_be_pinned_they_go_as_they_are_with_one_warning(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """torch refuses page-locked memory: here, where there is no CUDA, it really does; on a
    CUDA machine the refusal of a machine with none left is made through ``torch.empty``."""
    monkeypatch.setattr(host, "_failed", threading.Event())
    if torch.cuda.is_available():
        empty = torch.empty

        def no_pinned_memory_left(*args: object, **kwargs: object) -> torch.Tensor:
            if kwargs.get("pin_memory"):
                raise RuntimeError("CUDA error: out of memory (pinned)")
            return empty(*args, **kwargs)  # type: ignore[call-overload]

        monkeypatch.setattr(torch, "empty", no_pinned_memory_left)
    frame = np.zeros((6, 8, 3), np.uint8)
    with caplog.at_level(logging.WARNING, logger="livecam.gpupipe.networks.host"):
        assert host.pinned_copy(frame) is frame
        assert host.pinned_copy(frame) is frame
        assert host.pinned_copy.empty((6, 8, 3)) is None  # a camera decodes as before
    warnings = [r for r in caplog.records if "page-locked" in r.getMessage()]
    assert len(warnings) == 1 and "advanced.gpu.pinned_capture=false" in warnings[0].getMessage()


class DecodingInto(Uploading):
    """An uploading stage whose host memory also gives empty blocks (``empty``) for a source
    to decode into, remembered by id."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks: dict[int, np.ndarray] = {}

    class _Frames:
        def __init__(self, stage: DecodingInto) -> None:
            self.stage = stage

        def __call__(self, image: ImageBGR) -> ImageBGR:
            return self.stage._copy(image)

        def empty(self, shape: tuple[int, ...]) -> np.ndarray:
            block = np.zeros(shape, np.uint8)
            self.stage.blocks[id(block)] = block
            return block

    @property
    def host_frames(self) -> object:
        return self._Frames(self)


class VideoCamera:
    """A camera as :class:`CameraSource` reads it, through a real ``cv2.VideoCapture`` of an
    MJPG video (OpenCV's own decoding into the array it is given), opened without V4L2."""

    def __new__(cls, path: Path) -> object:
        import cv2

        from livecam.capture.sources import CameraSource

        source = CameraSource(device=str(path), width=64, height=48, fps=60.0)
        source.open = lambda: setattr(  # type: ignore[method-assign]
            source, "_cap", cv2.VideoCapture(str(path)))
        source._size_px = (64, 48)
        source.live = False  # a file: read to its end, not reopened
        return source


def _mjpg(path: Path, frames: int, size_wh: tuple[int, int] = (64, 48)) -> Path:
    import cv2

    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"MJPG"), 30, size_wh)
    for k in range(frames):
        writer.write(np.full((size_wh[1], size_wh[0], 3), 20 * k, np.uint8))
    writer.release()
    return path


def test_a_camera_decodes_into_the_host_memory_and_nothing_is_copied(tmp_path: Path) -> None:
    """OpenCV decodes a camera's frame into the array it is given: the capture thread gives it
    a block of the stage's host memory (``empty``; on CUDA pinned memory), so the frame is
    not copied there afterwards (a full frame a frame: the copy and a new array)."""
    stage = DecodingInto()
    app = App(load_config(None, ["advanced.pipeline.status_interval_s=0",
                                 "advanced.pipeline.realtime=false"]),
              source=VideoCamera(_mjpg(tmp_path / "cam.avi", 8)), sink=NullSink(),
              stages=[stage], max_frames=6)
    app.run()
    assert app.metrics.counter("sent") == 6 and len(stage.seen) >= 6
    assert not stage.copies
    # the first six: the stage may see more before the run stops, and past the file's 8
    # frames the camera is opened again from its first (a clean-clone CI run saw a 9th)
    for k, image in enumerate(stage.seen[:6]):
        assert stage.blocks[id(image)] is image and not image.flags.writeable
        assert abs(float(image.mean()) - 20 * k) < 3  # the camera's frame k, decoded there


def test_a_frame_of_another_size_than_the_block_is_copied_into_the_host_memory(
        tmp_path: Path) -> None:
    """The camera gives another size than it said: OpenCV decodes into a new array, which
    the capture thread copies into the host memory as before."""
    stage = DecodingInto()
    camera = VideoCamera(_mjpg(tmp_path / "cam.avi", 8, (80, 48)))
    app = App(load_config(None, ["advanced.pipeline.status_interval_s=0",
                                 "advanced.pipeline.realtime=false"]),
              source=camera, sink=NullSink(), stages=[stage], max_frames=4)
    app.run()
    assert len(stage.seen) >= 4
    for image in stage.seen:
        source, copy = stage.copies[id(image)]
        assert copy is image and image.shape == (48, 80, 3) and id(source) not in stage.blocks
