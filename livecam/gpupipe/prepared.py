"""Which compiled shapes the engine cache holds, so a start can say before it begins whether
it will compile, what and for about how long.

``livecam engines build`` opens the GPU pipeline as a start of one stream and as one of
several streams (:mod:`livecam.gpupipe.shapes`: the same shapes for any number of streams from
two up), which compiles every shape of the plan into the engine cache, then records the
shapes in ``prepared.json`` beside the compiled code, keyed by what the code depends on (this
livecam's source, torch's version, the device). A start that compiles a shape itself records
it too (:class:`StartRecorder`), so the next start finds it. A start compares its plan with
the record: what is missing will compile at this start, logged with an estimate of the time
before the first stage prepares anything (:func:`livecam.gpupipe.factory.start_check`).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from livecam.gpupipe.shapes import DYNAMIC, CompiledShape

log = logging.getLogger(__name__)

FILE = "prepared.json"

#: seconds one compile of each part takes on the H200 (the first start's log), a first
#: start's estimate; a part not listed counts as the default
COMPILE_S = {"face detector": 18.0, "face mesh": 8.0, "swap alignment": 5.0,
             "swap paste-back": 25.0, "generator": 90.0, "tile detector": 19.0}
DEFAULT_COMPILE_S = 20.0
#: a call compiled for any face count from two up (``2+``) against one static count: an
#: ESTIMATE, not measured (no GPU run of it yet): Inductor's dynamic-shape code costs more to
#: trace and generate than one static shape, assumed half as much again
DYNAMIC_COMPILE_FACTOR = 1.5


def environment_key(device: str) -> str:
    """What compiled code depends on besides the shapes: livecam's source, torch, the
    device."""
    import torch

    from livecam.gpupipe.networks.precompiled import source_digest

    name = device
    if device.startswith("cuda") and torch.cuda.is_available():
        name = f"{torch.cuda.get_device_name(torch.device(device))} " \
               f"sm{torch.cuda.get_device_capability(torch.device(device))}"
    return f"{source_digest()[:16]} torch {torch.__version__} {name}"


def _read(folder: Path, key: str) -> set[str]:
    try:
        data = json.loads((folder / FILE).read_text())
    except (OSError, ValueError):
        return set()
    if not isinstance(data, dict):
        return set()
    shapes = data.get(key, [])
    return {str(s) for s in shapes} if isinstance(shapes, list) else set()


def record(folder: Path, key: str, shapes: Iterable[CompiledShape]) -> int:
    """Add ``shapes`` to the record under ``key`` (written atomically); returns how many
    the record holds for ``key`` now."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        data = json.loads((folder / FILE).read_text())
        if not isinstance(data, dict):
            data = {}
    except (OSError, ValueError):
        data = {}
    held = sorted(_read(folder, key) | {str(s) for s in shapes})
    data[key] = held
    tmp = folder / f".{FILE}.{os.getpid()}.{threading.get_ident()}"
    try:
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, folder / FILE)
    except OSError:  # a full disk: no half-written file left behind, the record as it was
        tmp.unlink(missing_ok=True)
        raise
    return len(held)


def missing(folder: Path | None, key: str,
            shapes: Iterable[CompiledShape]) -> list[CompiledShape]:
    """The ``shapes`` the record does not hold (all of them without a record)."""
    held = _read(folder, key) if folder is not None else set()
    return [s for s in shapes if str(s) not in held]


def compile_estimate_s(shapes: Iterable[CompiledShape]) -> float:
    """About how long compiling ``shapes`` takes on a GPU like the H200, s."""
    return sum(COMPILE_S.get(s.part, DEFAULT_COMPILE_S)
               * (DYNAMIC_COMPILE_FACTOR if DYNAMIC in s.inputs else 1.0) for s in shapes)


def say_what_compiles(shapes: list[CompiledShape], *, n_streams: int, size: str,
                      model: str) -> None:
    """Log, before a start compiles anything, what it will compile and for how long."""
    if not shapes:
        log.info("GPU pipeline for %d stream(s) of %s: every compiled shape was prepared by "
                 "`livecam engines build`; nothing compiles", n_streams, size)
        return
    parts = sorted({s.part for s in shapes})
    log.warning("this start compiles %d shape(s) that the engine cache does not hold yet "
                "(%s): about %.0f s on an H200 before the output starts, once. Run "
                "`livecam engines build %s --size %s` once with this config to start in "
                "seconds", len(shapes), ", ".join(parts), compile_estimate_s(shapes), model,
                size)


class BuildProgress:
    """A :class:`~livecam.engines.compile_progress.CompileListener` for ``livecam engines
    build``: one line per compiled shape on ``out`` as it goes (``compiling 3/32: swap
    paste-back (16,1080,1920,3) 2 faces 640 px ... compiled 14.2 s``: the head when it starts,
    so a long compile shows what it is on, the time when it ends), counted against the
    ``planned`` shapes, and :meth:`summary` at the end. A shape met again (a second stream's
    part, already compiled in this process) is not counted twice."""

    def __init__(self, planned: Iterable[CompiledShape], out: Any) -> None:
        self.planned = list(dict.fromkeys(planned))
        self.out = out
        self.seen: dict[CompiledShape, tuple[str, float]] = {}
        self._open: CompiledShape | None = None
        self._t0 = time.perf_counter()

    def started(self, part: str, inputs: tuple[object, ...]) -> None:
        shape = CompiledShape(part, inputs)
        if shape in self.seen:
            return
        self._end_line()
        self.seen[shape] = ("", 0.0)
        total = max(len(self.planned), len(self.seen))
        extra = "" if shape in self.planned else " (not in the start's plan)"
        self.out.write(f"compiling {len(self.seen)}/{total}: {shape.describe()}{extra} ... ")
        self.out.flush()
        self._open = shape

    def finished(self, part: str, inputs: tuple[object, ...], how: str,
                 took_s: float) -> None:
        shape = CompiledShape(part, inputs)
        if shape != self._open:
            return
        self.seen[shape] = (how, took_s)
        self.out.write(f"{how} {took_s:.1f} s\n")
        self.out.flush()
        self._open = None

    def _end_line(self) -> None:
        if self._open is not None:  # a compile that never said it ended (it raised)
            self.out.write("stopped\n")
            self._open = None

    def summary(self) -> str:
        """The total: how many shapes, how they came, in how long; the planned ones not met
        (prepared before this build, in this process or by an earlier one)."""
        self._end_line()
        hows: dict[str, int] = {}
        for how, _ in self.seen.values():
            hows[how or "stopped"] = hows.get(how or "stopped", 0) + 1
        spent = sum(t for _, t in self.seen.values())
        ways = ", ".join(f"{n} {how}" for how, n in sorted(hows.items()))
        left = [s for s in self.planned if s not in self.seen]
        return (f"{len(self.seen)} of {len(self.planned)} planned shapes compiled or loaded "
                f"in {spent:.0f} s ({ways or 'none'}; {time.perf_counter() - self._t0:.0f} s "
                f"in all)" + (f"; {len(left)} already ready" if left else ""))


class StartRecorder:
    """Records each shape a start compiled or loaded (not one that failed: it runs
    uncompiled, and the next start tries again) under ``key`` in ``folder``'s record, as it
    finishes: a :class:`~livecam.engines.compile_progress.CompileListener` kept for the
    process (:func:`~livecam.engines.compile_progress.keep_recording`). Without it every
    start after a first one that compiled said it would compile again (16 streams on an
    H100: a start of 5.6 s announced "about 65 s")."""

    def __init__(self, folder: Path, key: str) -> None:
        self.folder = folder
        self.key = key
        self._failed = False

    def started(self, part: str, inputs: tuple[object, ...]) -> None:
        pass

    def finished(self, part: str, inputs: tuple[object, ...], how: str,
                 took_s: float) -> None:
        if how == "failed" or self._failed:
            return
        try:
            record(self.folder, self.key, [CompiledShape(part, inputs)])
        except OSError as exc:  # a full or read-only disk: the next start announces it again
            self._failed = True
            log.info("could not record the compiled %s in %s (%s)", part, self.folder, exc)
