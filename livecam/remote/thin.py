"""The thin client's one stage (``livecam run --remote URL``): camera frames go to a ``livecam
serve`` over WHIP, the swapped frames that come back go to the local output.

:class:`RemoteSwapStage` hands each frame to a WHIP session run on its own thread and event
loop (newest frame only: a slow link drops frames, it never queues them) and returns the
newest swapped frame received. It never returns the camera frame itself: before the first
swapped frame, and whenever none came for ``stall_s`` (the link dropped or stalled), it returns
the **cover frame** (a dark card saying what happened) while the session is re-made with
backoff (0.5 s doubling to 10 s). ``health()`` (in ``livecam ctl status`` as
``remote_engines``, and on the status line) says whether the link is up, how often it was
re-made and the last error.

**Controls act on the remote session.** The local run's hotkeys, preview keys and ``livecam
ctl`` change the local runtime state as always; each frame's state (its active identity and
bypass) is compared with what the session was told, and a change is posted to the session's
Location (``POST /whip/ID/command``, :mod:`livecam.remote.session_api`). Once a session sends
its first swapped frame, the server's identity names replace the local list (``SetIdentityList``
on the commands given to :meth:`RemoteSwapStage.bind`), so ``select 2`` and next/previous
step through the server's identities; a re-made session is told the identity and bypass the
local state holds.

**A photo as the session's identity** (``photo``: ``livecam run --remote URL --source
PHOTO``): each new session sends it (``POST /whip/ID/photo``) before anything else; the
server builds the identity and the session uses it. A re-made session first sends only the
photo's sha256; the bytes go again only when the server no longer holds them (it restarted,
or ``advanced.serve.photo_keep_s`` passed). ``health()``'s ``photo_bytes_sent`` counts what
went. Locally it is called ``photo_alias``
("source", as for a local ``--source``), whatever name the server gave it. A refused photo
(too large, not a JPEG/PNG, no usable face) is the ``refused`` state with the server's reason:
the output keeps the cover, never another face or the camera.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import threading
import time
from typing import Any

import cv2
import numpy as np

from livecam.core.backoff import Backoff
from livecam.core.commands import Command, Commands, SelectIdentity, SetIdentityList
from livecam.core.stage import StageBase
from livecam.core.types import ImageBGR, Packet, ReceivedI420
from livecam.remote.client import FrameFeed, PlanesI420, WhipClient, WhipError

log = logging.getLogger(__name__)

_BACKOFF_S = (0.5, 10.0)  # first and longest wait between sessions


def cover_frame(size_px: tuple[int, int], text: str) -> ImageBGR:
    """A dark (H, W, 3) uint8 card with ``text``: what the output shows while no swapped frame
    is at hand (never the camera)."""
    w, h = size_px
    image = np.zeros((h, w, 3), np.uint8)
    scale = max(0.4, w / 1600)
    cv2.putText(image, text, (max(8, w // 20), h // 2), cv2.FONT_HERSHEY_SIMPLEX, scale,
                (200, 200, 200), max(1, round(scale * 2)), cv2.LINE_AA)
    return image


class RemoteSwapStage(StageBase):
    """See the module docstring. ``process``: the pipeline thread; ``health``: any thread."""

    name = "remote"
    backend = "whip"
    #: the encoder sends a camera frame's own I420 planes (:func:`~livecam.core.stage.
    #: source_i420_wanted`), with no conversion from BGR
    takes_source_i420 = True

    def __init__(self, url: str, token: str, *, fps: float, stall_s: float = 1.0,
                 identity: str | None = None, photo: tuple[bytes, str] | None = None,
                 photo_alias: str = "source") -> None:
        self.url = url
        self._photo = photo
        self._alias = photo_alias
        self._photo_name: str | None = None  # the current session's name for the photo
        self._photo_sha256 = hashlib.sha256(photo[0]).hexdigest() if photo is not None else ""
        self._photo_bytes_sent = 0  # request bodies of the photo calls, all sessions
        self._token = token
        self._fps = fps
        self._stall_s = stall_s
        self._feed = FrameFeed(fps=fps)
        self._lock = threading.Lock()
        self._newest: ImageBGR | None = None
        self._newest_planes: PlanesI420 | None = None  # its I420 planes, as decoded
        self._t_newest = 0.0
        self._state = "connecting"
        self._error = ""
        self._connects = 0
        self._covered = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._cover: ImageBGR | None = None
        # what the local state wants (pipeline thread writes, loop reads; under _lock)
        self._wanted: tuple[str | None, bool] = (identity, False)
        self._local_names: tuple[str, ...] = ()
        self._server_names: tuple[str, ...] = ()  # in local form (the photo's alias)
        self._t_names = 0.0  # when the local list was last set to them
        self._told: tuple[str | None, bool] = (None, False)  # what the session was told
        self._location: str | None = None
        self._wake: asyncio.Event | None = None
        self._commands: Commands | None = None

    def bind(self, commands: Commands) -> None:
        """The local run's commands (any thread may put): the server's identity names and
        the session's identity go there. Call before :meth:`open`."""
        self._commands = commands

    def open(self) -> None:
        self._thread = threading.Thread(target=self._run, name="livecam-remote", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(5.0)
            self._thread = None

    def process(self, packet: Packet) -> Packet:
        image = packet.image_bgr
        # the camera's own planes, where the source decoded them (takes_source_i420)
        self._feed.put(image, packet.planes_i420())
        wanted = (packet.state.active_identity, packet.state.bypass)
        now = time.monotonic()
        with self._lock:
            self._local_names = packet.state.identities
            changed, self._wanted = wanted != self._wanted, wanted
            names = self._server_names
            # a reload (`livecam ctl reload`, SIGHUP) lists this machine's library: the
            # server's names again (at most once a second while the command is on its way)
            restore = bool(names) and names != packet.state.identities and (
                now - self._t_names > 1.0)
            if restore:
                self._t_names = now
        if restore:
            self._put(SetIdentityList(names))
        if changed:
            loop, wake = self._loop, self._wake
            if loop is not None and wake is not None:
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                    loop.call_soon_threadsafe(wake.set)
        h, w = image.shape[:2]
        with self._lock:
            newest, t_newest, state = self._newest, self._t_newest, self._state
            planes = self._newest_planes
        if newest is None or time.monotonic() - t_newest > self._stall_s:
            self._covered += 1
            why = {"connected": "stalled"}.get(state, state)
            if self._cover is None or self._cover.shape[:2] != (h, w):
                self._cover = cover_frame((w, h), f"livecam: remote swap {why}...")
            return packet.with_fields(image_bgr=self._cover)
        if newest.shape[:2] != (h, w):
            newest = np.ascontiguousarray(cv2.resize(newest, (w, h)), dtype=np.uint8)
            planes = None
        received = None if planes is None else ReceivedI420(newest, planes)
        return packet.with_fields(image_bgr=newest, received_i420=received)

    def health(self) -> dict[str, Any]:
        waits = self._feed.send_waits_ms()
        with self._lock:
            age = time.monotonic() - self._t_newest if self._newest is not None else None
            return {"url": self.url, "state": self._state, "sessions_made": self._connects,
                    "covered_frames": self._covered, "last_error": self._error,
                    "last_frame_age_s": None if age is None else round(age, 3),
                    "session": self._location, "identity": self._told[0],
                    "bypass": self._told[1], "photo_bytes_sent": self._photo_bytes_sent,
                    "send_wait_ms": round(float(np.median(waits)), 2) if waits else None,
                    "repeats_sent": self._feed.repeats}

    def _set(self, state: str, error: str | None = None) -> None:
        with self._lock:
            if state != self._state:
                log.info("remote swap %s: %s%s", self.url, state,
                         f" ({error})" if error else "")
            self._state = state
            if error is not None:
                self._error = error

    def _run(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(self._sessions())
        finally:
            loop.close()

    async def _sessions(self) -> None:
        """Make the session, take its frames; on a drop or stall make it again, with backoff."""
        waits = Backoff(*_BACKOFF_S)
        self._wake = asyncio.Event()
        while not self._stopping.is_set():
            client = WhipClient(self._offer_url(), self._token, self._feed, timeout_s=10.0)
            first = asyncio.Event()
            control: asyncio.Task[None] | None = None
            try:
                await client.connect()
                self._connects += 1
                with self._lock:
                    self._location = client.location
                if self._photo is not None:
                    await self._upload(client, *self._photo)
                self._set("connected")
                control = asyncio.ensure_future(self._control(client, first))
                got_one = False
                while not self._stopping.is_set():
                    try:
                        got = await client.received_with_planes(
                            timeout_s=max(self._stall_s * 3, 2.0) if got_one else 30.0)
                    except TimeoutError:
                        raise WhipError("no swapped frame came back in time (stalled)"
                                        ) from None
                    if got is None:
                        raise WhipError("the server ended the session")
                    image, planes = got
                    got_one = True
                    first.set()
                    waits.reset()
                    with self._lock:
                        self._newest, self._t_newest = image, time.monotonic()
                        self._newest_planes = planes
            except WhipError as exc:
                if exc.status in (401, 404, 413, 415, 422):
                    self._set("refused", str(exc))  # retrying will not help; still retried slowly
                    waits.slowest()
                else:
                    self._set("reconnecting", str(exc))
            except Exception as exc:  # aiortc's own failures: the link is down either way
                self._set("reconnecting", f"{type(exc).__name__}: {exc}")
            finally:
                if control is not None:
                    control.cancel()
                with self._lock:
                    self._location = None
                with contextlib.suppress(Exception):
                    await client.close()
            if self._stopping.is_set():
                return
            delay = waits.next_s()
            deadline = time.monotonic() + delay
            while time.monotonic() < deadline and not self._stopping.is_set():
                await asyncio.sleep(0.05)

    def _offer_url(self) -> str:
        """The WHIP URL with ``?identity=`` for the identity the local state wants, when the
        server is known to have it (or nothing is known yet: ``--identity`` at the start)."""
        from urllib.parse import urlencode, urlsplit, urlunsplit

        with self._lock:
            name, known = self._wanted[0], self._server_names
        if not name or (known and name not in known) or (
                self._photo is not None and name == self._alias):
            return self.url
        parts = urlsplit(self.url)
        query = "&".join(q for q in (parts.query, urlencode({"identity": name})) if q)
        return urlunsplit(parts._replace(query=query))

    async def _upload(self, client: WhipClient, data: bytes, content_type: str) -> None:
        """The photo to the new session as its identity: its sha256 first, its bytes when
        the server does not hold it (or answers the hash with anything but 200: an older
        server's 415 included); :class:`WhipError` (with the server's status) when refused."""
        body = {"sha256": self._photo_sha256}
        self._photo_bytes_sent += len(json.dumps(body))
        status, reply = await client.session_call("/photo", body)
        if status != 200:
            log.debug("remote photo by hash: %d %s; sending its bytes", status, reply)
            self._photo_bytes_sent += len(data)
            status, reply = await client.session_call("/photo", data=data,
                                                      content_type=content_type)
        if status != 200:
            raise WhipError(f"the server refused the photo ({status}): {reply}", status)
        with self._lock:
            self._photo_name = str(reply["identity"])
        for warning in reply.get("warnings", ()):
            log.warning("remote photo: %s", warning)

    def _local(self, name: str | None) -> str | None:
        """The local name of the server's identity ``name`` (the photo's is the alias)."""
        return self._alias if name is not None and name == self._photo_name else name

    def _server(self, name: str | None) -> str | None:
        """The server's name of the local identity ``name``."""
        return self._photo_name if self._photo is not None and name == self._alias else name

    def _put(self, command: Command) -> None:
        if self._commands is not None:
            with contextlib.suppress(Exception):  # a full or closed queue: the run is ending
                self._commands.put(command, timeout_s=0)

    async def _control(self, client: WhipClient, first: asyncio.Event) -> None:
        """Once the session's stream runs (its first swapped frame came back): the server's
        identity names to the local state, then the local state's identity and bypass to the
        session, at every change. Ends with the session."""
        try:
            await self._follow(client, first)
        except WhipError as exc:  # the link went down: the session loop sees it too
            log.debug("remote session controls ended: %s", exc)

    async def _follow(self, client: WhipClient, first: asyncio.Event) -> None:
        assert self._wake is not None
        await first.wait()
        status, state = await client.session_call()
        if status != 200:
            log.warning("remote session state not readable (%d): %s", status, state)
            return
        names = tuple(str(n) for n in state.get("identities", ()))
        told = (self._local(state.get("identity")), bool(state.get("bypass")))
        if self._photo_name in names:  # the photo first, as for a local --source
            names = (self._alias, *(n for n in names if n != self._photo_name))
        with self._lock:
            self._server_names, self._told = names, told
            local, wanted = self._local_names, self._wanted
        if names and names != local:
            with self._lock:
                self._t_names = time.monotonic()
            self._put(SetIdentityList(names))
        if wanted[0] is None and told[0] is not None:
            self._put(SelectIdentity(told[0]))  # the local state shows the session's identity
        refused: str | None = None  # a name the server does not have: asked once
        while True:
            self._wake.clear()
            with self._lock:
                wanted, told = self._wanted, self._told
            if wanted[0] not in (None, told[0], refused):
                ok = await self._tell(client, {"command": "select",
                                               "identity": self._server(wanted[0])})
                if ok:
                    told = (wanted[0], told[1])
                elif ok is None:
                    refused = wanted[0]
                    if told[0] is not None:  # back to what the session shows
                        self._put(SelectIdentity(told[0]))
            elif wanted[1] != told[1]:
                if await self._tell(client, {"command": "bypass", "on": wanted[1]}):
                    told = (told[0], wanted[1])
            else:
                await self._wake.wait()
                continue
            with self._lock:
                self._told = told

    async def _tell(self, client: WhipClient, body: dict[str, Any]) -> bool | None:
        """Post ``body`` to the session: True when taken, None when refused for good (an
        identity the server does not have: logged), False to try again shortly."""
        status, reply = await client.session_call("/command", body)
        if status == 200:
            log.info("remote session: %s", " ".join(f"{k}={v}" for k, v in body.items()
                                                     if k != "command") or body)
            return True
        if status == 404:
            log.warning("remote session refused %s: %s", body, reply)
            return None
        log.debug("remote session busy (%d): %s; retrying", status, reply)
        await asyncio.sleep(0.2)  # 409 before the stream started, 503 a full queue
        return False
