"""Judging live identity switches from the frames the virtual camera really received.

The input is a ``file:`` clip of one still "webcam" picture whose every frame carries its own
index as a frame code in a corner (:mod:`tests.helpers.frame_code`), away from the face. Each
frame sent is reduced to: the input index read from its pixels, whether it is that input frame
itself (pixel for pixel: unswapped), whether its face is covered (fail closed: its fine detail
gone, measured against the real face's own) and its face region. A command's reply names
``first_frame_index``, the first captured frame processed under the new state, and
``frames_sent_at_apply``. Then, whatever the load on the host:

- every sent frame whose input index is at or past a command's ``first_frame_index`` (and
  before the next one's) shows that command's state, and every frame before it the old state;
- the one exception is the cover, in an identity's first frames only: its faces are covered
  until the tracker confirms them and the identity is ready. Preparing an identity takes
  time on a thread of its own, not frames, so on a loaded host that is any number of frames;
  the cover may therefore only come before the identity's first frame showing it, and never
  stands for the real face, the identity switched away from, or one not yet selected;
- the frames already past the pipeline's entry when a command applied but sent after it are
  bounded by construction: one in each hop and stage thread past the first, one in the output
  slot, one in the output thread's hands, so at most ``2 * advanced.pipeline.threads``
  (:func:`in_flight_bound`).

Used by tests/control/test_switching.py (in process) and tests/daemon/test_daemon_swap.py (the
daemon as a subprocess).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tests.helpers import frame_code

BITS = 10  # input indices modulo 1024: a 15 fps clip loops every 68 s
CLIP_FRAMES = 1 << BITS
CLIP_FPS = 15.0
REAL = "real"  # the look of an unswapped frame (no identity, or bypass)
COVERED = "covered"  # a face covered (fail closed: not yet confirmed, identity loading)
#: A face with less fine detail than this share of the real face's is covered (the cover keeps
#: ``advanced.swap.cover_cells`` cells across the face: ~0.07 of the detail; classic swaps keep
#: ~0.8).
COVER_DETAIL_SHARE = 0.35

BoxXYXY = tuple[int, int, int, int]


def code_box(size_px: tuple[int, int]) -> BoxXYXY:
    """Where the frame code goes: the bottom-right corner, 8 px per bar, 16 px tall."""
    width, height = size_px
    bar_px = 8
    return (width - 8 - 2 * BITS * bar_px, height - 24, width - 8, height - 8)


def in_flight_bound(threads: int) -> int:
    """Frames taken before a command applied that can still be sent after it: with the
    scheduler's own thread between two frames (that is when it applies commands), one in each
    of the ``threads - 1`` hops and in each of the ``threads - 1`` stage workers, one in the
    output mailbox and one in the output thread (waiting for its send slot, or in the sink's
    ``send`` while the counter still reads the frames before it)."""
    return 2 * threads


def write_clip(path: Path, base_bgr: np.ndarray) -> Path:
    """The coded clip of ``base_bgr`` (lossless), checked to decode through ``file:`` input's
    own reader to exactly ``CLIP_FRAMES`` frames, frame k = the base with code k: the
    judgement relies on both (an input frame's pixels are known, and a looping input keeps
    index ≡ code)."""
    from livecam.capture.sources import FileSource

    h, w = base_bgr.shape[:2]
    box = code_box((w, h))
    frame_code.write_coded_clip(path, base_bgr, n_frames=CLIP_FRAMES, fps=CLIP_FPS, bits=BITS,
                                box_xyxy=box)
    source = FileSource(path=path, max_pixels=w * h)
    source.open()
    try:
        n = 0
        while (image := source.read()) is not None:
            if n % 97 == 0:  # a sample is enough to catch a lossy or shifted decode
                assert np.array_equal(image, frame_code.draw_code(base_bgr, n, bits=BITS,
                                                                  box_xyxy=box)), n
            n += 1
    finally:
        source.close()
    assert n == CLIP_FRAMES and source.fps == CLIP_FPS
    return path


@dataclass(frozen=True)
class Applied:
    """What a command's reply says: its label (the look it should give), the frames the
    output had sent and the first captured frame processed under it."""

    look: str
    frames_sent: int
    first_index: int


@dataclass
class SentFrames:
    """The frames a virtual camera received, in send order, reduced as the module says.
    ``add`` them as they arrive (any one thread)."""

    base_bgr: np.ndarray
    face_box: BoxXYXY
    codes: list[int | None] = field(default_factory=list)
    unswapped: list[bool] = field(default_factory=list)
    covered: list[bool] = field(default_factory=list)
    faces: list[np.ndarray] = field(default_factory=list)

    def __post_init__(self) -> None:
        h, w = self.base_bgr.shape[:2]
        self.box = code_box((w, h))
        face_right, face_bottom = self.face_box[2:]
        code_left, code_top = self.box[:2]
        assert face_right < code_left or face_bottom < code_top, "the code would cover the face"
        x1, y1, x2, y2 = self.face_box
        self.real_detail = _detail(self.base_bgr[y1:y2, x1:x2])
        assert self.real_detail > 0, "the real face has no detail to tell a cover by"

    def add(self, frame_bgr: np.ndarray) -> None:
        code = frame_code.read_code(frame_bgr, bits=BITS, box_xyxy=self.box)
        self.codes.append(code)
        same = code is not None and np.array_equal(
            frame_bgr, frame_code.draw_code(self.base_bgr, code, bits=BITS, box_xyxy=self.box))
        self.unswapped.append(same)
        x1, y1, x2, y2 = self.face_box
        face = frame_bgr[y1:y2, x1:x2].copy()
        self.covered.append(not same and _detail(face) < COVER_DETAIL_SHARE * self.real_detail)
        self.faces.append(face)

    def __len__(self) -> int:
        return len(self.codes)

    def indices(self) -> list[int | None]:
        """Input index of each frame sent (None: no code, i.e. the black frames before the
        first real one). Frames are never reordered, so the codes unwrap in send order."""
        coded = [c for c in self.codes if c is not None]
        unwrapped = iter(frame_code.unwrap(coded, bits=BITS))
        return [None if c is None else next(unwrapped) for c in self.codes]

    def newest_index(self) -> int:
        """The largest input index sent so far (-1 before the first)."""
        return max((i for i in self.indices() if i is not None), default=-1)

    def shown_since(self, first_index: int, look: str) -> int:
        """Frames sent of input index ``first_index`` or later that show a face of ``look``'s
        kind: the real one for ``REAL``, else a swapped one, not covered (which identity is
        :func:`judge`'s to tell). A test waits on this before judging a command: an identity
        may be covered for any number of frames while it loads."""
        want_real = look == REAL
        return sum(1 for k, i in enumerate(self.indices())
                   if i is not None and i >= first_index and not self.covered[k]
                   and self.unswapped[k] == want_real)


class SentWatcher:
    """Waits on the frames a camera received: a subclass's ``poll`` adds those that came since
    its last call to ``sent``; ``context`` adds to a failed wait's message (a process's
    stderr, say). Polls every ``poll_s``; the deadlines are only guards."""

    poll_s = 0.05

    def __init__(self, sent: SentFrames) -> None:
        self.sent = sent

    def poll(self) -> None:
        raise NotImplementedError

    def context(self) -> str:
        return ""

    def wait_for_index(self, index: int, timeout_s: float = 180) -> None:
        """Until a frame of input index ``index`` or later was sent."""
        self._wait(lambda: self.sent.newest_index() >= index,
                   lambda: f"no input frame {index} sent within {timeout_s} s "
                   f"(newest {self.sent.newest_index()})", timeout_s)

    def wait_shown(self, applied: Applied, frames: int = 8, timeout_s: float = 180) -> None:
        """Until ``frames`` frames captured under ``applied`` were sent showing its look
        uncovered (:meth:`SentFrames.shown_since`): a new identity is covered while it
        loads, for as many frames as the host's load makes that."""
        self._wait(lambda: self.sent.shown_since(applied.first_index, applied.look) >= frames,
                   lambda: f"{applied} not shown in {frames} frames within {timeout_s} s "
                   f"({self.sent.shown_since(applied.first_index, applied.look)} so far)",
                   timeout_s)

    def _wait(self, done: Callable[[], bool], why: Callable[[], str], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            self.poll()
            if done():
                return
            assert time.monotonic() < deadline, f"{why()}{self.context()}"
            time.sleep(self.poll_s)


def judge(sent: SentFrames, commands: list[Applied], *, initial: str, threads: int
          ) -> dict[str, object]:
    """Assert the switching properties (module docstring) and return a small report.

    Looks are told apart in the face region: ``REAL`` is the input frame itself, pixel for
    pixel; ``COVERED`` a face without its fine detail; an identity's look is the median face
    of the swapped, uncovered frames that must show it (from its command's first frame to the
    next command's), and such a frame shows the identity whose look its face is nearest to.
    Call it once every command's look was shown (:meth:`SentFrames.shown_since`)."""
    indices = sent.indices()
    bounds = [c.first_index for c in commands]
    assert bounds == sorted(bounds), f"first_frame_index went backwards: {bounds}"

    def command_of(index: int) -> Applied | None:
        """The command in force for input frame ``index`` (None: before the first)."""
        in_force = None
        for c in commands:
            if index >= c.first_index:
                in_force = c
        return in_force

    def expected(index: int) -> str:
        c = command_of(index)
        return initial if c is None else c.look

    # (send position, input index) of every frame that carries a code
    coded = [(k, i) for k, i in enumerate(indices) if i is not None]
    assert coded, "no frame with a frame code was sent"
    for c in commands:
        assert any(i >= c.first_index for _, i in coded), f"{c} never took effect"
    # the look of each identity, from the uncovered swapped frames that must show it
    references: dict[str, np.ndarray] = {}
    for c in commands:
        if c.look != REAL and c.look not in references:
            faces = [sent.faces[k] for k, i in coded if expected(i) == c.look
                     and not sent.unswapped[k] and not sent.covered[k]]
            assert faces, f"{c.look} was never shown (only covered or real faces)"
            references[c.look] = np.median(np.stack(faces), axis=0).astype(np.float32)
    first = coded[0][0]
    if sent.unswapped[first]:
        references_and_real = {**references, REAL: sent.faces[first].astype(np.float32)}
    else:
        references_and_real = dict(references)
    for a in references:
        for b, other in references_and_real.items():
            if b != a:
                diff = float(np.abs(references[a] - other).mean())
                assert diff > 5, f"{a} and {b} look alike (mean difference {diff:.1f})"

    def look_of(k: int) -> str:
        if sent.unswapped[k]:
            return REAL
        if sent.covered[k]:
            return COVERED
        if not references:
            return "changed"
        face = sent.faces[k].astype(np.float32)
        return min(references, key=lambda name: float(np.abs(face - references[name]).mean()))

    looks = [(k, i, look_of(k)) for k, i in coded]
    # an identity's first input frame shown uncovered: the cover is allowed only before it
    shown_from: dict[Applied, int] = {}
    for _, i, look in looks:
        c = command_of(i)
        if c is not None and look == c.look:
            shown_from[c] = min(i, shown_from.get(c, i))

    def allowed(i: int, look: str) -> bool:
        """The expected look, or the cover in an identity's first frames (before it shows)."""
        want = expected(i)
        if look == want:
            return True
        c = command_of(i)
        if look != COVERED or want == REAL or c is None:
            return False
        return i < shown_from.get(c, i + 1)

    wrong = [(k, i, look, expected(i)) for k, i, look in looks if not allowed(i, look)]
    assert not wrong, ("(send position, input index, shows, should show) of frames in the "
                       f"wrong state: {wrong[:12]}; commands {commands}")
    # frames taken before a command that were sent after it: bounded by construction
    in_flight = [len({i for k, i in coded if k >= c.frames_sent and i < c.first_index})
                 for c in commands]
    bound = in_flight_bound(threads)
    assert max(in_flight) <= bound, (in_flight, bound)
    return {"old_frames_sent_after_apply": in_flight, "bound": bound,
            "frames_sent": len(sent), "frames_coded": len(coded),
            "covered_at_switch": [sum(1 for _, i, look in looks
                                      if look == COVERED and command_of(i) == c)
                                  for c in commands]}


def _detail(face_bgr: np.ndarray) -> float:
    """Mean absolute Laplacian of the face's grey levels: fine detail, which a cover removes."""
    import cv2

    grey = cv2.cvtColor(np.ascontiguousarray(face_bgr).astype(np.uint8), cv2.COLOR_BGR2GRAY)
    return float(np.abs(cv2.Laplacian(grey.astype(np.float32), cv2.CV_32F)).mean())
