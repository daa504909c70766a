"""The neural swap of one stream on the GPU, with frames in flight (an asynchronous stage).

:class:`GpuSwapStage` is the GPU twin of :class:`livecam.swap.neural.NeuralSwapStage` and
comes after the same analysis stage (the one face follower: detection, tracking, smoothing,
selection; on CUDA its networks run on the GPU too). Per frame it decides on the host, as the
CPU stage does, which faces get which identity (:class:`~livecam.swap.assign.IdentityAssigner`),
copies the frame into one of its stream's pinned buffers and hands the faces' 5 keypoints and
latents to the shared :class:`~livecam.gpupipe.hub.GpuSwapHub`, which swaps the faces of every
stream in one generator call. It is an :class:`~livecam.core.stage.AsyncStage`: ``submit``
returns at once and the runtime collects the frames in order on its collector thread, so up to
``capacity`` (``gpu.slots``) frames of the stream are in flight. A frame with nothing to swap
(bypass, no face, no identity chosen) never goes to the GPU; it still comes back in its place.

Threads: ``submit`` on the pipeline thread, ``collect`` on the runtime's collector thread;
``open``/``close``/``prepare`` on the thread that starts or reloads the run.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from livecam.core.types import Packet
from livecam.gpupipe.hub import GpuSwapHub, SwapRequest
from livecam.gpupipe.slots import FrameBuffers
from livecam.swap.assign import IdentityAssigner


@dataclass(frozen=True)
class _InFlight:
    """One submitted packet: ``request`` None when it needed no GPU (it is its own result)."""

    packet: Packet
    request: SwapRequest | None = None


class GpuSwapStage:
    """The neural swap of stream ``stream`` on ``hub`` (see the module docstring).

    ``five_point`` maps (N, K, 2) mesh landmarks to (N, 5, 2) ArcFace keypoints (default:
    :func:`livecam.analysis.landmarks.five_point`, as the CPU stage). ``device_frame(image)``
    (the follower's GPU networks' :meth:`~livecam.analysis.gpu.networks.GpuFaceNetworks.
    device_frame`) gives the frame already on the device, so it is not uploaded twice; without
    it (or when it says None) the frame is copied into a pinned buffer. ``last_timings_ms``
    holds the latest collected frame's GPU split (``gpu``: upload to download on the device;
    ``tick``: submit to the frame back in host memory, queueing included).
    """

    name = "swap"
    backend = "torch"

    def __init__(self, hub: GpuSwapHub, *, stream: int = 0, assign: tuple[str, ...] = (),
                 five_point: Callable[[np.ndarray], np.ndarray] | None = None,
                 device_frame: Callable[[np.ndarray], tuple[Any, Any] | None] | None = None
                 ) -> None:
        self.hub = hub
        self._device_frame = device_frame
        self.stream = stream
        self._assigner = IdentityAssigner(assign)
        self._five_point = five_point
        self._cond = threading.Condition()
        self._queue: collections.deque[_InFlight] = collections.deque()
        self._buffers: dict[tuple[int, int], FrameBuffers] = {}
        self._opened = False
        self.last_timings_ms: dict[str, float] = {}

    @property
    def capacity(self) -> int:
        return self.hub.capacity

    # -- lifecycle ----------------------------------------------------------------------------

    def open(self) -> None:
        if self._opened:
            return
        if self._five_point is None:
            from livecam.analysis.landmarks import five_point

            self._five_point = five_point
        self.hub.acquire()
        self._opened = True

    def close(self) -> None:
        if not self._opened:
            return
        self._opened = False
        with self._cond:
            self._queue.clear()
        self._buffers.clear()
        self.hub.release()

    def prepare(self, width_px: int, height_px: int) -> None:
        """Capture the hub's graphs for this frame size and make this stream's buffers."""
        self.hub.prepare(width_px, height_px)
        self._buffers_for(height_px, width_px)

    def __enter__(self) -> GpuSwapStage:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _buffers_for(self, height_px: int, width_px: int) -> FrameBuffers:
        buffers = self._buffers.get((height_px, width_px))
        if buffers is None:
            buffers = self._buffers[(height_px, width_px)] = self.hub.buffers(height_px,
                                                                              width_px)
        return buffers

    # -- pipeline thread ------------------------------------------------------------------------

    def submit(self, packet: Packet) -> None:
        if not self._opened:
            raise RuntimeError("GpuSwapStage.submit called before open()")
        request = self._request(packet)
        with self._cond:
            self._queue.append(_InFlight(packet, request))
            self._cond.notify_all()

    def _request(self, packet: Packet) -> SwapRequest | None:
        """The GPU work for ``packet``, or None when there is none (already handed over)."""
        faces = packet.faces
        image = packet.image_bgr
        if packet.state.bypass or not len(faces) or not faces.has_landmarks:
            return None
        picked: list[int] = []
        latents: list[np.ndarray] = []
        for i, track_id in enumerate(faces.track_ids):
            name = self._assigner.identity_for(packet.state, int(track_id))
            latent = self.hub.latent(name) if name is not None else None
            if latent is not None and len(picked) < self.hub.max_faces:
                picked.append(i)
                latents.append(latent)
        if not picked:
            return None
        assert self._five_point is not None
        kps = self._five_point(faces.landmarks_xy[picked]).astype(np.float32)
        buffers = self._buffers_for(int(image.shape[0]), int(image.shape[1]))
        index = buffers.take()
        on_device = self._device_frame(image) if self._device_frame is not None else None
        request = SwapRequest(self.stream, buffers, index, kps, np.stack(latents))
        if on_device is not None:
            request.frame_dev, request.frame_ready = on_device
        else:
            np.copyto(buffers.inputs[index].numpy(), image)
        try:
            self.hub.submit(request)
        except BaseException:
            buffers.give_back(index)
            raise
        return request

    # -- collector thread -----------------------------------------------------------------------

    def collect(self, timeout_s: float) -> Packet | None:
        with self._cond:
            if not self._cond.wait_for(lambda: bool(self._queue), timeout_s):
                return None
            head = self._queue[0]
        request = head.request
        if request is not None and not request.done.wait(timeout_s):
            return None
        with self._cond:
            if not self._queue or self._queue[0] is not head:
                return None  # closed meanwhile
            self._queue.popleft()
        if request is None:
            self.last_timings_ms = {}
            return head.packet
        try:
            if request.error is not None:
                raise request.error
            out = request.buffers.outputs[request.index].numpy().copy()
        finally:
            request.buffers.give_back(request.index)
        self.last_timings_ms = {"gpu": request.gpu_latency_ms, "tick": request.host_latency_ms}
        return head.packet.with_fields(image_bgr=out)
