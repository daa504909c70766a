"""Download a model from its manifest's sources: progress, resume, verify, never trust.

The download goes to ``<file>.part``; an interrupted download resumes with an HTTP Range request
(from this run's retries or a later ``livecam models fetch``). Only a complete file whose sha256
the store accepts is moved into place; a file that does not verify is moved aside (see
:meth:`ModelStore.quarantine`) and the next source is tried.
"""

from __future__ import annotations

import http.client
import logging
import os
import re
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from livecam import __version__
from livecam.core.errors import ModelError
from livecam.engines.store import CHUNK_BYTES, ModelStore, sha256_file

log = logging.getLogger(__name__)

ProgressFn = Callable[[int, int | None], None]  # (bytes so far, total bytes or None)

_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")


def download(url: str, part_path: Path, *, progress: ProgressFn | None = None,
             timeout_s: float = 30.0, expected_size: int | None = None) -> None:
    """Download ``url`` into ``part_path``, resuming from its current length if it exists.

    Raises ``OSError``/``http.client.HTTPException`` on network failures (the partial file is
    kept so the next call resumes).
    """
    part_path.parent.mkdir(parents=True, exist_ok=True)
    offset = part_path.stat().st_size if part_path.exists() else 0
    if expected_size is not None and offset == expected_size:
        return
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
        if exc.code == 416 and offset:  # nothing left to send: the part is already whole
            return
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
        if total is not None and done < total:
            raise http.client.IncompleteRead(b"", total - done)


def fetch_model(store: ModelStore, name: str, *, progress: ProgressFn | None = None,
                retries: int = 3, timeout_s: float = 30.0) -> Path:
    """Fetch model ``name`` into ``store`` and verify it; returns the installed path.

    Each source is tried in order, each up to ``retries`` times (resuming). Raises
    :class:`ModelError` listing what every source did when none gives a verified file.
    """
    manifest = store.manifest(name)
    target, part = store.path(name), store.partial_path(name)
    if target.is_file():
        try:
            store.verify(name)
            log.info("model %s is already installed and verified at %s", name, target)
            return target
        except ModelError as exc:
            log.warning("%s", exc)  # moved aside; fetch a fresh copy
    failures: list[str] = []
    # a .part left by an earlier run belongs to the first source: keep it to resume
    previous_sha = manifest.sources[0].sha256 if manifest.sources else None
    for source in manifest.sources:
        if part.exists() and previous_sha != source.sha256:
            part.unlink()  # a partial file of another source's bytes cannot be resumed here
        previous_sha = source.sha256
        for attempt in range(1, retries + 1):
            try:
                download(source.url, part, progress=progress, timeout_s=timeout_s,
                         expected_size=source.size_bytes)
                break
            except (OSError, http.client.HTTPException) as exc:
                log.warning("download of %s failed (attempt %d of %d): %s", source.url,
                            attempt, retries, exc)
                if attempt == retries:
                    failures.append(f"{source.url}: {exc}")
        else:
            continue
        digest = sha256_file(part)
        ok = digest == source.sha256 if source.sha256 else store.acceptable(name, digest)
        if not ok:
            moved = store.quarantine(part, digest)
            failures.append(f"{source.url}: sha256 {digest} does not match "
                            f"{source.sha256 or 'the recorded hash'} (file moved to {moved})")
            continue
        os.replace(part, target)
        store.write_stamp(name, digest)
        if not source.sha256:
            log.warning("model %s: no public sha256 is documented for %s; recorded %s",
                        name, source.url, digest)
        return target
    raise ModelError(f"could not fetch model {name}: " + "; ".join(failures) +
                     f". Download it yourself and run `livecam models import {name} PATH`")
