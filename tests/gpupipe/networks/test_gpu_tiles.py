"""The GPU tile search (:class:`GpuTileSearch`) against the CPU tile search, on real photos: the
same tiles, the same small faces, and in live mode no worker thread. Run on the CPU here (the
same torch code as on CUDA, eager); the CUDA graph replay is checked in test_gpu_cuda.py.
"""

from __future__ import annotations

import gc

import cv2
import numpy as np
import pytest

from livecam.gpupipe.networks.shared import one_stream
from livecam.gpupipe.networks.tiles import GpuTileSearch
from livecam.track.bytetrack import iou_matrix


@pytest.fixture(scope="module")
def small_faces_bgr(t1_bgr: np.ndarray) -> np.ndarray:
    """insightface's t1 (six people) at half size in a 1600x900 frame: faces of ~50-70 px, too
    small for the whole-frame pass, found in tiles."""
    small = cv2.resize(t1_bgr, None, fx=0.5, fy=0.5, interpolation=cv2.INTER_AREA)
    frame = np.full((900, 1600, 3), 40, np.uint8)
    frame[300:300 + small.shape[0], 700:700 + small.shape[1]] = small
    return frame


#: the tracker's low threshold: the GPU pipeline's networks and the CPU search get it as their
#: floor (livecam.gpupipe.factory.follower_networks, livecam.analysis.build_follower)
FLOOR = 0.3


@pytest.fixture(scope="module")
def search() -> GpuTileSearch:
    nets = one_stream(device="cpu", detector_model="full", min_score=FLOOR, max_rois=2)
    tiles = GpuTileSearch(nets, tile_size_px=384)
    tiles.open()
    return tiles


@pytest.mark.slow  # the torch face networks on the CPU: over a minute on 2 cores
def test_every_tile_in_one_call_finds_the_faces_the_cpu_tiles_find(
        search: GpuTileSearch, small_faces_bgr: np.ndarray) -> None:
    """No more and no fewer: at the floor the whole-frame pass uses, the tiles found two
    false faces here (five in the H200 benchmark's frame), each covered on every frame."""
    from livecam.analysis.networks import cpu_tile_search

    cpu = cpu_tile_search(min_score=FLOOR, tile_size_px=384, tiles_per_call=2)
    with cpu:
        ref = cpu.search(small_faces_bgr, all_tiles=True)
    got = search.search(small_faces_bgr)  # every tile, without asking
    assert np.array_equal(got.searched_xyxy, ref.searched_xyxy)
    assert len(got.searched_xyxy) == len(cpu.tiles(1600, 900)) > 2
    whole = search.networks.detect(small_faces_bgr)
    assert len(ref.faces) == 6 and len(whole) < 6  # the tiles are what finds them all
    assert len(got.faces) == len(ref.faces)
    iou = iou_matrix(ref.faces.boxes_xyxy, got.faces.boxes_xyxy)
    for i, j in enumerate(iou.argmax(axis=1)):
        width = ref.faces.boxes_xyxy[i, 2] - ref.faces.boxes_xyxy[i, 0]
        assert iou[i, j] > 0.75
        assert np.abs(got.faces.keypoints_xy[j] - ref.faces.keypoints_xy[i]).max() < 0.1 * width


def test_a_frame_narrower_than_a_tile_is_letterboxed_as_on_the_cpu(
        search: GpuTileSearch, small_faces_bgr: np.ndarray) -> None:
    """A 1600x300 strip: its tiles are cut by the frame (1 row of 384x300 crops)."""
    from livecam.analysis.networks import cpu_tile_search

    strip = np.ascontiguousarray(small_faces_bgr[330:630])
    cpu = cpu_tile_search(min_score=FLOOR, tile_size_px=384, tiles_per_call=0)
    with cpu:
        ref = cpu.search(strip, all_tiles=True)
    got = search.search(strip)
    assert np.array_equal(got.searched_xyxy, ref.searched_xyxy)
    assert (got.searched_xyxy[:, 3] == 300).all()
    assert len(ref.faces) >= 3 and len(got.faces) == len(ref.faces)
    assert (iou_matrix(ref.faces.boxes_xyxy, got.faces.boxes_xyxy).max(axis=1) > 0.75).all()


@pytest.mark.slow  # the torch face networks on the CPU: over a minute on 2 cores
def test_live_mode_searches_on_the_followers_thread_and_finds_small_faces_at_once(
        small_faces_bgr: np.ndarray) -> None:
    """With the GPU tile search the live follower starts no search thread, and the frame a
    small face is searched on carries it (the CPU's worker hands it over frames later)."""
    from livecam.analysis import build_follower
    from livecam.config import load_config

    analysis = load_config(None).analysis
    nets = one_stream(device="cpu", detector_model="full", min_score=FLOOR,
                           max_rois=analysis.max_faces)
    follower = build_follower(analysis, realtime=True, networks=nets,
                              search=GpuTileSearch(nets, tile_size_px=384))
    assert follower.background is None
    follower.open()
    try:
        faces, withheld = follower.follow(small_faces_bgr, 0)
        assert len(faces) + len(withheld) == 6
        # a frame later, where the first frame's search is not due again, nobody is lost
        faces, withheld = follower.follow(small_faces_bgr, 1)
        assert len(faces) + len(withheld) == 6
    finally:
        follower.close()


@pytest.mark.slow  # the torch face networks on the CPU: 25 s on 2 cores
def test_streams_searches_launched_in_turn_each_get_their_own_frames_faces(
        small_faces_bgr: np.ndarray) -> None:
    """Every stream's search runs the one batch of its frame size (one frame buffer, on CUDA
    one graph): stream 0 launches on a frame with six small faces, stream 1 on an empty one
    before stream 0 takes, and each takes what its own frame holds."""
    from livecam.gpupipe.networks.shared import SharedFaceNetworks

    shared = SharedFaceNetworks(device="cpu", n_streams=2, detector_model="full",
                                min_score=FLOOR, max_rois=2)
    clients = [shared.slot_for(k) for k in range(2)]
    searches = [GpuTileSearch(c, tile_size_px=384) for c in clients]
    try:
        for one in searches:
            one.open()
        empty = np.full_like(small_faces_bgr, 40)
        searches[0].launch(small_faces_bgr.copy())
        searches[1].launch(empty)
        first, second = searches[0].take(), searches[1].take()
        assert first is not None and second is not None
        assert len(first.faces) == 6 and len(second.faces) == 0
        searches[1].launch(small_faces_bgr.copy())
        searches[0].launch(empty)
        first, second = searches[0].take(), searches[1].take()
        assert first is not None and second is not None
        assert len(first.faces) == 0 and len(second.faces) == 6
    finally:
        for one, client in zip(searches, clients, strict=True):
            one.close()
            client.close()


@pytest.mark.gpu
@pytest.mark.skipif("not __import__('torch').cuda.is_available()",
                    reason="CUDA is not available (the same code runs on the CPU above)")
def test_cuda_graph_of_the_tiles_matches_the_cpu_run(search: GpuTileSearch,
                                                     small_faces_bgr: np.ndarray) -> None:
    nets = one_stream(device="cuda", detector_model="full", min_score=FLOOR, max_rois=2)
    cuda = GpuTileSearch(nets, tile_size_px=384)
    cuda.open()
    cuda.prepare(small_faces_bgr.shape[1], small_faces_bgr.shape[0])  # captured before use
    ref = search.search(small_faces_bgr)
    for frame in (small_faces_bgr.copy(), small_faces_bgr):  # new uploads, the same graph
        got = cuda.search(frame)
    assert len(got.faces) == len(ref.faces) == 6
    assert iou_matrix(ref.faces.boxes_xyxy, got.faces.boxes_xyxy).max(axis=1).min() > 0.9


def test_a_launched_search_is_taken_later_with_its_own_frames_faces(
        search: GpuTileSearch, small_faces_bgr: np.ndarray) -> None:
    """launch returns at once; take hands over what the frame it was launched on holds, even
    after the networks moved on to another frame, and only once."""
    want = search.search(small_faces_bgr)
    search.launch(small_faces_bgr)
    search.networks.new_frame(np.zeros_like(small_faces_bgr))  # the next frame's upload
    got = search.take()
    assert got is not None and search.take() is None
    assert np.array_equal(got.faces.boxes_xyxy, want.faces.boxes_xyxy)
    assert np.array_equal(got.searched_xyxy, want.searched_xyxy)


@pytest.mark.slow  # the torch face networks on the CPU: over a minute on 2 cores
def test_a_deferred_search_finds_small_faces_by_the_same_frame(
        small_faces_bgr: np.ndarray) -> None:
    """The GPU search is deferred: launched a frame before it was due and taken on the due
    frame, so faces too small for the whole-frame pass, appearing after the first frame, are
    followed from the same frame as when the follower waited for the search (never later:
    they are shown as they are until then), the same frames whatever the timing."""
    from livecam.analysis import build_follower
    from livecam.config import load_config

    # the people search off: on frames 1-4 it covers two of the six small faces' people
    # before the tile search finds them (people.py); this test is about when the search's
    # result is taken
    analysis = load_config(None, ["advanced.analysis.cover_people=false"]).analysis
    nets = one_stream(device="cpu", detector_model="full", min_score=FLOOR,
                           max_rois=analysis.max_faces)
    search = GpuTileSearch(nets, tile_size_px=384)
    assert search.deferred
    follower = build_follower(analysis, realtime=False, networks=nets, search=search)
    empty = np.full_like(small_faces_bgr, 40)
    follower.open()
    try:
        counts = []
        for index in range(analysis.detect_every_n_frames + 2):
            frame = empty if index == 0 else small_faces_bgr
            faces, withheld = follower.follow(frame, index)
            counts.append(len(faces) + len(withheld))
    finally:
        follower.close()
    due = analysis.detect_every_n_frames  # the first search after frame 0's was due here
    assert counts[:due] == [0] * due  # launched on the frame before, not waited for
    assert counts[due] == 6


@pytest.mark.slow  # the torch face networks on the CPU: over a minute on 2 cores
def test_searching_every_frame_is_never_deferred(small_faces_bgr: np.ndarray) -> None:
    """detect_every_n_frames 1 asks for small faces on the frame they appear in: the search
    then runs on that frame, as before (deferring it would show them one frame)."""
    from livecam.analysis import build_follower
    from livecam.config import load_config

    analysis = load_config(None, ["advanced.analysis.detect_every_n_frames=1"]).analysis
    nets = one_stream(device="cpu", detector_model="full", min_score=FLOOR,
                           max_rois=analysis.max_faces)
    follower = build_follower(analysis, realtime=False, networks=nets,
                              search=GpuTileSearch(nets, tile_size_px=384))
    follower.open()
    try:
        follower.follow(np.full_like(small_faces_bgr, 40), 0)
        faces, withheld = follower.follow(small_faces_bgr, 1)
    finally:
        follower.close()
    assert len(faces) + len(withheld) == 6


@pytest.mark.gpu
@pytest.mark.skipif("not __import__('torch').cuda.is_available()",
                    reason="CUDA is not available (the same code runs on the CPU above)")
def test_cuda_next_upload_waits_for_a_launched_search(search: GpuTileSearch,
                                                      small_faces_bgr: np.ndarray) -> None:
    """The networks' next upload overwrites the device frame a launched search reads: it
    must wait for the search on the GPU, or the search reads the next frame's pixels."""
    nets = one_stream(device="cuda", detector_model="full", min_score=FLOOR, max_rois=2)
    cuda = GpuTileSearch(nets, tile_size_px=384)
    cuda.open()
    cuda.prepare(small_faces_bgr.shape[1], small_faces_bgr.shape[0])
    ref = search.search(small_faces_bgr)
    empty = np.zeros_like(small_faces_bgr)
    for _ in range(3):
        cuda.launch(small_faces_bgr.copy())
        nets.new_frame(empty)  # queued at once, behind nothing but the hold
        got = cuda.take()
        assert got is not None and len(got.faces) == len(ref.faces) == 6
        assert iou_matrix(ref.faces.boxes_xyxy, got.faces.boxes_xyxy).max(axis=1).min() > 0.9


def test_a_deferred_search_face_without_a_mesh_is_still_covered(
        small_faces_bgr: np.ndarray, monkeypatch: pytest.MonkeyPatch) -> None:
    """A small face the tiles find but the mesh cannot confirm (too small, turned away) is
    withheld as a box (covered), as when the search ran on its own frame: a deferred result
    is one frame old, not a worker's stale one to be dropped when no mesh is found there."""
    from livecam.analysis import build_follower
    from livecam.config import load_config
    from livecam.core.types import Unswappable

    analysis = load_config(None).analysis
    nets = one_stream(device="cpu", detector_model="full", min_score=FLOOR,
                           max_rois=analysis.max_faces)
    follower = build_follower(analysis, realtime=False, networks=nets,
                              search=GpuTileSearch(nets, tile_size_px=384))
    monkeypatch.setattr(nets, "landmarks", lambda image, rois: [None] * len(rois))
    follower.open()
    try:
        follower.follow(np.full_like(small_faces_bgr, 40), 0)
        for index in range(1, analysis.detect_every_n_frames + 1):
            faces, withheld = follower.follow(small_faces_bgr, index)
    finally:
        follower.close()
    assert len(faces) == 0 and len(withheld) == 6
    assert set(withheld.reasons.tolist()) == {int(Unswappable.NO_MESH)}


@pytest.mark.gpu
@pytest.mark.skipif("not __import__('torch').cuda.is_available()",
                    reason="CUDA is not available (the same code runs on the CPU above)")
def test_a_second_streams_tile_search_adds_no_graph(small_faces_bgr: np.ndarray) -> None:
    """Each stream's tile search captured a graph of its own into a pool of its own: 528 MB a
    stream at 1080p on an H100, the most of what each stream added to the GPU's memory. The
    streams now share one graph a frame size: a second stream's prepare adds almost nothing
    (its pinned host buffers are not on the GPU), and both find the faces."""
    import torch

    from livecam.gpupipe.networks.shared import SharedFaceNetworks

    shared = SharedFaceNetworks(device="cuda", n_streams=2, detector_model="full",
                                min_score=FLOOR, max_rois=2)
    clients = [shared.slot_for(k) for k in range(2)]
    searches = [GpuTileSearch(c, tile_size_px=384) for c in clients]
    added = []
    try:
        for one in searches:
            one.open()
            # graphs that earlier tests left for the collector free their pools when collected,
            # which a prepare's allocations can set off: counted here, it read -514 MB
            gc.collect()
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            before = torch.cuda.memory_reserved()
            one.prepare(small_faces_bgr.shape[1], small_faces_bgr.shape[0])
            torch.cuda.synchronize()
            added.append(torch.cuda.memory_reserved() - before)
        assert added[0] > 16 << 20 and added[1] == 0, added
        for one in searches:
            got = one.search(small_faces_bgr.copy())
            assert len(got.faces) == 6
    finally:
        for one, client in zip(searches, clients, strict=True):
            one.close()
            client.close()
