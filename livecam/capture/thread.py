"""The capture thread: reads a source, stamps frames and hands the newest to the pipeline."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import numpy as np

from livecam.capture.base import DecodesVideo, FrameSource, PipeEndedError
from livecam.core.backoff import Backoff
from livecam.core.errors import CaptureError, NoSenderYet
from livecam.core.mailbox import Mailbox
from livecam.core.metrics import Metrics
from livecam.core.types import Frame, ImageBGR, ImageI420, ReceivedI420

log = logging.getLogger(__name__)

_left_blocked: list[threading.Thread] = []  # capture threads stop() left blocked in a read


def threads_left_blocked() -> bool:
    """A capture thread of this process that :meth:`CaptureThread.stop` left blocked in a read
    (it gave up joining it) is still running. The process should then end without the
    interpreter's teardown: a thread still inside a decoder's C code (a listening ``av.open``)
    can crash it (SIGSEGV) while the interpreter is torn down. Any thread."""
    _left_blocked[:] = [t for t in _left_blocked if t.is_alive()]
    return bool(_left_blocked)


class CaptureThread:
    """Owns ``source`` after ``start``: opens it (again, with backoff, when a live source is
    lost), reads frames, stamps ``t_capture_ns`` and puts them in ``outbox``.

    Non-live sources are paced to their fps when ``realtime`` is true (a file then behaves like a
    camera) and read as fast as the pipeline takes them otherwise. At the end of a finite source
    the thread restarts it when ``loop`` is true, else closes ``outbox`` (so does a finite
    source that cannot be reopened; a live one is retried with backoff). ``stop`` returns within
    about ``join_timeout_s`` even if a read is blocked inside the driver.

    ``host_frames``: each frame read is copied with it once stamped (the stages'
    :class:`~livecam.core.stage.HostFrames` copy: into the page-locked memory a GPU uploads
    from), so its time counts in the frame's latency; None: frames go as the source gives them.
    A source that hands the same read-only array again (a still image) gets the same copy, so
    the stages still see one array, as without the copy (the GPU's face networks then upload
    and search it once). Where ``host_frames`` also offers ``empty(shape)`` (a writable
    array in that memory, or None) and the source ``read_into(out)`` (a camera through
    OpenCV: the frame decoded into ``out`` where the sizes agree, else a new array), the
    frame is decoded straight into that memory and not copied.

    ``source_i420``: a stage takes the I420 planes a frame was decoded from
    (:func:`~livecam.core.stage.source_i420_wanted`); a source that decodes video
    (:class:`~livecam.capture.base.DecodesVideo`) then copies them out as it reads, and each
    frame carries them (:attr:`~livecam.core.types.Frame.received_i420`).
    """

    def __init__(self, *, source: FrameSource, outbox: Mailbox[Frame], metrics: Metrics,
                 realtime: bool, loop: bool, reconnect_initial_s: float,
                 reconnect_max_s: float,
                 host_frames: Callable[[ImageBGR], ImageBGR] | None = None,
                 first_out: threading.Event | None = None, source_i420: bool = False) -> None:
        self._source = source
        #: the planes the source decoded an image from, where a stage wants them
        self._planes_of: Callable[[ImageBGR], ImageI420 | None] | None = None
        if source_i420 and isinstance(source, DecodesVideo):
            source.keeps_planes_i420 = True
            self._planes_of = source.planes_i420_of
        self._first_out = first_out
        self._host_frames = host_frames
        #: a writable array of a shape in the host memory, to decode into (or None)
        self._host_empty: Callable[[tuple[int, ...]], np.ndarray | None] | None = getattr(
            host_frames, "empty", None)
        self._last_copy: tuple[ImageBGR, ImageBGR] | None = None  # (source's, copy)
        self._outbox = outbox
        self._metrics = metrics
        self._realtime = realtime
        self._loop = loop
        self._backoff = (reconnect_initial_s, reconnect_max_s)  # a Backoff per outage
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="livecam-capture", daemon=True)
        self._is_open = False

    def start(self, *, already_open: bool = False) -> None:
        """Start reading. Pass ``already_open=True`` when the caller opened the source (to
        report open errors at start-up rather than in the thread)."""
        self._is_open = already_open
        self._thread.start()

    def request_stop(self) -> None:
        """Ask the thread to end without waiting for it (see ``stop``)."""
        self._stop.set()
        self._outbox.close()

    def stop(self, join_timeout_s: float = 0.5) -> None:
        self._stop.set()
        self._outbox.close()
        if self._thread.ident is None:  # never started (a stop while the run was starting)
            return
        self._thread.join(join_timeout_s)
        if self._thread.is_alive():
            _left_blocked.append(self._thread)
            log.warning("capture thread is blocked in a read; leaving it to finish on its own")

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    @property
    def is_open(self) -> bool:
        """The source is open (frames can come); False while it is opened or reopened, or
        an input pipe has not written yet. Any thread."""
        return self._is_open

    def _open_with_backoff(self) -> bool:
        waits = Backoff(*self._backoff)
        wait_ready = getattr(self._source, "wait_ready", None)
        while not self._stop.is_set():
            try:
                # an input pipe is opened once it holds data: the wait can be stopped
                if callable(wait_ready) and not wait_ready(0.1):
                    continue
                self._source.open()
                self._is_open = True
                return True
            except NoSenderYet as exc:
                log.debug("%s; listening again", exc)
            except CaptureError as exc:
                if not self._source.live:
                    # a file or pipe that cannot be reopened will not come back by waiting;
                    # a pipe at its end is the input's ordinary end
                    level = logging.INFO if isinstance(exc, PipeEndedError) else logging.WARNING
                    log.log(level, "%s; the input ends here", exc)
                    return False
                delay_s = waits.next_s()
                log.warning("%s; retrying in %.1f s", exc, delay_s)
                self._stop.wait(delay_s)
        return False

    def _paces_after_first(self) -> bool:
        """For a file paced like a camera: wait until the first frame is out (``first_out``;
        the stages' first frame may take a second: models warm up) so the frames behind it
        are not dropped meanwhile (else the input's first second is skipped).
        True once it is out, False when there is nothing to wait for or a stop came."""
        if self._first_out is None or not self._realtime or self._source.live:
            return False
        while not self._first_out.wait(0.05):
            if self._stop.is_set() or self._outbox.closed:
                return False
        return True

    def _copied(self, image: ImageBGR) -> ImageBGR:
        """``image`` through ``host_frames``; the last copy again for the same read-only array
        (its pixels cannot have changed)."""
        assert self._host_frames is not None
        last = self._last_copy
        if last is not None and last[0] is image and not image.flags.writeable:
            return last[1]
        copy = self._host_frames(image)
        self._last_copy = (image, copy)
        return copy

    def _read(self) -> tuple[ImageBGR | None, bool]:
        """The source's next frame, and whether it was decoded into the host memory of
        ``host_frames`` (then it needs no copy)."""
        read_into = getattr(self._source, "read_into", None)
        width, height = self._source.size_px
        if self._host_empty is None or read_into is None or width * height == 0:
            return self._source.read(), False
        block = self._host_empty((height, width, 3))
        if block is None:
            return self._source.read(), False
        image = read_into(block)
        return image, image is block

    def _run(self) -> None:
        index = 0
        period_ns = int(1e9 / max(self._source.fps, 1e-3))
        next_ns = time.perf_counter_ns()
        try:
            while not self._stop.is_set():
                if not self._is_open and not self._open_with_backoff():
                    break
                try:
                    image, in_host = self._read()
                except CaptureError as exc:
                    log.warning("%s; reopening", exc)
                    self._metrics.count("capture_lost")
                    self._source.close()
                    self._is_open = False
                    continue
                if image is None:
                    self._source.close()
                    self._is_open = False
                    if not self._loop:
                        break
                    continue
                if self._realtime and not self._source.live:
                    now_ns = time.perf_counter_ns()
                    if next_ns > now_ns:
                        self._stop.wait((next_ns - now_ns) / 1e9)
                    # a late frame restarts the grid rather than bursting to catch up
                    next_ns = max(next_ns, now_ns - period_ns) + period_ns
                t_capture_ns = time.perf_counter_ns()
                planes = None if self._planes_of is None else self._planes_of(image)
                if self._host_frames is not None and not in_host:
                    image = self._copied(image)
                frame = Frame(index=index, t_capture_ns=t_capture_ns, image_bgr=image,
                              received_i420=None if planes is None
                              else ReceivedI420.holding(image, planes))
                index += 1
                self._metrics.count("captured")
                while not self._outbox.put(frame, timeout_s=0.1):
                    if self._stop.is_set() or self._outbox.closed:
                        return
                if index == 1 and self._paces_after_first():
                    next_ns = time.perf_counter_ns()  # the grid starts with the output
        finally:
            self._source.close()
            self._is_open = False
            self._outbox.close()
