"""Commands: the only way runtime state changes during a run.

Every source of control (hotkeys, the control API, signals, the preview window) produces these
objects and puts them on one :class:`CommandQueue`; the pipeline thread drains it between frames
and applies each command to the current :class:`~livecam.core.types.RuntimeState`.

``apply`` is always pure. A few commands also act on the world outside the state (reload the
identity library and config, save a snapshot, quit); they implement :class:`EffectCommand` and
the scheduler calls their ``perform(hooks)`` with the app's :class:`ControlHooks` before
applying them. Keeping the two apart means every state transition is unit-testable with plain
values, and every side effect is in one named hook.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import PurePath
from typing import Protocol, runtime_checkable

from livecam.core.reload_result import ReloadResult
from livecam.core.types import RuntimeState

#: The longest A/V delay (``output.delay_ms``): the output holds that many ms of frames.
MAX_OUTPUT_DELAY_MS = 2000.0
#: The most per-track identities kept at once. Tracks come and go (each new person, or one
#: lost and found again, is a new track id) and an assignment outlives its track, so without a
#: bound a script assigning in a loop would grow the state, and every status document, forever.
MAX_TRACK_ASSIGNMENTS = 64


class Command(Protocol):
    """A change of runtime state. ``apply`` is pure: it returns the new state."""

    def apply(self, state: RuntimeState) -> RuntimeState: ...


class ControlHooks(Protocol):
    """Side effects the app performs for commands (implemented by :class:`livecam.app.App`).

    Called on the pipeline thread between frames, so each must return quickly: slow work
    (re-reading the identity library, opening new stages) is started in the background.
    """

    def request_reload(self, result: ReloadResult | None = None) -> None:
        """Re-read the config file and the identity library, then swap in new stages; tell
        ``result`` (joined at once, before returning) how that ended."""
        ...

    def save_snapshot(self, path: str) -> None:
        """Write the last frame sent to the output to ``path`` (PNG or JPEG by suffix)."""
        ...

    def set_output_delay(self, delay_ms: float) -> None:
        """Hold frames so capture→output takes ``delay_ms`` from the next frame on."""
        ...


@runtime_checkable
class EffectCommand(Protocol):
    """A command with a side effect outside the runtime state."""

    def perform(self, hooks: ControlHooks) -> None: ...

    def apply(self, state: RuntimeState) -> RuntimeState: ...


def _bump(state: RuntimeState, **changes: object) -> RuntimeState:
    return replace(state, generation=state.generation + 1, **changes)  # type: ignore[arg-type]


@dataclass(frozen=True)
class SelectIdentity:
    """Make ``name`` the active identity (None = swap nothing).

    Sources validate ``name`` against ``state.identities`` before queueing (the API answers 404
    for an unknown name); an identity removed in between simply swaps nothing.
    """

    name: str | None

    def apply(self, state: RuntimeState) -> RuntimeState:
        return _bump(state, active_identity=self.name)


@dataclass(frozen=True)
class SelectIdentityIndex:
    """Make the ``index``-th identity (0-based, in ``state.identities`` order) active.

    An index past the end changes nothing: hotkey 7 with five identities is a no-op, not an
    error, because the list can shrink under a reload while the key is held.
    """

    index: int

    def apply(self, state: RuntimeState) -> RuntimeState:
        if not 0 <= self.index < len(state.identities):
            return state
        return _bump(state, active_identity=state.identities[self.index])


@dataclass(frozen=True)
class StepIdentity:
    """Move ``step`` places through ``state.identities`` (+1 next, -1 previous), wrapping.

    From no identity (or one no longer in the list) +1 goes to the first, -1 to the last.
    """

    step: int

    def apply(self, state: RuntimeState) -> RuntimeState:
        names = state.identities
        if not names or self.step == 0:
            return state
        if state.active_identity in names:
            at = names.index(state.active_identity)
            new = names[(at + self.step) % len(names)]
        else:
            new = names[0] if self.step > 0 else names[-1]
        return _bump(state, active_identity=new)


@dataclass(frozen=True)
class SetBypass:
    """Send the real face through (True) or swap again (False)."""

    on: bool

    def apply(self, state: RuntimeState) -> RuntimeState:
        return _bump(state, bypass=self.on)


@dataclass(frozen=True)
class ToggleBypass:
    """Flip bypass (the hotkey's verb: one key turns it on and off)."""

    def apply(self, state: RuntimeState) -> RuntimeState:
        return _bump(state, bypass=not state.bypass)


@dataclass(frozen=True)
class AssignTrack:
    """Give track (person) ``track_id`` its own identity; ``name=None`` removes the assignment
    so the track follows ``active_identity`` again.

    At most :data:`MAX_TRACK_ASSIGNMENTS` are kept: sources refuse one more (the API answers
    409), and should one get through anyway (two clients at once), the assignment of the
    lowest track id, the oldest track, is dropped for it."""

    track_id: int
    name: str | None

    def apply(self, state: RuntimeState) -> RuntimeState:
        kept = tuple((tid, n) for tid, n in state.track_identities if tid != self.track_id)
        if self.name is not None:
            kept = tuple(sorted((*kept, (self.track_id, self.name))))
            kept = kept[max(0, len(kept) - MAX_TRACK_ASSIGNMENTS):]
        return _bump(state, track_identities=kept)


@dataclass(frozen=True)
class SetIdentityList:
    """Replace the known identity names (queued by a reload once the library has been read).

    The active identity and track assignments are kept even when their name disappeared: the
    swap stage then passes those faces through, and the status shows the name as missing, which
    is less surprising mid-stream than jumping to another face.
    """

    names: tuple[str, ...]

    def apply(self, state: RuntimeState) -> RuntimeState:
        return _bump(state, identities=tuple(self.names))


@dataclass(frozen=True)
class Reload:
    """Re-read the config file and the identity library (SIGHUP, ``livecam ctl reload``).
    ``result`` (the control API's) learns how the reload ended; SIGHUP passes none."""

    result: ReloadResult | None = field(default=None, compare=False, repr=False)

    def perform(self, hooks: ControlHooks) -> None:
        hooks.request_reload(self.result)

    def apply(self, state: RuntimeState) -> RuntimeState:
        return state


@dataclass(frozen=True)
class SaveSnapshot:
    """Save the last output frame to ``path`` (chosen by the source so it can report it).
    Where a process runs several streams, stream K saves to :func:`stream_snapshot_path`
    (``path`` and K): one command to every stream leaves one file per stream."""

    path: str

    def perform(self, hooks: ControlHooks) -> None:
        hooks.save_snapshot(self.path)

    def apply(self, state: RuntimeState) -> RuntimeState:
        return state


def stream_snapshot_path(path: str, stream: int | None) -> str:
    """Where stream ``stream`` of a process saves :class:`SaveSnapshot` ``path``: ``path``
    itself for a process's only stream (None), else with ``-streamK`` before the suffix."""
    if stream is None:
        return path
    p = PurePath(path)
    return str(p.with_name(f"{p.stem}-stream{stream}{p.suffix}"))


@dataclass(frozen=True)
class SetOutputDelay:
    """Change the A/V delay (``output.delay_ms``) live: every frame is sent ``delay_ms`` after
    its capture (or as soon as it is ready when the stages take longer), so a microphone
    captured elsewhere can be delayed by the same fixed amount in OBS. Sources validate
    ``delay_ms`` (0 to ``MAX_OUTPUT_DELAY_MS``) before queueing."""

    delay_ms: float

    def perform(self, hooks: ControlHooks) -> None:
        hooks.set_output_delay(self.delay_ms)

    def apply(self, state: RuntimeState) -> RuntimeState:
        return state


@dataclass(frozen=True)
class Quit:
    """Stop the run after the current frame (handled by the scheduler itself)."""

    def apply(self, state: RuntimeState) -> RuntimeState:
        return state


class Ticket:
    """Returned by :meth:`CommandQueue.put`: lets the sender wait until its command took effect.

    ``state`` is the runtime state right after the command was applied. ``first_frame_index``
    is the ``Frame.index`` from which on captured frames are processed under it: every frame
    with a smaller index was taken under the old state, every frame from it on (frames are
    never reordered) under the new one, whatever the load. ``frames_sent`` is the number of
    frames the output had sent at that moment; frames taken before the command that were still
    between the stages and the sink go out after it. The control API reports all three; the
    switching tests judge the output frames against ``first_frame_index``. ``error`` says why
    the command's side effect failed (a snapshot that could not be written), None when it did
    not.
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []
        self.state: RuntimeState | None = None
        self.frames_sent = -1
        self.first_frame_index = -1
        self.error: str | None = None

    def resolve(self, state: RuntimeState, *, frames_sent: int, first_frame_index: int,
                error: str | None = None) -> None:
        """Called by the pipeline thread once the command is applied."""
        self.state, self.frames_sent = state, frames_sent
        self.first_frame_index = first_frame_index
        self.error = error
        with self._lock:
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def add_done_callback(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` once applied: at once if it already is, else on the pipeline
        thread (so it must only hand over, e.g. ``loop.call_soon_threadsafe``). Lets an event
        loop wait for a command without parking a thread on :meth:`wait`."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)
                return
        callback()

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until applied (True) or ``timeout_s`` passed (False). Any thread may call."""
        return self._event.wait(timeout_s)


class Commands(Protocol):
    """Where control sources put commands: one stream's :class:`CommandQueue`, or every
    stream's (:class:`CommandFanOut`). Any thread may call ``put``."""

    def put(self, command: Command, *, timeout_s: float = 1.0) -> Ticket: ...


class CommandQueue:
    """Thread-safe FIFO of commands; any thread may ``put``, the pipeline thread drains it."""

    def __init__(self, maxsize: int = 256) -> None:
        self._queue: queue.Queue[tuple[Command, Ticket]] = queue.Queue(maxsize=maxsize)
        self._closed = False

    def close(self) -> None:
        """Its pipeline has ended: nothing will drain it (any thread)."""
        self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed

    def put(self, command: Command, *, timeout_s: float = 1.0) -> Ticket:
        """Queue ``command``; raises ``queue.Full`` after ``timeout_s`` (0 = at once) if the
        pipeline is not draining."""
        ticket = Ticket()
        self._queue.put((command, ticket), block=timeout_s > 0, timeout=timeout_s or None)
        return ticket

    def drain(self) -> list[tuple[Command, Ticket]]:
        """Everything queued so far, oldest first (pipeline thread)."""
        out: list[tuple[Command, Ticket]] = []
        while True:
            try:
                out.append(self._queue.get_nowait())
            except queue.Empty:
                return out


class CommandFanOut:
    """The commands of several streams in one process, as one queue: ``put`` queues the
    command on every running stream's :class:`CommandQueue` (hotkeys, SIGHUP, and the control
    API without a stream act on all of them; a stream that has ended, whose queue is closed,
    is left out, so nobody waits for it). Any thread may ``put``."""

    def __init__(self, queues: Sequence[CommandQueue]) -> None:
        if not queues:
            raise ValueError("a command fan-out needs at least one queue")
        self.queues = tuple(queues)

    def put(self, command: Command, *, timeout_s: float = 1.0) -> Ticket:
        """Queue ``command`` on every running stream; the ticket resolves once each of them
        applied it, with the first one's state and frame count (with every stream ended it
        goes to the first queue and never resolves: the control API refuses before). Raises
        ``queue.Full`` as :meth:`CommandQueue.put` does (streams queued before it keep the
        command)."""
        running = [q for q in self.queues if not q.closed] or list(self.queues[:1])
        tickets = [q.put(command, timeout_s=timeout_s) for q in running]
        if len(tickets) == 1:
            return tickets[0]
        joint = Ticket()
        left = [len(tickets)]
        lock = threading.Lock()

        def one_done() -> None:
            with lock:
                left[0] -= 1
                last = left[0] == 0
            if last:
                first = tickets[0]
                assert first.state is not None
                errors = [t.error for t in tickets if t.error is not None]
                joint.resolve(first.state, frames_sent=first.frames_sent,
                              first_frame_index=first.first_frame_index,
                              error=errors[0] if errors else None)

        for ticket in tickets:
            ticket.add_done_callback(one_done)
        return joint
