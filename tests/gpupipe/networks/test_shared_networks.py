"""The follower's networks shared by several streams (:class:`SharedFaceNetworks`): each stream
gets what networks of its own give it, whatever else is in the batch; calls that come while a
batch runs are served together by the next one; an error reaches every caller of its batch.
On the CPU here (the same torch code as on CUDA, eager; the CUDA graphs are the H200's
``tests/gpupipe/networks/test_gpu_cuda.py`` kind of check, run there)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import cv2
import numpy as np
import pytest

from livecam.analysis.roi import roi_from_detection
from livecam.gpupipe.networks.batching import Batcher, Request
from livecam.gpupipe.networks.client import StreamFaceNetworks
from livecam.gpupipe.networks.shared import SharedFaceNetworks, one_stream

#: one frame followed once: (box, score) of each detection, and the mesh of each (or None)
Followed = tuple[list[tuple[np.ndarray, float]], list[np.ndarray | None]]


@pytest.fixture(scope="module")
def frames(t1_bgr: np.ndarray, astronaut_bgr: np.ndarray) -> list[np.ndarray]:
    """Three 1280x720 frames of real photos: insightface's group, the group mirrored, the
    astronaut on a grey canvas; and a 640x360 one (another frame size in the same batch)."""
    group = np.ascontiguousarray(t1_bgr[83:803])
    canvas = np.full((720, 1280, 3), 90, np.uint8)
    canvas[100:612, 400:912] = astronaut_bgr
    small = cv2.resize(group, (640, 360), interpolation=cv2.INTER_AREA)
    return [group, np.ascontiguousarray(group[:, ::-1]), canvas, small]


def _own(frame: np.ndarray) -> Followed:
    """Detections and meshes from networks of the stream's own (the reference)."""
    nets = one_stream(device="cpu", detector_model="full", min_score=0.5, max_rois=2)
    nets.open()
    try:
        return _follow_once(nets, frame)
    finally:
        nets.close()


@pytest.fixture(scope="module")
def own(frames: list[np.ndarray]) -> Callable[[int], Followed]:
    """``own(k)``: :func:`_own` of ``frames[k]``, worked out once for the module (new networks
    of its own give a frame the same every time; the tests only read it)."""
    done: dict[int, Followed] = {}

    def reference(k: int) -> Followed:
        if k not in done:
            done[k] = _own(frames[k])
        return done[k]

    return reference


def _follow_once(nets: StreamFaceNetworks, frame: np.ndarray) -> Followed:
    image = frame.copy()  # a new image: a new frame for the networks
    faces = nets.detect(image)
    rois = [roi_from_detection(faces.boxes_xyxy[i], faces.keypoints_xy[i])
            for i in range(len(faces))]
    meshes = nets.landmarks(image, rois)
    return ([(faces.boxes_xyxy[i], float(faces.scores[i])) for i in range(len(faces))],
            [None if m is None else m.landmarks_xy for m in meshes])


def _assert_same(got: Followed, want: Followed) -> None:
    assert len(got[0]) == len(want[0]) >= 1
    for (box, score), (box_ref, score_ref) in zip(got[0], want[0], strict=True):
        assert np.abs(box - box_ref).max() < 0.5 and abs(score - score_ref) < 1e-3
    assert len(got[1]) == len(want[1])
    for mesh, mesh_ref in zip(got[1], want[1], strict=True):
        assert (mesh is None) == (mesh_ref is None)
        if mesh is not None and mesh_ref is not None:
            assert np.linalg.norm(mesh - mesh_ref, axis=1).max() < 0.5


def _in_threads(n: int, body: Callable[[int], None]) -> list[BaseException]:
    """``body(k)`` on ``n`` threads started together; the errors they raised."""
    start = threading.Barrier(n)
    errors: list[BaseException] = []

    def run(k: int) -> None:
        try:
            start.wait()
            body(k)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    return errors


@pytest.mark.slow  # the torch face networks on the CPU: over a minute on 2 cores
def test_each_stream_gets_what_networks_of_its_own_give(
        frames: list[np.ndarray], own: Callable[[int], Followed]) -> None:
    shared = SharedFaceNetworks(device="cpu", n_streams=4, detector_model="full",
                                min_score=0.5, max_rois=2)
    clients = [shared.slot_for(k, keep_frames=2) for k in range(len(frames))]
    for c in clients:
        c.open()
    try:
        for k, (frame, client) in enumerate(zip(frames, clients, strict=True)):
            _assert_same(_follow_once(client, frame), own(k))
        # each stream's kept frame is its own, not the last stream's
        for frame, client in zip(frames, clients, strict=True):
            image = frame.copy()
            client.detect(image)
        for frame, client in zip(frames, clients, strict=True):
            kept = client.device_frame(client._image)  # type: ignore[arg-type]
            assert kept is not None and np.array_equal(kept[0].numpy(), frame)
    finally:
        for c in clients:
            c.close()
    with pytest.raises(ValueError, match="stream 4 is not one of 4"):
        shared.slot_for(4)


def test_more_regions_than_a_mesh_graph_takes_run_in_several_batches(
        frames: list[np.ndarray], own: Callable[[int], Followed]) -> None:
    shared = SharedFaceNetworks(device="cpu", n_streams=2, detector_model="full",
                                min_score=0.5, max_rois=1)
    assert shared.max_mesh == 2  # the group's three or more faces take two mesh calls or more
    client = shared.slot_for(0)
    client.open()
    try:
        got = _follow_once(client, frames[0])
    finally:
        client.close()
    assert len(got[1]) >= 3
    _assert_same(got, own(0))


def test_streams_calling_at_once_each_get_their_own_results(
        frames: list[np.ndarray], own: Callable[[int], Followed]) -> None:
    """Four threads (two frame sizes) call together for several frames; each result is the one
    its own networks give, however the calls were batched."""
    want = [own(k) for k in range(len(frames))]
    shared = SharedFaceNetworks(device="cpu", n_streams=4, detector_model="full",
                                min_score=0.5, max_rois=2)
    clients = [shared.slot_for(k) for k in range(len(frames))]
    for c in clients:
        c.open()
    got: dict[int, list[Followed]] = {k: [] for k in range(len(frames))}

    def follow(k: int) -> None:
        for _ in range(3):
            got[k].append(_follow_once(clients[k], frames[k]))

    errors = _in_threads(len(frames), follow)
    for c in clients:
        c.close()
    assert not errors
    for k in range(len(frames)):
        assert len(got[k]) == 3
        for result in got[k]:
            _assert_same(result, want[k])
    assert sum(shared.batcher.sizes) == len(frames) * 3 * 2  # a detect and a mesh call each


def _request() -> Request:
    return Request(0, (1, 1), detect=False, rois=(), uploaded=None)


def test_calls_that_come_while_a_batch_runs_are_served_together_by_one_of_them() -> None:
    entered, release = threading.Event(), threading.Event()
    batches: list[tuple[str, int]] = []

    def run(batch: list[Request]) -> None:
        batches.append((threading.current_thread().name, len(batch)))
        if len(batches) == 1:
            entered.set()
            assert release.wait(60)

    batcher = Batcher(run)
    threads = [threading.Thread(target=batcher.call, args=(_request(),), name=f"t{k}")
               for k in range(3)]
    threads[0].start()
    assert entered.wait(60)  # t0 runs its own call at once
    threads[1].start()
    threads[2].start()
    assert batcher.wait_for_pending(2, timeout_s=60)
    release.set()
    for t in threads:
        t.join(60)
    assert [size for _, size in batches] == [1, 2]
    assert batches[0][0] == "t0" and batches[1][0] in ("t1", "t2")
    assert list(batcher.sizes) == [1, 2]
    # one batch at a time: the second began after the first ended (the benchmark reads from
    # these how much of the time the streams' batches take)
    (start0, end0), (start1, end1) = batcher.spans
    assert start0 <= end0 <= start1 <= end1


def test_a_batch_waits_once_for_each_upload_its_requests_carry() -> None:
    """A frame's edge-strip pictures all carry the one event of their building; the batch
    waited on it once per picture (a batch of 16 streams' frames and strips: about a hundred
    waits, each a torch call that gives the GIL up on the thread running every stream's
    batch). The CUDA stream is a recorder here: this machine has no CUDA, and the waits are
    what is counted."""

    class Recorder:
        def __init__(self) -> None:
            self.waited: list[object] = []

        def wait_event(self, event: object) -> None:
            self.waited.append(event)

    shared = SharedFaceNetworks(n_streams=2, device="cpu", detector_model="full",
                                min_score=0.5, max_rois=2)
    nets = shared.slot_for(0)
    nets.open()
    try:
        nets.prepare(160, 96)
        nets.prepare_pictures({(96, 96): 8})
        recorder = Recorder()
        shared._stream = recorder
        frame, pictures = object(), object()
        batch = [Request(0, (96, 160), detect=True, rois=(), uploaded=frame),
                 *(Request(k, (96, 96), detect=True, rois=(), uploaded=pictures, picture=True)
                   for k in range(8)),
                 Request(1, (96, 160), detect=True, rois=(), uploaded=None)]
        shared._run(batch)
        assert recorder.waited == [frame, pictures]
        assert all(r.found is not None for r in batch)
    finally:
        shared._stream = None
        nets.close()


def test_an_error_reaches_every_caller_of_its_batch_and_the_next_batch_runs() -> None:
    calls = 0

    def run(batch: list[Request]) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("device lost")
        for r in batch:
            r.meshes = [None]

    batcher = Batcher(run)
    with pytest.raises(RuntimeError, match="device lost"):
        batcher.call(_request())
    request = _request()
    batcher.call(request)
    assert request.meshes == [None]


def test_the_detector_reads_the_frames_its_index_names(frames: list[np.ndarray]) -> None:
    import torch

    from livecam.gpupipe.networks.models import load_blazeface

    detector = load_blazeface("full", max_faces=8, min_score=0.5)
    stack = torch.from_numpy(np.stack(frames[:3]))
    with torch.inference_mode():
        every = detector(stack)
        picked = detector(stack, frame_index=torch.tensor([2, 0, 2]))
    for got, want in zip(picked, every, strict=True):
        assert torch.equal(got[0], want[2]) and torch.equal(got[1], want[0])
        assert torch.equal(got[2], want[2])


def test_livecam_streams_share_the_follower_networks_and_one_stream_runs_the_same() -> None:
    """What ``livecam run`` builds for CUDA (nothing opened: cheap here)."""
    from livecam.app import SharedStages
    from livecam.config import load_config
    from livecam.gpupipe.factory import follower_networks

    config = load_config(None)
    shared = SharedStages(n_streams=3)
    built = [follower_networks(config, "cuda:0", shared=shared, stream=k)[0] for k in range(3)]
    assert all(isinstance(n, StreamFaceNetworks) for n in built)
    assert [n.slot for n in built] == [0, 1, 2]
    assert built[0].shared is built[1].shared is built[2].shared
    assert built[0].detect_ahead == config.analysis.detect_each_frame
    # one stream: the same class, at the same sizes (one set of compiled shapes)
    alone, _ = follower_networks(config, "cuda:0", shared=SharedStages(n_streams=1))
    own_hub, _ = follower_networks(config, "cuda:0")
    for one in (alone, own_hub):
        assert isinstance(one, StreamFaceNetworks) and one.slot == 0
        assert isinstance(one.shared, SharedFaceNetworks)
        assert one.shared.stack_frames == built[0].shared.stack_frames  # type: ignore[attr-defined]
        assert one.shared.frames_per_call == built[0].shared.frames_per_call  # type: ignore[attr-defined]
    refined = load_config(None, ["advanced.analysis.refine_landmarks=true"])
    own, _ = follower_networks(refined, "cuda:0", shared=shared, stream=0)
    assert isinstance(own, StreamFaceNetworks)  # its 478-point mesh runs on the host
    assert own.refine_landmarks and own.num_landmarks == 478


@pytest.mark.gpu
@pytest.mark.skipif("not __import__('torch').cuda.is_available()",
                    reason="CUDA is not available (the same code runs on the CPU above)")
def test_cuda_graphs_serve_streams_calling_at_once(frames: list[np.ndarray],
                                                   own: Callable[[int], Followed]) -> None:
    """On CUDA (fp16, graphs): four streams calling together, each with a tile search on its
    own place, get what the CPU reference gives within fp16's reach; kept frames are each
    stream's own."""
    from livecam.gpupipe.networks.tiles import GpuTileSearch
    from livecam.track.bytetrack import iou_matrix

    want = [own(k) for k in range(len(frames))]
    shared = SharedFaceNetworks(device="cuda", n_streams=4, detector_model="full",
                                min_score=0.5, max_rois=2)
    clients = [shared.slot_for(k, keep_frames=3) for k in range(len(frames))]
    searches = [GpuTileSearch(c, tile_size_px=640) for c in clients]
    for c, f, s in zip(clients, frames, searches, strict=True):
        c.open()
        s.open()
        c.prepare(f.shape[1], f.shape[0])
    got: dict[int, list[Followed]] = {k: [] for k in range(len(frames))}

    def follow(k: int) -> None:
        for i in range(6):
            image = frames[k].copy()
            if i % 2:
                searches[k].launch(image)
            got[k].append(_follow_once(clients[k], image))
            kept = clients[k].device_frame(clients[k]._image)  # type: ignore[arg-type]
            assert kept is not None
            kept[1].synchronize()
            assert np.array_equal(kept[0].cpu().numpy(), frames[k])
            if i % 2:
                assert searches[k].take() is not None

    errors = _in_threads(len(frames), follow)
    for c, s in zip(clients, searches, strict=True):
        s.close()
        c.close()
    assert not errors, errors
    for k in range(len(frames)):
        for result in got[k]:
            dets, meshes = result
            ref_dets, ref_meshes = want[k]
            assert len(dets) == len(ref_dets)
            iou = iou_matrix(np.array([b for b, _ in ref_dets]), np.array([b for b, _ in dets]))
            assert iou.max(axis=1).min() > 0.9
            refs = [m for m in ref_meshes if m is not None]
            for mesh in meshes:
                if mesh is not None:  # the nearest reference mesh (fp16 may reorder scores)
                    assert min(np.linalg.norm(mesh - m, axis=1).mean() for m in refs) < 1.0


def test_a_rebuilt_stream_takes_its_place_and_the_last_stream_closing_closes_the_models(
        frames: list[np.ndarray], own: Callable[[int], Followed]) -> None:
    """A config reload rebuilds a stream's stages: the new chain's networks take the same place
    (``slot_for``) and open before the old ones close; the models stay open until the last
    stream's networks close."""
    shared = SharedFaceNetworks(device="cpu", n_streams=2, detector_model="full",
                                min_score=0.5, max_rois=2)
    old, other = shared.slot_for(0), shared.slot_for(1)
    old.open()
    other.open()
    new = shared.slot_for(0)
    assert new.slot == old.slot == 0
    new.open()
    old.close()
    _assert_same(_follow_once(new, frames[0]), own(0))
    new.close()
    assert shared._detectors  # stream 1 still runs
    other.close()
    assert not shared._detectors and not shared._stacks
    with pytest.raises(ValueError, match="stream 2"):
        shared.slot_for(2)


@pytest.mark.slow
def test_more_frames_than_one_detector_call_takes_run_as_several_calls(
        frames: list[np.ndarray], own: Callable[[int], Followed]) -> None:
    """Four streams' detections in one batch, with a call of at most two frames (and the
    stacked frames deeper than the streams, as the pipeline sizes them by
    ``advanced.pipeline.max_streams``): two calls, each stream still gets its own detections."""
    want = [own(k) for k in range(len(frames))]
    shared = SharedFaceNetworks(device="cpu", n_streams=4, detector_model="full",
                                min_score=0.5, max_rois=2, stack_frames=8, frames_per_call=2)
    clients = [shared.slot_for(k) for k in range(len(frames))]
    for c in clients:
        c.open()
    found: dict[int, list[tuple[np.ndarray, float]]] = {}

    def detect(k: int) -> None:
        faces = clients[k].detect(frames[k].copy())
        found[k] = [(faces.boxes_xyxy[i], float(faces.scores[i])) for i in range(len(faces))]

    try:
        for size in {f.shape[:2] for f in frames}:  # stacks made before the batch is held
            shared.stack(*size)
        assert {s.frames.shape[0] for s in shared._stacks.values()} == {8}
        assert all(tuple(s.detect) == (1, 2) for s in shared._stacks.values())
        with shared.batcher.exclusive():  # no batch runs until all four calls wait
            threads = [threading.Thread(target=detect, args=(k,)) for k in range(4)]
            for t in threads:
                t.start()
            assert shared.batcher.wait_for_pending(4, timeout_s=120)
        for t in threads:
            t.join(300)
    finally:
        for c in clients:
            c.close()
    assert 4 in shared.batcher.sizes  # one batch of four detector frames
    for k in range(4):
        got, ref = found[k], want[k][0]
        assert len(got) == len(ref) >= 1
        for (box, score), (box_ref, score_ref) in zip(got, ref, strict=True):
            assert np.abs(box - box_ref).max() < 0.5 and abs(score - score_ref) < 1e-3
