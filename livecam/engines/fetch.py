"""Download a model from its manifest's sources: progress, resume, verify, never trust.

The download goes to ``<file>.part``; an interrupted download resumes with an HTTP Range request
(from this run's retries or a later ``livecam models fetch``). Only the process that holds the
model's download lock (:meth:`ModelStore.download_lock`) writes the ``.part``, so a second fetch
of the same model waits for the first; the file moves into place with its stamp under the
model's lock (:meth:`ModelStore.install`). A file is installed only when its
size and its sha256 are both right: the sha256 must be a published one or the user's pin, and
the size the manifest's or the server's (a connection that closes early looks like a complete
file when the server sent no length). A model with neither a published hash nor a pin is
fetched only with ``trust`` (the user vouches for the source; its hash is then pinned), and
then only when the size is known. A file that does not verify is moved aside (see
:meth:`ModelStore.quarantine`) and the next source is tried.

The standard library's ``urllib`` does the HTTP: what makes a download safe is the policy above,
which no download library applies for us (pooch, for one, checks a hash but cannot resume).
"""

from __future__ import annotations

import http.client
import logging
import math
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from livecam import __version__
from livecam.core.backoff import Backoff
from livecam.core.errors import ModelError
from livecam.core.files import make_folder
from livecam.engines.model_hash import CHUNK_BYTES, Hashed, ProgressFn, hash_file
from livecam.engines.store import ModelBusyError, ModelStore

log = logging.getLogger(__name__)

_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")


def download(url: str, part_path: Path, *, progress: ProgressFn | None = None,
             timeout_s: float = 30.0, expected_size: int | None = None) -> int | None:
    """Download ``url`` into ``part_path``, resuming from its current length if it exists.

    Returns the file's full size when the manifest (``expected_size``) or the server
    (Content-Length, Content-Range) said it, None when nobody did: then a connection closed
    early cannot be told from the end of the file. Raises ``OSError``/``HTTPException`` on
    network failures and on a download shorter than the known size (the partial file is kept
    so the next call resumes).
    """
    make_folder(part_path.parent, "advanced.models.dir")
    offset = part_path.stat().st_size if part_path.exists() else 0
    if expected_size is not None and offset == expected_size:
        return expected_size
    if expected_size is not None and offset > expected_size:
        part_path.unlink()
        offset = 0
    headers = {"User-Agent": f"livecam/{__version__}"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    request = urllib.request.Request(url, headers=headers)
    try:
        response = urllib.request.urlopen(request, timeout=timeout_s)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and offset:  # nothing left to send: the part may be whole
            return expected_size
        raise
    with response:
        total: int | None
        if offset and response.status == 206:
            match = _CONTENT_RANGE.match(response.headers.get("Content-Range", ""))
            if not match or int(match.group(1)) != offset:
                raise http.client.HTTPException(f"{url}: server sent a range we did not ask for")
            total = int(match.group(3)) if match.group(3) != "*" else None
            mode = "ab"
        else:  # the server ignored Range (200): start over
            offset, mode = 0, "wb"
            length = response.headers.get("Content-Length")
            total = int(length) if length is not None else None
        done = offset
        with part_path.open(mode) as f:
            for block in iter(lambda: response.read(CHUNK_BYTES), b""):
                f.write(block)
                done += len(block)
                if progress is not None:
                    progress(done, total)
        total = expected_size if expected_size is not None else total
        if total is not None and done < total:
            raise http.client.IncompleteRead(b"", total - done)
        return total


def fetch_model(store: ModelStore, name: str, *, progress: ProgressFn | None = None,
                retries: int = 3, timeout_s: float = 30.0, trust: bool = False,
                backoff_s: float = 0.5) -> Path:
    """Fetch model ``name`` into ``store`` and verify it; returns the installed path.

    Each source is tried in order, each up to ``retries`` times (resuming), waiting
    ``backoff_s``, then twice that, between tries; a host name that does not resolve is not
    tried again. Raises
    :class:`ModelError` listing what every source did when none gives a verified file, and
    :class:`UsageError` before downloading a model nothing can check unless ``trust``.
    """
    manifest = store.manifest(name)
    store.tidy()  # what killed imports and fetches left
    # the .part is written only by the holder of this lock: a second fetch waits, then finds
    # the model installed (a process killed while it holds it leaves its .part to resume)
    with store.download_lock(name):
        target, part = store.path(name), store.partial_path(name)
        expected = store.expected_sha256(name)
        if target.is_file() and expected:
            try:
                store.verify(name, force=True, progress=progress)
                log.info("model %s is already installed and verified at %s", name, target)
                part.unlink(missing_ok=True)  # never to be resumed: the model is there
                return target
            except ModelBusyError:
                raise  # another process holds the model: says nothing about the file
            except ModelError as exc:
                log.warning("%s", exc)  # moved aside; fetch a fresh copy
        if not expected and not trust:
            raise store.unpinned_error(name, "the download")
        failures: list[str] = []
        # a .part left by an earlier run belongs to the first source: keep it to resume
        previous_sha = manifest.sources[0].sha256 if manifest.sources else None
        for source in manifest.sources:
            if part.exists() and previous_sha != source.sha256:
                part.unlink()  # a partial file of another source's bytes cannot be resumed
            previous_sha = source.sha256
            problem = _fetch_source(store, name, source.url, source.sha256, source.size_bytes,
                                    progress=progress, retries=retries, timeout_s=timeout_s,
                                    backoff_s=backoff_s)
            if problem is None:
                return target
            failures.append(f"{source.url}: {problem}")
        raise ModelError(f"could not fetch model {name}: " + "; ".join(failures) +
                         f". Download it yourself and run `livecam models import {name} PATH`")


def _fetch_source(store: ModelStore, name: str, url: str, published: str | None,
                  size_bytes: int | None, *, progress: ProgressFn | None, retries: int,
                  timeout_s: float, backoff_s: float) -> str | None:
    """Download ``url`` into the ``.part`` and install it (caller holds the download lock);
    None when installed, else why not."""
    part = store.partial_path(name)
    waits = Backoff(backoff_s, math.inf)  # a network that hiccuped, a busy server
    for attempt in range(1, retries + 1):
        try:
            size = download(url, part, progress=progress, timeout_s=timeout_s,
                            expected_size=size_bytes)
            break
        except (OSError, http.client.HTTPException) as exc:
            host = _unresolved_host(url, exc)
            if host is not None:  # asking again at once resolves nothing
                log.warning("download of %s failed: %s does not resolve (no network, or "
                            "a wrong address): not retried", url, host)
                return f"{host} does not resolve: check the network and the address"
            log.warning("download of %s failed (attempt %d of %d): %s", url, attempt, retries,
                        exc)
            if attempt == retries:
                return str(exc)
            time.sleep(waits.next_s())
    hashed, problem = _check_download(store, name, published, part, size)
    if problem is not None:
        return problem

    def admit(hashed: Hashed) -> None:
        expected = store.expected_sha256(name)
        if not expected:  # trusted, size known: pin what came
            store.set_pin(name, hashed.sha256, url)
        elif hashed.sha256 not in expected:  # another process pinned another copy meanwhile
            raise ModelError(f"sha256 {hashed.sha256} is no longer accepted: model {name} "
                             f"was pinned to {', '.join(sorted(expected))} meanwhile")

    try:
        store.install(name, part, hashed, admit=admit)
    except ModelBusyError:
        raise  # the download is good: kept, for the next fetch to install
    except ModelError as exc:
        if part.exists():
            store.quarantine(part, hashed.sha256)
        return str(exc)
    return None


def _unresolved_host(url: str, exc: BaseException) -> str | None:
    """The host of ``url`` when ``exc`` says its name did not resolve, else None."""
    reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if not isinstance(reason, socket.gaierror):
        return None
    return urllib.parse.urlsplit(url).hostname or url


def _check_download(store: ModelStore, name: str, published: str | None, part: Path,
                    size: int | None) -> tuple[Hashed, str | None]:
    """(the hash of the downloaded ``part``, why it must not be installed or None). A bad
    file is moved aside."""
    hashed = hash_file(part)
    got, digest = hashed.identity["size"], hashed.sha256
    expected = {published} if published else store.expected_sha256(name)
    if not expected and size is None:
        # nothing to check the bytes against and no size: a download cut short would pass
        part.unlink()
        return hashed, ("the server did not send the file's size and no sha256 is known, so a "
                        "download cut short cannot be told from a whole one (not installed)")
    if size is not None and got != size:
        moved = store.quarantine(part, digest)
        return hashed, f"{got} bytes instead of {size} (file moved to {moved})"
    if expected and digest not in expected:
        moved = store.quarantine(part, digest)
        return hashed, (f"sha256 {digest} does not match {', '.join(sorted(expected))} (file "
                        f"moved to {moved})")
    return hashed, None
