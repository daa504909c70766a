"""Lock files that keep two livecam processes off the same camera, virtual camera or video file.

A second writer to a virtual camera interleaves its frames with the first one's (the picture
flickers between two streams); a second writer to a ``file:`` output truncates and overwrites
the first one's recording; two readers of one camera fight over it, and two readers of one pipe
(a FIFO, ``/dev/stdin``) split its frames between them. ``livecam daemon`` and
``livecam run`` therefore take one lock per device they use, in the lock dir
(``$XDG_RUNTIME_DIR/livecam`` by default), before anything is opened.

The locks are ``filelock`` locks: ``flock`` on Linux and macOS, ``LockFileEx`` on Windows. The
operating system drops them when the process ends however it ends (``kill -9`` included), so a
stale file never blocks the next start. Beside each lock, a ``.pid`` file names the holder for
the error message (read only while the lock is taken).

Where ``XDG_RUNTIME_DIR`` is unset (cron, ``su``, a plain ``ssh`` session) the lock dir falls
back to ``/tmp/runtime-UID/livecam``, a path another local user can make first and fill with
symlinks named as lock and pid files, pointing the writes at any file of ours. So the lock dir
and each folder above it must belong to the user (or root) and must not be writable by every
user, unless sticky (as ``/tmp``); otherwise the start is refused before a file is written.
(Group write is allowed: with a umask of 002 a user's own folders are group-writable, for a
group of one.)
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import stat
import sys
from pathlib import Path

from filelock import FileLock, Timeout

from livecam.config import Config
from livecam.core.errors import ConfigError, LivecamError, UsageError
from livecam.daemon.file_lock import OnFileLock, file_identity

log = logging.getLogger(__name__)


class DeviceBusyError(LivecamError, RuntimeError):
    """Another livecam holds the lock of a device this run needs: ``device`` (what to call
    it), ``holder_pid`` (as its pid file says; "?" when unknown) and ``lock_path``, for a
    command that words what to do in its own options."""

    def __init__(self, message: str, *, device: str, holder_pid: str, lock_path: Path) -> None:
        super().__init__(message)
        self.device = device
        self.holder_pid = holder_pid
        self.lock_path = lock_path


def default_lock_dir() -> Path:
    import warnings

    import platformdirs

    with warnings.catch_warnings():  # "XDG_RUNTIME_DIR is not set": the fallback is fine
        warnings.simplefilter("ignore")
        return Path(platformdirs.user_runtime_dir("livecam", appauthor=False))


def _file_key(target: str) -> str:
    """One key per file however it is named: relative, via a symlink, or (Windows) in
    another letter case."""
    return "file-" + os.path.normcase(os.path.realpath(os.path.expanduser(target)))


def _pipe_key(target: str) -> str | None:
    """A key for the pipe ``target`` names (its device and inode, the same for every name of
    it), None for a regular file or a path that cannot be read (its source says so when it
    opens)."""
    try:
        st = os.stat(os.path.expanduser(target))
    except OSError:
        return None
    if stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode) or stat.S_ISSOCK(st.st_mode):
        return f"pipe-{st.st_dev}-{st.st_ino}"
    return None


def device_keys(input_spec: str, output_spec: str, *, output_device: str = "",
                output_backend: str = "") -> list[tuple[str, str]]:
    """(lock key, what to call it) for the devices an ``--input``/``--output`` pair uses.

    Cameras, virtual cameras, ``file:`` outputs and ``file:`` inputs that are pipes (a FIFO,
    ``/dev/stdin``: each frame goes to one reader) are exclusive; other ``file:``/``image:``
    inputs, windows and ``null`` are not locked (any number of readers is fine). ``camera:0``
    and ``camera:/dev/video0`` are the same device on Linux and get one key, and so do two
    names of one pipe.
    """
    keys: list[tuple[str, str]] = []
    kind, _, target = input_spec.partition(":")
    if kind == "camera":
        device = target
        if target.isdigit() and sys.platform.startswith("linux"):
            device = f"/dev/video{target}"
        keys.append((f"camera-{device}", f"camera {device}"))
    elif kind == "file" and target:
        pipe = _pipe_key(target)
        if pipe is not None:
            keys.append((pipe, f"input pipe {target}"))
    out_kind, _, out_target = output_spec.partition(":")
    if out_kind == "virtualcam":
        backend = output_backend or "default"
        device = output_device or "default"
        keys.append((f"virtualcam-{backend}-{device}",
                     f"virtual camera {device} ({backend} backend)"))
    elif out_kind == "file" and out_target:
        key = _file_key(out_target)
        keys.append((key, f"output file {key.removeprefix('file-')}"))
    return keys


def lock_file_name(key: str) -> str:
    """A file name for ``key``: readable, and unique (two paths that read alike once
    sanitised, such as ``a/b_c`` and ``a_b/c``, still get two files)."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", key).strip("_")[-60:]
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{slug}-{digest}.lock"


class DeviceLock:
    """Holds the locks for ``keys`` from ``acquire`` until ``release`` (idempotent), in
    ``lock_dir``. Main thread (or any one thread for both calls).

    ``acquire`` raises :class:`DeviceBusyError` naming the holder's pid when one is taken, and
    then holds none of them. A second ``DeviceLock`` on the same key is refused in the same
    process too. Each of ``files`` (output paths, with what to call them) is also locked on
    the file itself (:class:`~livecam.daemon.file_lock.OnFileLock`): whatever its name (a
    hard link) and whatever the lock dir (``XDG_RUNTIME_DIR`` unset), one writer.
    """

    def __init__(self, keys: list[tuple[str, str]], lock_dir: Path,
                 files: list[tuple[Path, str]] | None = None) -> None:
        self._keys = keys
        self._dir = lock_dir
        self._files = files or []
        self._held: list[tuple[FileLock, Path]] = []
        self._held_files: list[OnFileLock] = []

    def acquire(self) -> None:
        if self._keys:
            _make_private_folder(self._dir)
        for key, label in self._keys:
            path = self._dir / lock_file_name(key)
            pid_path = path.with_suffix(".pid")
            lock = FileLock(path, timeout=0, thread_local=False)
            try:
                lock.acquire()
            except Timeout:
                self.release()
                holder = _holder(pid_path)
                raise DeviceBusyError(
                    f"{label} is already used by another livecam (pid {holder}; lock {path}): "
                    "stop that one first, or pick another with --input / --output / --set "
                    "output.device=...", device=label, holder_pid=holder, lock_path=path
                ) from None
            pid_path.write_text(f"{os.getpid()}\n", encoding="utf-8")
            self._held.append((lock, pid_path))
            log.debug("locked %s (%s)", label, path)
        for file_path, label in self._files:
            on_file = OnFileLock(file_path)
            if not on_file.acquire():
                self.release()
                raise DeviceBusyError(
                    f"{label} is already being written by another livecam (it holds a lock "
                    "on the file): stop that one first, or pick another --output",
                    device=label, holder_pid="?", lock_path=file_path)
            self._held_files.append(on_file)

    def release(self) -> None:
        for on_file in reversed(self._held_files):
            on_file.release()
        self._held_files = []
        for lock, pid_path in reversed(self._held):
            pid_path.unlink(missing_ok=True)  # before the lock: the next holder writes its own
            lock.release()
        self._held = []

    def __enter__(self) -> DeviceLock:
        self.acquire()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()


def lock_for_run(config: Config, pairs: list[tuple[str, str]]) -> DeviceLock:
    """The (not yet acquired) lock of the devices of a ``run``/``daemon`` with these
    ``(input, output)`` streams, in ``advanced.control.lock_dir`` or the default lock dir. Raises
    :class:`UsageError` when two streams name one camera, virtual camera, output file or
    input pipe, or when an output file is an input of the run (the same device and inode,
    however it is named: a symlink, a hard link); nothing has been opened for writing then."""
    configured = config.control.lock_dir
    lock_dir = Path(configured).expanduser() if configured else default_lock_dir()
    keys: list[tuple[str, str]] = []
    named_by: dict[str, int] = {}
    for stream, (input_spec, output_spec) in enumerate(pairs):
        for key, label in device_keys(input_spec, output_spec,
                                      output_device=config.output.device,
                                      output_backend=config.output.backend):
            if key in named_by:
                raise UsageError(f"{label} is named by two streams ({named_by[key]} and "
                                 f"{stream}): each stream needs its own camera, virtual "
                                 "camera, output file and input pipe")
            named_by[key] = stream
            keys.append((key, label))
    return DeviceLock(keys, lock_dir, files=output_files(pairs))


def output_files(pairs: list[tuple[str, str]]) -> list[tuple[Path, str]]:
    """The ``file:`` outputs of ``pairs`` (with what to call them), after refusing one that is
    an input of the run, or another stream's output, by (device, inode)."""
    inputs: dict[tuple[int, int], tuple[int, str]] = {}
    for stream, (input_spec, _) in enumerate(pairs):
        kind, _, target = input_spec.partition(":")
        if kind in ("file", "image") and target:
            found = file_identity(target)
            if found is not None:
                inputs.setdefault(found, (stream, target))
    outputs: dict[tuple[int, int], int] = {}
    files = []
    for stream, (_, output_spec) in enumerate(pairs):
        kind, _, target = output_spec.partition(":")
        if kind != "file" or not target:
            continue
        found = file_identity(target)
        if found is not None and found in inputs:
            other, name = inputs[found]
            raise UsageError(f"output file {target} is the input {name} of stream {other} "
                             "(the same file): writing it would destroy the input; write "
                             "to another file")
        if found is not None and found in outputs:
            raise UsageError(f"output file {target} is named by two streams "
                             f"({outputs[found]} and {stream}), through another name: each "
                             "stream needs its own output file")
        if found is not None:
            outputs[found] = stream
        files.append((Path(target), f"output file {target}"))
    return files


def _lock_dir_error(folder: Path, what: str) -> ConfigError:
    return ConfigError(f"advanced.control.lock_dir {folder} {what}: set advanced.control.lock_dir "
                       "(or XDG_RUNTIME_DIR) to a folder of yours that only you can write")


def _make_private_folder(folder: Path) -> None:
    """Create ``folder`` (mode 0700) and check that no other user can change what is in it
    (see the module docstring); :class:`ConfigError` saying what is wrong."""
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        what = ("is a file, not a folder" if folder.exists() and not folder.is_dir()
                else f"cannot be created ({exc.strerror or exc})")
        raise _lock_dir_error(folder, what) from None
    if sys.platform == "win32":
        return  # a user's own profile folder: no shared /tmp fallback there
    me = os.geteuid()
    # the folders as named (whoever owns one can swap what is below it) and as resolved
    for path in dict.fromkeys([folder, *folder.absolute().parents, *folder.resolve().parents]):
        st = path.stat()
        where = "" if path == folder else f"is in {path}, which "
        if st.st_uid not in (me, 0):
            raise _lock_dir_error(folder, f"{where}belongs to another user (uid "
                                  f"{st.st_uid})")
        if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
            raise _lock_dir_error(folder, f"{where}others can write (mode "
                                  f"{stat.S_IMODE(st.st_mode):o})")


def _holder(pid_path: Path) -> str:
    try:
        return pid_path.read_text(encoding="utf-8").strip() or "?"
    except OSError:  # written a moment after the lock is taken
        return "?"
