"""Start and stop a Triton Inference Server process on a model repository.

The server binary comes from the ``nvidia-pytriton`` wheel (``tritonserver`` 2.51 with its
Python backend and stubs for Python 3.8-3.13), or from an NGC install given as ``binary``.

Why the environment is set up the way it is (found on this project's machines): Triton's
Python backend runs each model in ``triton_python_backend_stub``, which embeds CPython through a
dynamically linked ``libpython3.X.so.1.0`` and finds its standard library and site-packages by
looking for ``python3`` on ``PATH``. Left alone, the loader takes the system's libpython (here
Debian's 3.11.2) while ``PATH`` leads to another interpreter's library (pyenv's 3.11.7): the
two disagree (``'_thread.RLock' object has no attribute '_recursion_count'`` as soon as
``multiprocessing`` is used), and a stub whose libpython is not on the loader path at all
(3.12 here) never starts, so loading the model times out. So the server gets
``LD_LIBRARY_PATH`` = this interpreter's ``LIBDIR`` (its own libpython) + the wheel's bundled
libraries, and ``PATH`` starting with this interpreter's ``bin`` (so the stub sees the same
venv and engines as this process). The stub ignores ``PYTHONPATH``: each repository's
``model.py`` names the livecam that wrote it (:mod:`.triton_repo`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from livecam.core.errors import DependencyError, LivecamError
from livecam.core.lifecycle import Lifecycle

log = logging.getLogger(__name__)


class TritonServeError(LivecamError, RuntimeError):
    """The Triton server could not be started or did not become ready."""


@dataclass(frozen=True)
class TritonBundle:
    """Where a tritonserver install lives: the binary, its backends and extra libraries."""

    binary: Path
    backends_dir: Path
    stubs_dir: Path | None
    libs_dir: Path | None


def find_bundle(binary: str = "") -> TritonBundle:
    """The tritonserver to run: ``binary`` (an NGC-style install: ``<root>/bin/tritonserver``
    beside ``<root>/backends``), else the one inside the nvidia-pytriton wheel."""
    if binary:
        path = Path(binary).expanduser()
        if not path.is_file():
            raise TritonServeError(f"{path} is not a tritonserver binary")
        return TritonBundle(path, path.parent.parent / "backends", None, None)
    spec = importlib.util.find_spec("pytriton")
    if spec is None or spec.origin is None:
        raise DependencyError("Triton Inference Server is not installed: pip install "
                              "'livecam[triton]' (Linux x86_64), or pass --tritonserver PATH")
    root = Path(spec.origin).parent / "tritonserver"
    return TritonBundle(root / "bin" / "tritonserver", root / "backends",
                        root / "python_backend_stubs",
                        Path(spec.origin).parent.parent / "nvidia_pytriton.libs")


def python_libdir() -> Path:
    """The directory holding this interpreter's ``libpython3.X.so.1.0``.

    Raises :class:`TritonServeError` for a Python built without a shared library (the
    Python backend's stub links against it)."""
    name = f"libpython{sys.version_info.major}.{sys.version_info.minor}.so.1.0"
    libdir = Path(str(sysconfig.get_config_var("LIBDIR") or ""))
    if not (libdir / name).exists():
        raise TritonServeError(f"this Python has no {name} in {libdir}: Triton's Python backend "
                               "needs a Python built with --enable-shared (pyenv: "
                               "PYTHON_CONFIGURE_OPTS=--enable-shared; distro Pythons have it)")
    return libdir


def prepare_backends(bundle: TritonBundle, work_dir: Path) -> Path:
    """A backends directory with the Python backend's stub for this interpreter's version."""
    if bundle.stubs_dir is None:
        return bundle.backends_dir  # an NGC install ships its stub in place
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    stub = bundle.stubs_dir / version / "triton_python_backend_stub"
    if not stub.is_file():
        have = ", ".join(sorted(p.name for p in bundle.stubs_dir.iterdir()))
        raise TritonServeError(f"the bundled Triton has no Python backend for Python {version} "
                               f"(it has {have})")
    backends = work_dir / "backends"
    if backends.exists():
        shutil.rmtree(backends)
    shutil.copytree(bundle.backends_dir, backends)
    shutil.copy2(stub, backends / "python" / "triton_python_backend_stub")
    return backends


def server_environment(bundle: TritonBundle) -> dict[str, str]:
    """The environment the server and its stubs need (see the module docstring)."""
    env = dict(os.environ)
    if sys.platform != "linux":
        raise TritonServeError("serving with Triton needs Linux (Triton has no other build)")
    libs = [str(python_libdir())] + ([str(bundle.libs_dir)] if bundle.libs_dir else [])
    env["LD_LIBRARY_PATH"] = os.pathsep.join([*libs, env.get("LD_LIBRARY_PATH", "")]).rstrip(":")
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


@dataclass(frozen=True)
class ServerAddress:
    """Where the server listens. Triton has no authentication: keep ``host`` on loopback
    unless a firewall or a private network limits who can reach it."""

    host: str = "127.0.0.1"
    grpc_port: int = 8001
    http_port: int = 8000
    metrics_port: int = 8002

    @property
    def grpc_url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"{host}:{self.grpc_port}"

    @property
    def http_url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.http_port}"


def _http_ok(url: str, timeout_s: float = 1.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _shm_regions(pgid: int) -> list[str]:
    """Names of the /dev/shm regions the Python-backend stubs of process group ``pgid`` use
    (each stub's command line names its region)."""
    names: list[str] = []
    if sys.platform == "win32":  # no Triton build for Windows
        return names
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if os.getpgid(int(proc.name)) != pgid:
                continue
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        names += [a.decode() for a in args if a.startswith(b"triton_python_backend_shm_region_")]
    return names


class TritonServer(Lifecycle):
    """One ``tritonserver`` process serving ``repository``.

    ``open`` starts it and returns once the server is live and ready and every model in
    ``models`` is ready (or raises :class:`TritonServeError` with the end of its log).
    ``close`` sends SIGTERM (Triton finishes requests in flight, for at most
    ``exit_timeout_s``), then kills what is left; it is idempotent. The server's log goes to
    ``log_path``. One thread owns an instance.
    """

    def __init__(self, repository: Path, models: Sequence[str], *, work_dir: Path,
                 address: ServerAddress | None = None, binary: str = "",
                 ready_timeout_s: float = 300.0, exit_timeout_s: int = 5,
                 shm_default_mb: int = 16) -> None:
        self.repository = Path(repository)
        self.models = tuple(models)
        self.work_dir = Path(work_dir)
        self.address = address or ServerAddress()
        self.binary = binary
        self.ready_timeout_s = ready_timeout_s
        self.exit_timeout_s = exit_timeout_s
        self.shm_default_mb = shm_default_mb
        self.log_path = self.work_dir / "tritonserver.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def command(self, backends: Path, bundle: TritonBundle) -> list[str]:
        a = self.address
        shm = self.shm_default_mb * 2**20
        return [str(bundle.binary), f"--model-repository={self.repository}",
                f"--backend-directory={backends}",
                f"--http-address={a.host}", f"--http-port={a.http_port}",
                f"--grpc-address={a.host}", f"--grpc-port={a.grpc_port}",
                f"--metrics-address={a.host}", f"--metrics-port={a.metrics_port}",
                f"--exit-timeout-secs={self.exit_timeout_s}", "--strict-readiness=true",
                f"--backend-config=python,shm-default-byte-size={shm}",
                f"--backend-config=python,shm-growth-byte-size={shm}"]

    def open(self) -> None:
        if self._process is not None:
            return
        bundle = find_bundle(self.binary)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        backends = prepare_backends(bundle, self.work_dir)
        env = server_environment(bundle)
        with self.log_path.open("wb") as log_file:
            # its own process group: the Python backend's stubs are its children, and a
            # server that dies leaves them running; close() ends the whole group
            self._process = subprocess.Popen(self.command(backends, bundle), env=env,
                                             stdout=log_file, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, start_new_session=True)
        log.info("tritonserver started (pid %d), log %s", self._process.pid, self.log_path)
        try:
            self._wait_ready()
        except BaseException:
            self.close()
            raise

    def _wait_ready(self) -> None:
        assert self._process is not None
        base = self.address.http_url
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise TritonServeError(f"tritonserver exited with code {self._process.returncode}"
                                       f" while starting: {self.log_tail()}")
            if _http_ok(f"{base}/v2/health/ready") and all(
                    _http_ok(f"{base}/v2/models/{m}/ready") for m in self.models):
                return
            time.sleep(0.2)
        raise TritonServeError(f"tritonserver was not ready after {self.ready_timeout_s:.0f} s: "
                               f"{self.log_tail()}")

    def log_tail(self, lines: int = 6) -> str:
        """The last log lines that say something went wrong (or the last lines)."""
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        bad = [t for t in text if t.startswith("E") or "UNAVAILABLE" in t or "error" in t]
        return " | ".join((bad or text)[-lines:]).strip() or "(empty log)"

    def wait(self, timeout_s: float | None = None) -> int | None:
        """Wait for the process to end; its exit code, or None on timeout."""
        if self._process is None:
            return None
        with contextlib.suppress(subprocess.TimeoutExpired):
            return self._process.wait(timeout_s)
        return None

    def kill(self) -> None:
        """End the server and its stubs at once (SIGKILL to the group), as a crash would, and
        remove the shared-memory regions they can no longer remove themselves."""
        if self._process is None or sys.platform == "win32":  # no Triton build for Windows
            return
        regions = _shm_regions(self._process.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._process.pid, signal.SIGKILL)
        self._process.wait(10)
        for name in regions:
            Path("/dev/shm", name).unlink(missing_ok=True)

    def close(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(self.exit_timeout_s + 10)
            except subprocess.TimeoutExpired:
                log.warning("tritonserver did not stop after SIGTERM; killing it")
                process.kill()
                process.wait(10)
        if sys.platform == "win32":  # no Triton build for Windows: open() never got here
            return
        with contextlib.suppress(ProcessLookupError):  # stubs it left behind
            os.killpg(process.pid, signal.SIGKILL)
