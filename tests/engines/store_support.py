"""Shared by the model store tests: a local HTTP server serving a stand-in file, a store over
a temporary manifest, and the code that worker processes of the concurrency tests run.

Run as a script (``python -m tests.engines.store_support MODE ...``) it is a process that
imports or fetches one model and, at a chosen point, says ``ready`` on stdout and blocks until
it is killed (the kill -9 tests) or its stdin is closed (then it goes on and says ``done``):
:func:`paused` starts one.
"""

from __future__ import annotations

import hashlib
import http.server
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from livecam.engines.manifest import load_manifests
from livecam.engines.store import ModelStore

REPO = Path(__file__).resolve().parents[2]
WAIT_S = 30.0


@dataclass
class Served:
    payload: bytes
    cut_first_after: int | None = None  # drop the first connection after this many bytes
    range_headers: list[str | None] = field(default_factory=list)
    send_length: bool = True  # Content-Length (some servers and proxies send none)


def _handler(served: Served) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return None

        def do_GET(self) -> None:
            asked = self.headers.get("Range")
            served.range_headers.append(asked)
            data, start = served.payload, 0
            if asked:
                start = int(asked.removeprefix("bytes=").split("-")[0])
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            else:
                self.send_response(200)
            body = data[start:]
            if served.send_length:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if served.cut_first_after is not None:
                self.wfile.write(body[:served.cut_first_after])
                served.cut_first_after = None
                self.close_connection = True
                return
            self.wfile.write(body)

    return Handler


@contextmanager
def serve(payload: bytes) -> Iterator[tuple[str, Served]]:
    """Serve ``payload`` on 127.0.0.1 (Range requests honoured); yields (url, Served)."""
    served = Served(payload=payload)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(served))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/standin.onnx", served
    finally:
        httpd.shutdown()
        httpd.server_close()


def write_manifest(tmp_path: Path, sources: list[tuple[str, str | None]]) -> None:
    """``<tmp_path>/manifests/standin.yaml`` with these (url, sha256 or None) sources."""
    lines = "".join(f"  - url: {url}\n" + (f"    sha256: {sha}\n" if sha else "")
                    for url, sha in sources)
    (tmp_path / "manifests").mkdir(exist_ok=True)
    (tmp_path / "manifests" / "standin.yaml").write_text(
        "name: standin\nkind: swapper\nfile: standin.onnx\n"
        f"sources:\n{lines}"
        "inputs:\n  - {name: target, shape: [1, 3, 128, 128]}\n"
        "outputs:\n  - {name: output, shape: [1, 3, 128, 128]}\n")


def open_store(tmp_path: Path) -> ModelStore:
    return ModelStore(tmp_path / "models", load_manifests(tmp_path / "manifests"))


def make_store(tmp_path: Path, url: str, sha256: str | None) -> ModelStore:
    write_manifest(tmp_path, [(url, sha256)])
    return open_store(tmp_path)


def two_payloads(mib: int) -> tuple[bytes, bytes]:
    """Two different stand-in model files of ``mib`` MiB each."""
    a = hashlib.sha256(b"a").digest() * (mib << 15)
    b = hashlib.sha256(b"b").digest() * (mib << 15)
    return a, b


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def leftovers(store: ModelStore) -> list[str]:
    """What the store's folder holds besides the model, its stamp, pins, locks and rejects."""
    keep = {store.path("standin").name, store.path("standin").name + ".sha256.json",
            "pins.json", "rejected"}
    return sorted(p.name for p in store.models_dir.iterdir()
                  if p.name not in keep and not p.name.endswith(".lock"))


def worker(tmp_path: Path, role: str, sources: list[Path], url: str, rounds: int,
           start: Any, errors: Any) -> None:
    """A process of the concurrency test: ``rounds`` imports (alternating ``sources``) or
    fetches of model standin, started together through the barrier ``start``; failures are
    put on the queue ``errors``."""
    from livecam.engines.fetch import fetch_model

    store = open_store(tmp_path)
    start.wait(timeout=60)
    for i in range(rounds):
        try:
            if role == "fetch":
                # as livecam's own writers do: under the model's lock (unlinked without it, an
                # import between its move and its stamp found no file: a test-made race)
                with store.lock("standin"):
                    store.path("standin").unlink(missing_ok=True)
                fetch_model(store, "standin", retries=1)
            else:
                store.adopt("standin", sources[i % len(sources)])
        except BaseException as exc:
            errors.put(f"{role} round {i}: {type(exc).__name__}: {exc}")
            return


def worker_env() -> dict[str, str]:
    """The environment of a spawned livecam or worker process: the repository first on its
    path, so that it runs this checkout's code under a plain `pytest` (importlib mode) too."""
    return {**os.environ,
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}


@contextmanager
def paused(tmp_path: Path, mode: str, arg: str) -> Iterator[subprocess.Popen[str]]:
    """A process running this module's MODE (see :func:`main`), stopped where it says
    ``ready``; killed on leaving (SIGKILL on POSIX, TerminateProcess on Windows: no cleanup
    runs) unless the caller let it go on (:func:`let_go`)."""
    proc = subprocess.Popen([sys.executable, "-m", "tests.engines.store_support", mode,
                             str(tmp_path), arg], cwd=REPO, env=worker_env(),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if line != "ready\n":
            proc.kill()
            raise AssertionError((line, proc.communicate(timeout=WAIT_S)))
        yield proc
    finally:
        if proc.returncode is None:
            proc.kill()
            proc.communicate(timeout=WAIT_S)


def let_go(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    """Let a :func:`paused` process go on (its stdin closes) and wait for its end: (exit
    status, stdout, stderr)."""
    out, err = proc.communicate(input="", timeout=WAIT_S)
    return proc.returncode, out, err


def _blocked(*args: object) -> None:
    print("ready", flush=True)
    sys.stdin.read()  # until killed, or until the test closes stdin


def main(argv: list[str]) -> None:
    """MODE TMP_PATH ARG: ``import-hashing SRC`` (stops while it hashes its copy),
    ``import-installing SRC`` (stops with the file moved into place, its stamp not yet
    written), ``fetch URL`` (stops in the middle of the download) or ``hold LOCK`` (holds the
    file lock LOCK, as livecam's writers take it)."""
    from filelock import FileLock

    from livecam.engines import store as store_module
    from livecam.engines.fetch import fetch_model

    mode, tmp_path, arg = argv
    store = open_store(Path(tmp_path))
    first = [True]

    def once(done: int, total: int | None) -> None:
        if first[0]:
            first[0] = False
            _blocked()

    if mode == "import-hashing":
        store.adopt("standin", Path(arg), progress=once)
    elif mode == "import-installing":
        store_module.atomic_write = _blocked  # type: ignore[attr-defined]
        store.adopt("standin", Path(arg))
    elif mode == "fetch":
        fetch_model(store, "standin", progress=once, retries=1)
    elif mode == "hold":
        with FileLock(arg):
            _blocked()
    else:
        raise SystemExit(f"unknown mode {mode}")
    print("done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])


def raised_within(fn: Callable[[], object], bound_s: float, hang: str) -> BaseException | None:
    """Call ``fn`` on a thread; what it raised (None: nothing). Fails, saying ``hang``, when it
    has not returned within ``bound_s`` (instead of hanging the test run)."""
    raised: list[BaseException] = []

    def call() -> None:
        try:
            fn()
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(bound_s)
    assert not thread.is_alive(), hang
    return raised[0] if raised else None
