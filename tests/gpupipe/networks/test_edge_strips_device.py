"""The edge search's strip pictures built on the device from the frame already uploaded
(:meth:`StreamFaceNetworks.detect_strips`, :func:`livecam.analysis.edges.strip_places`)
against the host-built pictures each uploaded as a frame (the path before): the same pixels,
so the same detections, bit for bit. On torch's CPU device (CUDA is not available here; the
same torch calls run on CUDA on the stream's own CUDA stream, not run in this test).
"""

from __future__ import annotations

import numpy as np
import pytest

from livecam.analysis import edges
from livecam.gpupipe.networks.client import StreamFaceNetworks
from livecam.gpupipe.networks.shared import one_stream


@pytest.mark.parametrize("size_hw", [(720, 1280), (1080, 1920), (723, 1001), (480, 640),
                                     (1280, 720), (33, 47)])
def test_strip_places_are_the_host_pictures_pixel_for_pixel(size_hw: tuple[int, int]) -> None:
    rng = np.random.default_rng(1)
    image = rng.integers(0, 256, (*size_hw, 3), dtype=np.uint8)
    host = edges.edge_strips(image)
    places = edges.strip_places(*size_hw)
    assert len(places) == len(host) >= 4
    for strip, place in zip(host, places, strict=True):
        assert np.array_equal(image[np.ix_(place.rows, place.cols)], strip.image_bgr)
        assert np.array_equal(place.offset_xy, strip.offset_xy)
        assert place.repeated_below == strip.repeated_below


@pytest.fixture(scope="module")
def cut_left(t1_bgr: np.ndarray) -> np.ndarray:
    """insightface's t1 cut to 960x720 so that its leftmost face is cut by the left edge
    (about half of it in view: the old path's strips find it there, score 0.54)."""
    return np.ascontiguousarray(t1_bgr[83:803, 126:1086])


def _same(a: object, b: object) -> None:
    """The same detections, to float32's last bits: a picture detected in a batch of its own
    and in a batch with others sums its convolutions in another order on the CPU (oneDNN
    blocks by batch and thread count: a clean-clone CI run differed by 4e-6 px)."""
    for name, atol in (("boxes_xyxy", 1e-3), ("scores", 1e-5), ("keypoints_xy", 1e-3)):
        got, expected = getattr(a, name), getattr(b, name)
        assert got.shape == expected.shape, name
        np.testing.assert_allclose(got, expected, rtol=0, atol=atol, err_msg=name)


@pytest.mark.slow  # the detector compiled for two picture sizes on this CPU
@pytest.mark.parametrize("device", [
    "cpu",
    pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
        "not __import__('torch').cuda.is_available()", reason="CUDA is not available")]),
])
def test_strips_on_the_device_find_what_the_uploaded_pictures_find(
        cut_left: np.ndarray, device: str) -> None:
    """On CUDA the pictures are built on the stream's CUDA stream and detected by the plain
    detector's graphs (the GPU tests run this case on CUDA)."""
    nets = one_stream(device=device, detector_model="full", min_score=0.5, keep_frames=2)
    nets.open()
    frame = cut_left.copy()
    whole = nets.detect(frame)
    old = [(nets.detect(s.image_bgr), s.offset_xy) for s in edges.edge_strips(frame)]

    uploads = 0
    new_frame = nets.new_frame

    def counted(image: np.ndarray) -> None:
        nonlocal uploads
        uploads += 1
        new_frame(image)

    nets.new_frame = counted  # type: ignore[method-assign]
    frame2 = cut_left.copy()
    again = nets.detect(frame2)
    new = edges.StripSearch(nets).find(frame2)
    assert uploads == 1  # the frame only: the pictures are built from it on the device
    _same(whole, again)
    assert len(new) == len(old)
    for (a, by_a), (b, by_b) in zip(old, new, strict=True):
        _same(a, b)
        assert np.array_equal(by_a, by_b)
    hits = edges.edge_hits(new, frame2, 0.5)
    assert any(box[0] < 0 < box[2] for box, _, _ in hits)  # the face cut by the left edge
    assert hits and len(hits) == len(edges.edge_hits(old, frame, 0.5))
    # the frame stays the latest upload: its detections and the copy kept for the swap
    _same(nets.detect(frame2), whole)
    kept = nets.device_frame(frame2)
    assert kept is not None
    if kept[1] is not None:
        kept[1].synchronize()
    assert np.array_equal(kept[0].cpu().numpy(), frame2)
    assert uploads == 1


def test_a_square_frame_leaves_the_pictures_to_the_host(t1_bgr: np.ndarray) -> None:
    """A square frame's strips are pictures of its own size: they are built on the host (the
    device's would take the frame's own place)."""
    nets: StreamFaceNetworks = one_stream(device="cpu", detector_model="full", min_score=0.5)
    square = np.ascontiguousarray(t1_bgr[:64, :64])
    assert nets.detect_strips(square, edges.strip_places(64, 64)) is None


@pytest.mark.slow  # the detector compiled for the frame's and the picture's sizes on this CPU
def test_a_second_look_is_built_on_the_device_and_its_indices_are_not_kept(
        cut_left: np.ndarray) -> None:
    """A bottom edge hit's second look (:func:`second_look_places`, a picture about the hit
    that changes from hit to hit) is built from the frame on the device like the strips and
    finds what the host-built picture finds; its indices are not kept (kept, one pair would
    pile up for each place a hit was ever found), the strips' are."""
    from livecam.analysis.second_look import second_look_places

    nets = one_stream(device="cpu", detector_model="full", min_score=0.3)
    nets.open()
    frame = cut_left.copy()
    nets.detect(frame)
    kept_before = len(nets._strip_index)
    for box in ([300.0, 600.0, 420.0, 720.0], [10.0, 250.0, 210.0, 450.0]):
        for place, _ in second_look_places(box, *frame.shape[:2]):
            on_device = nets.detect_strips(frame, [place])
            assert on_device is not None
            host = nets.detect(np.ascontiguousarray(frame[np.ix_(place.rows, place.cols)]))
            _same(on_device[0], host)
            nets.detect(frame)  # the frame again the latest upload
    assert len(nets._strip_index) == kept_before
    nets.detect_strips(frame, edges.strip_places(*frame.shape[:2]))
    assert len(nets._strip_index) > kept_before


def test_strip_pictures_run_the_plain_detector_and_no_mesh(cut_left: np.ndarray) -> None:
    """The strips' pictures have sizes of their own. Each got a stack like a frame's: its
    mesh and detector graphs captured, and the compiled detector called (so compiled) for the
    size. Pictures run the plain detector (a compiled network's ``module``) and make no
    mesh."""
    nets = one_stream(device="cpu", detector_model="full", min_score=0.5)
    nets.open()
    shared = nets.shared
    sizes_called: list[tuple[int, ...]] = []

    class Compiled:  # stands for CompiledNetwork: called, it would compile for a new shape
        def __init__(self, module: object) -> None:
            self.module = module

        def __call__(self, frames: object, *args: object) -> object:
            sizes_called.append(tuple(frames.shape[1:3]))  # type: ignore[attr-defined]
            return self.module(frames, *args)  # type: ignore[operator]

    shared._detectors = [Compiled(d) for d in shared._detectors]
    frame = cut_left.copy()
    nets.prepare(frame.shape[1], frame.shape[0])
    nets.detect(frame)
    places = edges.strip_places(*frame.shape[:2])
    found = nets.detect_strips(frame, places)
    assert found is not None and len(found) == len(places)
    assert set(sizes_called) == {frame.shape[:2]}  # the frame's size only
    for size in {(len(p.rows), len(p.cols)) for p in places}:
        assert not shared._picture_stacks[size].mesh
        # a frame of a picture's size still gets a frame's stack, with the mesh
        assert shared.stack(*size).mesh


def test_the_analysis_stage_prepares_the_edge_pictures_before_the_first_frame(
        cut_left: np.ndarray) -> None:
    """On an H100 a 1080p stream sent no frame: its first frame made the strips' picture
    stack on the stream's thread, and that thread's first calls of the detector took 12 s
    (cuDNN sets each convolution up anew for each thread). The stage's ``prepare`` (before
    the output starts, on the thread that made the frames' graphs) makes the stacks of the
    strips' and a second look's pictures, and the frames then make none. Each strip then took
    a batch of its own, a wait for the GPU each: a frame's strips now go in one."""
    from livecam.analysis import build_follower
    from livecam.analysis.second_look import SECOND_LOOK_PX
    from livecam.analysis.stage import AnalysisStage
    from livecam.config import load_config
    from livecam.core.types import Frame, Packet, RuntimeState

    analysis = load_config(None).analysis
    assert analysis.edge_search
    nets = one_stream(device="cpu", detector_model="full", min_score=0.5)
    shared = nets.shared
    made: list[tuple[int, int]] = []
    capture = shared._capture

    def counted(height_px: int, width_px: int, **kw: bool) -> object:
        made.append((height_px, width_px))
        return capture(height_px, width_px, **kw)

    shared._capture = counted  # type: ignore[method-assign]
    frame = cut_left.copy()
    h, w = frame.shape[:2]
    with AnalysisStage(build_follower(analysis, networks=nets)) as stage:
        stage.prepare(w, h)
        strips = edges.strip_places(h, w)
        pictures = {(len(p.rows), len(p.cols)) for p in strips}
        assert set(shared._picture_stacks) == pictures | {(SECOND_LOOK_PX, SECOND_LOOK_PX)}
        (size,) = pictures
        # a place for each strip: a frame's strips are detected in one call
        assert shared._picture_stacks[size].per_stream == len(strips) == 8
        # one batch size: a frame's strips (each new size costs seconds of cuDNN set-up)
        assert set(shared._picture_stacks[size].detect) == {8}
        before = list(made)
        shared.batcher.sizes.clear()
        for i in range(3):
            stage.process(Packet.from_frame(Frame(i, i * 33_000_000, frame), RuntimeState()))
        assert made == before  # no stack made on the stream's frames
        # the first frame's strips in one batch, with the frame's own detection; the still
        # frame's strips after it are not searched again but the one whose turn it is
        # (padded to the captured batch of 8), with its frame's call
        sizes = list(shared.batcher.sizes)
        assert sizes[0] == 1 + len(strips) and max(sizes[1:]) <= 2, sizes
        assert set(shared._picture_stacks[size].detect) == {8}


def test_a_pictures_stack_batches_the_streams_started_not_every_place_it_holds() -> None:
    """The stacks hold a place for every stream the process may run
    (``advanced.pipeline.max_streams``); the pictures' detector graphs were captured for
    batches of all of them (a lone 1080p stream: up to 512 pictures, 5.6 GB more on an
    H100). They are captured for the streams started with."""
    from livecam.gpupipe.networks.shared import SharedFaceNetworks

    shared = SharedFaceNetworks(n_streams=1, stack_frames=4, device="cpu",
                                detector_model="full", min_score=0.5)
    nets = shared.slot_for(0)
    nets.open()
    try:
        nets.prepare_pictures({(96, 96): 8})
        stack = shared._picture_stacks[(96, 96)]
        assert len(stack.frames) == 4 * 8  # every place the stack holds
        assert set(stack.detect) == {8}  # one stream's pictures a call
        assert set(shared.stack(96, 160).detect) == {1, 2, 4}  # frames: every place
    finally:
        nets.close()


def test_the_strips_go_with_the_frames_own_call_in_one_round_trip(
        cut_left: np.ndarray) -> None:
    """With 16 streams a frame's analysis waited on each round trip through the streams'
    batcher (the edge search's own was one a frame, 20 fps a stream without it against 7
    with it on an H200). The strips due are now asked before the frame's first call
    (:meth:`StripSearch.ahead`) and go with it: one batch for the frame's detection and its
    strips, finding what the strips' own batch found."""
    nets = one_stream(device="cpu", detector_model="full", min_score=0.5)
    nets.open()
    batches = nets.shared.batcher.sizes
    frame = cut_left.copy()
    nets.detect(frame)
    apart = edges.StripSearch(nets).find(frame)  # the strips in a batch of their own

    frame2 = cut_left.copy()
    search = edges.StripSearch(nets)
    before = len(batches)
    search.ahead(frame2)
    whole = nets.detect(frame2)
    together = search.find(frame2)
    assert len(batches) - before == 1
    assert batches[-1] == 1 + len(edges.strip_places(*frame2.shape[:2]))
    assert len(whole) and len(together) == len(apart)
    for (a, by_a), (b, by_b) in zip(apart, together, strict=True):
        _same(a, b)
        assert np.array_equal(by_a, by_b)
    # a frame whose first call came before nothing was asked: the strips' own batch
    frame3 = cut_left.copy()
    nets.detect(frame3)
    before = len(batches)
    edges.StripSearch(nets).find(frame3)
    assert len(batches) - before == 1
