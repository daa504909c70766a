"""The neural swap with several frames in flight (RemoteSwapStage), on a real photo and the
stand-in inswapper run by onnxruntime, behind a request engine whose answers the test holds
and releases in any order: the seam TritonEngine implements (the real server is exercised in
tests/engines/test_triton_run.py; here the order of answers is the test's to choose)."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path

import numpy as np
import pytest

from livecam.core.errors import EngineUnavailableError
from livecam.core.stage import AsyncStage
from livecam.core.types import Frame, Packet, RuntimeState
from livecam.engines.onnxruntime_engine import OnnxRuntimeEngine
from livecam.pipeline.chain import split_tail
from livecam.swap.inswapper import InswapperModel
from livecam.swap.neural import NeuralSwapStage
from livecam.swap.neural_remote import RemoteSwapStage
from tests.helpers.standins import build_inswapper

Feeds = Mapping[str, np.ndarray]


class HeldEngine:
    """Runs the model at once but answers only when the test says (``answer``/``fail``)."""

    backend = "held"

    def __init__(self, inner: OnnxRuntimeEngine) -> None:
        self.inner = inner
        self.requests: list[tuple[dict[str, np.ndarray], Future[dict[str, np.ndarray]]]] = []

    @property
    def inputs(self):  # type: ignore[no-untyped-def]
        return self.inner.inputs

    @property
    def outputs(self):  # type: ignore[no-untyped-def]
        return self.inner.outputs

    def open(self) -> None:
        self.inner.open()

    def close(self) -> None:
        self.inner.close()

    def run(self, feeds: Feeds) -> dict[str, np.ndarray]:
        return self.inner.run(feeds)

    def submit(self, feeds: Feeds) -> Future[dict[str, np.ndarray]]:
        future: Future[dict[str, np.ndarray]] = Future()
        self.requests.append(({k: v.copy() for k, v in feeds.items()}, future))
        return future

    def result(self, future: Future[dict[str, np.ndarray]], *, sent_ns: int,
               wait_s: float) -> dict[str, np.ndarray] | None:
        try:
            return future.result(timeout=wait_s)
        except FutureTimeout:
            return None

    def answer(self, k: int) -> None:
        feeds, future = self.requests[k]
        future.set_result(self.inner.run(feeds))

    def fail(self, k: int) -> None:
        self.requests[k][1].set_exception(EngineUnavailableError("the server went away (test)"))


@pytest.fixture(scope="module")
def packets(astronaut_bgr: np.ndarray) -> list[Packet]:
    """Four frames of the astronaut, each for another identity (so each swap differs)."""
    from livecam.analysis.photo import analyze_photo

    faces = analyze_photo(astronaut_bgr).with_fields(track_ids=np.array([7], np.int64))
    return [Packet(frame=Frame(k, 0, astronaut_bgr), image_bgr=astronaut_bgr, faces=faces,
                   state=RuntimeState(active_identity=f"person{k}")) for k in range(4)]


def embedding(name: str) -> np.ndarray:
    seed = int(name.removeprefix("person"))
    return np.random.default_rng(seed).standard_normal(512).astype(np.float32)


def test_answers_in_any_order_come_out_in_submit_order_as_the_synchronous_swap(
        tmp_path: Path, packets: list[Packet]) -> None:
    from tests.helpers.leak_judge import LEAK_RESIDUAL, residual

    model_path = build_inswapper(tmp_path / "inswapper_128.onnx")
    held = HeldEngine(OnnxRuntimeEngine(model_path, device="cpu"))
    remote = RemoteSwapStage(NeuralSwapStage(InswapperModel(held, model_path), embedding),
                             capacity=3)
    local = NeuralSwapStage(InswapperModel(OnnxRuntimeEngine(model_path, device="cpu"),
                                           model_path), embedding)
    assert isinstance(remote, AsyncStage) and split_tail([remote])[1] is remote
    with remote, local:
        want = [local.process(p).image_bgr for p in packets[:3]]
        for packet in packets[:3]:
            remote.submit(packet)  # all three sent, none answered yet
        assert len(held.requests) == 3
        held.answer(2)
        held.answer(1)
        assert remote.collect(0.05) is None  # frame 0 is not back: nothing may overtake it
        held.answer(0)
        got = [remote.collect(1.0) for _ in range(3)]
        assert [p.frame.index if p else None for p in got] == [0, 1, 2]
        for out, expected in zip(got, want, strict=True):
            assert out is not None and np.array_equal(out.image_bgr, expected)
        assert not np.array_equal(want[0], want[1])  # the identities do differ
        # a request that fails: that frame's face is covered, never sent as it is
        remote.submit(packets[3])
        held.fail(3)
        out = remote.collect(1.0)
    assert out is not None and out.frame.index == 3
    r = residual(packets[3].image_bgr, out.image_bgr, packets[3].faces.boxes_xyxy[0])
    assert r is not None and r > LEAK_RESIDUAL


def test_a_local_engine_cannot_be_driven_with_frames_in_flight(tmp_path: Path) -> None:
    model_path = build_inswapper(tmp_path / "inswapper_128.onnx")
    stage = NeuralSwapStage(InswapperModel(OnnxRuntimeEngine(model_path, device="cpu"),
                                           model_path), embedding)
    with pytest.raises(TypeError, match="one request at a time"):
        RemoteSwapStage(stage, capacity=3)


def test_a_frame_whose_work_raised_counts_as_collected(tmp_path: Path,
                                                       packets: list[Packet]) -> None:
    """The runtime turns a ``collect`` that raises into that frame's fallback and moves on:
    the stage must move on too (before: the next collect raised the same frame's error)."""
    model_path = build_inswapper(tmp_path / "inswapper_128.onnx")
    held = HeldEngine(OnnxRuntimeEngine(model_path, device="cpu"))
    remote = RemoteSwapStage(NeuralSwapStage(InswapperModel(held, model_path), embedding),
                             capacity=3)
    with remote:
        remote.submit(packets[0])
        remote.submit(packets[1])
        held.requests[0][1].set_exception(RuntimeError("a reply nobody could read (test)"))
        held.answer(1)
        with pytest.raises(RuntimeError, match="nobody could read"):
            remote.collect(1.0)
        out = remote.collect(1.0)
    assert out is not None and out.frame.index == 1
