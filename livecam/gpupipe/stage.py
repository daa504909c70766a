"""The neural swap of one stream on the GPU, with frames in flight (an asynchronous stage).

:class:`GpuSwapStage` is the GPU twin of :class:`livecam.swap.neural.NeuralSwapStage` and
comes after the same analysis stage (the one face follower: detection, tracking, smoothing,
selection; on CUDA its networks run on the GPU too). Per frame it decides on the host, as the
CPU stage does, which faces get which identity (:class:`~livecam.swap.assign.IdentityAssigner`),
copies the frame into one of its stream's pinned buffers and hands the faces' 5 keypoints and
latents to the shared :class:`~livecam.gpupipe.hub.GpuSwapHub`, which swaps the faces of every
stream in one generator call. It is an :class:`~livecam.core.stage.AsyncStage`: ``submit``
returns at once and the runtime collects the frames in order on its collector thread, so up to
``capacity`` (``advanced.gpu.slots``) frames of the stream are in flight. A frame with nothing to
swap (bypass, no face, no identity chosen) never goes to the GPU; it still comes back in its place.

Hands in front (``hands``, :class:`~livecam.swap.occlusion.HandsInFront`, the CPU path's
stage): on a frame that will be swapped or covered, the hands are found in the captured frame
on the submitting thread (MediaPipe, with the same search cadence), their soft region is drawn
there and travels with the request; the GPU paste-back keeps it in front of the swapped and
enhanced faces. Where the frame also gets covers (drawn on the host when it is collected) the
hands are laid over the result on the host instead, as the CPU stage lays them over swaps and
covers alike. A hand search that raises fails the frame like any stage error (covered).

The streamer's own eyes and mouth interior (``keep_eyes``/``keep_mouth``, from
``advanced.swap.keep_eyes: always`` and ``swap.keep_mouth``, on by default as in the CPU stage):
each swapped face's eye and inner mouth loops (the CPU stage's loops and soft edge) travel with the
request, and the paste-back draws them on the device (:mod:`livecam.gpupipe.swap.keep`), so it
shows the streamer's gaze, blinks and mouth. The face's outline travels with them: the
paste-back stays inside it, as the CPU stages' does (never the generator's whole square over
something in front of the face).

Fail closed, as the CPU stages: faces the follower withheld (``packet.withheld``), faces whose
identity cannot be had, faces beyond the hub's ``max_faces`` and faces whose footprint did not
fit the paste-back window are covered by ``cover`` (:class:`~livecam.swap.cover.FaceCover`,
``advanced.swap.unswappable``) when the frame is collected, on top of the swapped faces; a frame
whose GPU work failed is covered by the runtime's fallback (the faces it was given). Where a
face not seen whole (partly hidden, lost) overlaps a swapped one, it is the face behind: its
cover leaves out the swapped face's hull (``FaceCover.cover_into``'s ``front``), as the CPU
stages, which cover first and swap over it, show it.

Threads: ``submit`` on the pipeline thread, ``collect`` on the runtime's collector thread;
``open``/``close``/``prepare`` on the thread that starts or reloads the run.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from livecam.analysis.hands import Hands
from livecam.analysis.keepgil import stacked
from livecam.core.types import Faces, Packet, Unswappable, WithheldFaces
from livecam.gpupipe.hub import GpuSwapHub
from livecam.gpupipe.request import SwapRequest
from livecam.gpupipe.slots import FrameBuffers, HandBox, quantised
from livecam.gpupipe.swap.keep import loop_rows_batch
from livecam.swap.assign import IdentityAssigner
from livecam.swap.cover import FaceCover
from livecam.swap.occlusion import HandsInFront, hand_alpha_box, keep_in_front

log = logging.getLogger(__name__)

#: at most one line a stream this often about faces too big for every paste window
TOO_BIG_LOG_INTERVAL_S = 30.0


@dataclass(frozen=True)
class _InFlight:
    """One submitted packet: ``request`` None when it needed no GPU (it is its own result);
    ``under`` the faces to cover when it is collected, ``swapped`` the faces sent to the GPU
    (in the request's order); ``hands`` the hands to keep in front of covers drawn when it
    is collected (a face whose paste did not fit is only known then: there the hands the GPU
    already kept in front are laid over once more, which only sharpens their soft edge);
    ``under_names`` and ``swapped_names`` the identity each of those faces has in this frame
    (a face's held swap stands in for it only while it keeps that identity)."""

    packet: Packet
    request: SwapRequest | None = None
    under: WithheldFaces = field(default_factory=WithheldFaces)
    swapped: Faces | None = None
    hands: Hands = field(default_factory=Hands)
    hands_ms: float = float("nan")
    under_names: list[str | None] = field(default_factory=list)
    swapped_names: list[str | None] = field(default_factory=list)


class GpuSwapStage:
    """The neural swap of stream ``stream`` on ``hub`` (see the module docstring).

    ``five_point`` maps (N, K, 2) mesh landmarks to (N, 5, 2) ArcFace keypoints (default:
    :func:`livecam.analysis.landmarks.five_point`, as the CPU stage). ``device_frame(image)``
    (the follower's GPU networks' :meth:`~livecam.gpupipe.networks.client.StreamFaceNetworks.
    device_frame`) gives the frame already on the device, so it is not uploaded twice; without
    it (or when it says None) the frame is copied into a pinned buffer. ``last_timings_ms``
    holds the latest collected frame's GPU split (``gpu``: upload to download on the device;
    ``tick``: submit to the frame back in host memory, queueing included; ``hands``: finding
    the hands and drawing their mask on the submitting thread, where it was done). ``cover``: what
    is shown where a face cannot be swapped (default: hold, then blur). ``hands``: keep
    hands in front of the faces (the hub must have been built with ``hands``), or None.
    """

    name = "swap"
    backend = "torch"

    def __init__(self, hub: GpuSwapHub, *, stream: int = 0, assign: tuple[str, ...] = (),
                 five_point: Callable[[np.ndarray], np.ndarray] | None = None,
                 device_frame: Callable[[np.ndarray], tuple[Any, Any] | None] | None = None,
                 cover: FaceCover | None = None, hands: HandsInFront | None = None,
                 keep_eyes: bool = False, keep_mouth: bool = False,
                 mouth_size: float = 1.0) -> None:
        if hands is not None and not hub.hands:
            raise ValueError("a GpuSwapStage with hands needs a hub built with hands=True")
        self.hub = hub
        self.hands = hands
        self.keep_eyes, self.keep_mouth, self.mouth_size = keep_eyes, keep_mouth, mouth_size
        self.cover = cover or FaceCover()
        self._device_frame = device_frame
        self.stream = stream
        self._assigner = IdentityAssigner(assign)
        self._five_point = five_point
        self._cond = threading.Condition()
        self._queue: collections.deque[_InFlight] = collections.deque()
        self._buffers: dict[tuple[int, int], FrameBuffers] = {}
        self._opened = False
        self.last_timings_ms: dict[str, float] = {}
        #: faces covered because no paste window held them (see :meth:`_covered`)
        self.faces_too_big = 0
        self._too_big_logged_s = -float("inf")

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
        if self.hands is not None:
            self.hands.open()
        try:
            self.hub.acquire()
        except BaseException:
            if self.hands is not None:
                self.hands.close()
            raise
        self._opened = True

    def close(self) -> None:
        if not self._opened:
            return
        self._opened = False
        with self._cond:
            self._queue.clear()
        self._buffers.clear()
        self.hub.release()
        if self.hands is not None:
            self.hands.close()

    def check_fits(self, width_px: int, height_px: int) -> None:
        """Raise :class:`ConfigError` (one line) when the GPU memory plan of every stream of
        the hub at this frame size exceeds ``advanced.gpu.memory_limit_gb`` (before anything is
        compiled: :func:`livecam.pipeline.runtime.prepare_stages` asks first)."""
        self.hub.check_fits(width_px, height_px)

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
        item = self._in_flight(packet)
        with self._cond:
            self._queue.append(item)
            self._cond.notify_all()

    def _in_flight(self, packet: Packet) -> _InFlight:
        """What ``packet`` needs: its GPU work (handed over to the hub) and what to cover."""
        if packet.state.bypass:
            self.hub.prepare_identities(self._assigner.wanted(packet.state))
            return _InFlight(packet)
        faces, state = packet.faces, packet.state
        withheld = packet.withheld
        # withheld faces no identity is chosen for are shown as they are (the user's choice)
        chosen = np.array([self._assigner.identity_for(state, int(t)) is not None
                           for t in withheld.track_ids], bool)
        parts = [withheld if chosen.all() else withheld[chosen]]
        picked: list[int] = []
        latents: list[np.ndarray] = []
        reasons: dict[int, Unswappable] = {}
        names = [self._assigner.identity_for(state, int(t)) for t in faces.track_ids]
        for i, name in enumerate(names):
            if name is None:
                continue
            latent = self.hub.latent(name) if faces.has_landmarks else Unswappable.NO_SWAP
            if isinstance(latent, Unswappable):
                reasons[i] = latent
            elif len(picked) >= self.hub.max_faces:
                reasons[i] = Unswappable.OVER_MAX
            else:
                picked.append(i)
                latents.append(latent)
        self.hub.prepare_identities(self._assigner.wanted(state))
        if reasons:
            index = list(reasons)
            parts.append(WithheldFaces.from_faces(faces[index], list(reasons.values())))
        under = WithheldFaces.concat(parts)
        under_names = [self._assigner.identity_for(state, int(t)) for t in under.track_ids]
        covered = len(under) > 0 and not self.cover.shows_real_faces
        hands, box, hands_ms = Hands(), None, float("nan")
        # hands are looked for only where the picture changes (as the CPU stage does)
        if self.hands is not None and (picked or covered):
            t0 = time.perf_counter_ns()
            hands = self.hands.find(packet.frame.image_bgr)
            # with covers the host lays the hands over everything once they are drawn
            if len(hands) and picked and not covered:
                height, width = packet.image_bgr.shape[:2]
                box = hand_alpha_box(hands, (height, width), shape=self.hands.shape)
            hands_ms = (time.perf_counter_ns() - t0) / 1e6
        if not picked:
            return _InFlight(packet, None, under, hands=hands, hands_ms=hands_ms,
                             under_names=under_names)
        # usually every face is swapped: no copy of its arrays then (a Faces pick per frame)
        swapped = faces if len(picked) == len(faces) else faces[picked]
        return _InFlight(packet, self._request(packet, swapped, stacked(latents), box), under,
                         swapped, hands, hands_ms, under_names=under_names,
                         swapped_names=[names[i] for i in picked])

    def _kept_loops(self, faces: Faces) -> tuple[np.ndarray, np.ndarray]:
        """The loops of ``faces``: the streamer's own eyes and mouth where kept (the CPU
        stage's loops and soft edge) and the outline the swap stays inside (the paste-back
        draws them on the device)."""
        return loop_rows_batch(faces.landmarks_xy, eyes=self.keep_eyes, mouth=self.keep_mouth,
                               mouth_size=self.mouth_size)

    def _request(self, packet: Packet, faces: Faces, latents: np.ndarray,
                 hands: HandBox | None = None) -> SwapRequest:
        """The GPU work for ``faces`` of ``packet`` with ``latents`` (and the hand mask
        ``hands``, or None), handed to the hub."""
        image = packet.image_bgr
        assert self._five_point is not None
        kps = np.asarray(self._five_point(faces.landmarks_xy), np.float32)
        buffers = self._buffers_for(int(image.shape[0]), int(image.shape[1]))
        index = buffers.take()
        on_device = self._device_frame(image) if self._device_frame is not None else None
        # quantised here, on the stream's own thread, not on the hub's launching thread
        request = SwapRequest(self.stream, buffers, index, kps, latents,
                              hands=quantised(hands) if hands is not None else None)
        request.keep_xy, request.keep_soft = self._kept_loops(faces)
        if on_device is not None:
            request.frame_dev, request.frame_ready = on_device
        else:
            np.copyto(buffers.inputs_numpy[index], image)
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
        hands = {"hands": head.hands_ms} if head.hands_ms == head.hands_ms else {}
        if request is None:
            self.last_timings_ms = hands
            return self._covered(head, head.packet.image_bgr)
        if request.error is not None:
            request.buffers.give_back(request.index)
            raise request.error
        out = request.buffers.hand_out(request.index)  # the buffer itself: no copy
        self.last_timings_ms = {"gpu": request.gpu_latency_ms, "tick": request.host_latency_ms,
                                **hands}
        return self._covered(head, out, request.fits)

    def _covered(self, head: _InFlight, out: np.ndarray,
                 fits: np.ndarray | None = None) -> Packet:
        """``head``'s packet with image ``out`` (its own pixels when nothing was swapped):
        the swapped faces remembered for ``hold``, the withheld ones and the swapped ones
        whose paste did not fit (``fits`` False) covered on top."""
        under, swapped = head.under, head.swapped
        under_names, swapped_names = head.under_names, head.swapped_names
        index = head.packet.frame.index
        if swapped is not None and fits is not None and not bool(np.all(fits)):
            fits = np.asarray(fits, bool)
            self._too_big(int((~fits).sum()))
            under = WithheldFaces.concat([under, WithheldFaces.from_faces(swapped[~fits],
                                                                          Unswappable.NO_SWAP)])
            under_names = [*under_names, *(n for n, ok in zip(swapped_names, fits, strict=True)
                                           if not ok)]
            swapped = swapped[fits]
            swapped_names = [n for n, ok in zip(swapped_names, fits, strict=True) if ok]
        if swapped is not None and len(swapped):
            self.cover.remember(out, swapped, index, identities=swapped_names)
        if len(under) == 0 or self.cover.shows_real_faces:
            return head.packet if out is head.packet.image_bgr \
                else head.packet.with_fields(image_bgr=out)
        # drawn over the swaps: a face behind a swapped one is covered around it, not on it
        out = self.cover.cover(out, under, index, identities=under_names,
                               front=swapped if swapped is not None and len(swapped) else None)
        if self.hands is not None and len(head.hands):
            out = keep_in_front(out, head.packet.frame.image_bgr, head.hands,
                                shape=self.hands.shape)
        return head.packet.with_fields(image_bgr=out)

    def _too_big(self, faces: int) -> None:
        """Count faces no paste window held (covered, never sent as they are) and say so,
        at most every ``TOO_BIG_LOG_INTERVAL_S``: a face that close to the camera is covered
        until a larger window is configured."""
        self.faces_too_big += faces
        now = time.monotonic()
        if now - self._too_big_logged_s < TOO_BIG_LOG_INTERVAL_S:
            return
        self._too_big_logged_s = now
        windows = self.hub.windows_px
        log.warning("stream %d: a face too big for the GPU paste window%s (%s px) is covered "
                    "(%d so far); set advanced.gpu.paste_window_large_px larger (at most 4096) to "
                    "swap faces that close to the camera", self.stream,
                    "s" if len(windows) > 1 else "", ", ".join(map(str, windows)),
                    self.faces_too_big)
