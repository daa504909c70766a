"""The tile search for small faces on a worker thread, so it is not on a frame's path.

Live mode only: the pipeline thread hands the worker its newest frame when a search is due
and the worker is idle (one frame in flight at most, nothing queued: a frame offered while the
worker is busy is not taken), and picks the result up on a later frame. The models release the
GIL while they run (LiteRT and MediaPipe's graphs alike), so on two cores the search runs
beside the per-frame detection and face mesh instead of after them. (Every frame still gets
its own whole-frame detection on the pipeline thread: see ``livecam.analysis.follower``.)

On Linux the worker runs at a lower priority (nice +10), and so do the threads MediaPipe's
graphs start where they are used (they inherit it: the worker opens the detector), so when
both cores are busy the frame in flight wins over a detection that may finish later.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from dataclasses import dataclass

import numpy as np

from livecam.analysis.detect import BlazeFaceDetector, SearchResult
from livecam.core.types import Faces, ImageBGR

log = logging.getLogger(__name__)

_WORKER_NICE = 10
#: How long ``close`` waits for a search in progress before leaving the detector's close to
#: the worker.
_CLOSE_WAIT_S = 0.05


@dataclass(frozen=True, slots=True)
class DetectionResult:
    """A search of frame ``frame_index`` (not the frame being processed when it is taken):
    ``faces`` found and ``searched_xyxy`` (T, 4) where it looked."""

    frame_index: int
    faces: Faces
    duration_ms: float
    searched_xyxy: np.ndarray


class BackgroundDetector:
    """Owns a :class:`BlazeFaceDetector` and one worker thread. Construct cheaply; ``open()``
    loads the models and starts the thread; ``close()`` stops and joins it (idempotent).

    :meth:`submit`, :meth:`take` and :meth:`detect_now` are for one thread (the pipeline
    thread). Images handed over must not be written while the worker reads them (stages never
    write into their inputs).
    """

    def __init__(self, detector: BlazeFaceDetector) -> None:
        self.detector = detector
        self._cond = threading.Condition()
        self._detector_lock = threading.Lock()  # BlazeFaceDetector is single-caller
        self._request: tuple[int, ImageBGR] | None = None
        self._result: DetectionResult | None = None
        self._error: BaseException | None = None
        self._busy = False
        self._stop = False
        self._exited = False  # the worker left its loop
        self._close_on_exit = False  # close() left the detector to the worker
        self._closing: threading.Thread | None = None  # that worker
        self._thread: threading.Thread | None = None

    def open(self) -> None:
        if self._thread is not None:
            return
        if self._closing is not None:  # a worker still ending its last search
            self._closing.join()
            self._closing = None
        self._stop, self._exited, self._close_on_exit = False, False, False
        opened: list[BaseException | None] = []
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(opened, ready),
                                        name="livecam-detect", daemon=True)
        self._thread.start()
        ready.wait()
        if opened[0] is not None:  # the detector failed to load: report it here
            self._thread.join()
            self._thread = None
            raise opened[0]

    def close(self) -> None:
        """Stop the worker; the detector is closed here, or, when the worker is still inside
        a search after ``_CLOSE_WAIT_S``, by the worker once that search ends. At nice +10 on
        a saturated machine a search waits up to 0.64 s for a core, which a SIGTERM's stop
        must not wait for; nothing uses the detector after close."""
        thread, self._thread = self._thread, None
        if thread is not None:
            with self._cond:
                self._stop = True
                self._cond.notify_all()
            thread.join(_CLOSE_WAIT_S)
            with self._cond:
                self._request, self._result, self._busy = None, None, False
                if thread.is_alive() and not self._exited:
                    self._close_on_exit = True  # the worker closes it (see _run)
                    self._closing = thread
                    return
        with self._cond:
            self._request, self._result, self._busy = None, None, False
        self.detector.close()

    @property
    def busy(self) -> bool:
        """True while a frame is in flight (submitted, result not yet taken or not ready)."""
        with self._cond:
            return self._busy

    def submit(self, frame_index: int, image_bgr: ImageBGR) -> bool:
        """Hand a frame to the worker; False (and nothing kept) when one is already in flight."""
        if self._thread is None:
            raise RuntimeError("BackgroundDetector.open() was not called")
        with self._cond:
            if self._busy:
                return False
            self._busy = True
            self._request = (frame_index, image_bgr)
            self._cond.notify_all()
            return True

    def take(self) -> DetectionResult | None:
        """The finished result, once (None while none is ready). Re-raises a worker error."""
        with self._cond:
            if self._error is not None:
                error, self._error = self._error, None
                self._busy = False
                raise error
            result, self._result = self._result, None
            if result is not None:
                self._busy = False
            return result

    def wait_idle(self, timeout_s: float = 5.0) -> bool:
        """Block until the in-flight frame's result is ready (for tests and benchmarks)."""
        with self._cond:
            return self._cond.wait_for(
                lambda: self._request is None and (self._result is not None
                                                   or self._error is not None
                                                   or not self._busy), timeout_s)

    def search_now(self, image_bgr: ImageBGR, *, all_tiles: bool = False) -> SearchResult:
        """Search on the calling thread (waits for an in-flight search to finish first)."""
        with self._detector_lock:
            return self.detector.search(image_bgr, all_tiles=all_tiles)

    def _run(self, opened: list[BaseException | None], ready: threading.Event) -> None:
        _lower_priority()
        try:
            self.detector.open()  # its graph threads start here, at this thread's priority
        except BaseException as exc:  # re-raised by open() on the calling thread
            opened.append(exc)
            ready.set()
            return
        opened.append(None)
        ready.set()
        try:
            self._loop()
        finally:
            with self._cond:
                self._exited = True
                close = self._close_on_exit
            if close:
                self.detector.close()

    def _loop(self) -> None:
        import time

        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._stop or self._request is not None)
                if self._stop:
                    return
                assert self._request is not None
                frame_index, image = self._request
            t0 = time.perf_counter_ns()
            try:
                with self._detector_lock:
                    found = self.detector.search(image)
            except Exception as exc:  # handed to the pipeline thread by take()
                log.debug("background detection failed", exc_info=True)
                with self._cond:
                    self._request, self._error = None, exc
                    self._cond.notify_all()
                continue
            with self._cond:
                self._request = None
                self._result = DetectionResult(frame_index, found.faces,
                                               (time.perf_counter_ns() - t0) / 1e6,
                                               found.searched_xyxy)
                self._cond.notify_all()


def _lower_priority() -> None:
    """Nice the calling thread (Linux: a thread id is a valid PRIO_PROCESS target; elsewhere
    it is not, so nothing is done)."""
    if sys.platform != "linux":
        return
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(),
                       os.getpriority(os.PRIO_PROCESS, 0) + _WORKER_NICE)
    except OSError as exc:
        log.debug("could not lower the detection thread's priority: %s", exc)
