"""Logging set-up for every subcommand: plain lines for people, JSON lines for daemons.

In JSON mode (``advanced.logging.json``, the default of ``livecam daemon``) stderr carries one JSON
object per line and nothing else, so journald/Loki/jq can read it:

- Python log records are formatted by :class:`JsonFormatter` (``t``, ``level``, ``logger``,
  ``msg``, ``exc`` with the traceback, plus any ``extra=`` fields);
- uncaught exceptions (main thread, other threads, ``__del__``) and ``warnings`` are logged;
- what C libraries write straight to file descriptor 2 (TFLite's "INFO: Created TensorFlow
  Lite XNNPACK delegate", libpng warnings, OpenCV and FFmpeg messages, absl/glog lines), and
  anything Python code prints to ``sys.stderr``, is captured by :class:`NativeStderr`: fd 2
  becomes a pipe that a thread reads, one record per line with logger ``native`` (a Python
  traceback printed to stderr stays one record).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import sys
import threading
import time
from types import TracebackType
from typing import IO, Any

#: LogRecord attributes that are not ``extra=`` fields.
_STANDARD_ATTRS = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ``t`` (unix s), ``level``, ``logger``, ``msg``, ``exc``
    (formatted traceback, when there is one) and every ``extra=`` field."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "t": round(record.created, 3),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        for key, value in vars(record).items():
            if key not in _STANDARD_ATTRS and key not in entry:
                entry[key] = value
        return json.dumps(entry, default=str)


class _Handler(logging.StreamHandler[IO[str]]):
    """A stream handler that stays silent when its stream fails (stderr gone): reporting that
    on stderr would loop through the native capture."""

    native: NativeStderr | None = None

    def handleError(self, record: logging.LogRecord) -> None:
        if isinstance(sys.exc_info()[1], OSError | ValueError):  # stream closed or broken
            return
        super().handleError(record)  # a bad log call: say so (JSON too, through the capture)


_USERS_OPENCV_LEVEL = os.environ.get("OPENCV_LOG_LEVEL")  # as the process started
NATIVE_LOGGER = "native"  # the logger of lines C libraries write to stderr (JSON logs)


class _QuietLibraries(logging.Filter):
    """Below WARNING, only livecam's records and the native capture's lines (already levelled
    from what they say) pass, unless the root level is DEBUG: another library's INFO record
    (matplotlib's "generated new fontManager") is not for the user's console."""

    def filter(self, record: logging.LogRecord) -> bool:
        return (record.levelno >= logging.WARNING
                or logging.getLogger().level <= logging.DEBUG
                or record.name in ("livecam", NATIVE_LOGGER)
                or record.name.startswith("livecam."))


# glog/absl ("W0000 00:00:..."), else the first level word: OpenCV ("[ WARN:0@1.2]"), TFLite
# ("INFO: ..."), libpng ("libpng warning: tEXt: CRC error"), FFmpeg ("[h264 @ 0x..] error ...")
_GLOG = re.compile(r"^([IWEF])\d{4} ")
_LEVEL_WORD = re.compile(r"\b(fatal|critical|error|warning|warn|info|debug|verbose)\b", re.I)
_WORD_LEVELS = {"fatal": logging.CRITICAL, "critical": logging.CRITICAL, "error": logging.ERROR,
                "warning": logging.WARNING, "warn": logging.WARNING}
_TRACEBACK_CONTINUES = ("Traceback (most recent call last):", "During handling of the above",
                        "The above exception was the direct cause")


def native_level(line: str) -> int:
    """The log level a line written to stderr by a library most likely means: its glog
    prefix, else its first level word, else WARNING (unasked-for output is worth a look)."""
    glog = _GLOG.match(line)
    if glog:
        return {"I": logging.INFO, "W": logging.WARNING, "E": logging.ERROR,
                "F": logging.CRITICAL}[glog.group(1)]
    word = _LEVEL_WORD.search(line)
    if word is None:
        return logging.WARNING
    return _WORD_LEVELS.get(word.group(1).lower(), logging.INFO)


#: Written by ``NativeStderr.stop`` after everything else: the reader ends there.
_END_MARK = b"\n\0livecam-native-stderr-end\0\n"


class NativeStderr:
    """Turns everything written to file descriptor 2 into log records of logger ``name``.

    ``start`` (once per process, main thread) moves the real stderr to a new descriptor, points
    fd 2 at a pipe and starts the reader thread; it returns a stream on the real stderr for the
    log handler. ``stop`` (idempotent; also run at exit) points fd 2 back at the real stderr,
    drains the pipe and joins the reader, so nothing written before it is lost. Lines are
    logged as they arrive; a Python traceback (``Traceback (most recent call last):`` up to its
    exception line) becomes one ERROR record. What a process writes in the instant before it
    is killed outright (SIGKILL, abort) may never be read.
    """

    _MAX_LINE_BYTES = 64 * 1024

    def __init__(self, name: str = NATIVE_LOGGER) -> None:
        self._log = logging.getLogger(name)
        self._saved_fd = -1
        self._write_fd = -1
        self._thread: threading.Thread | None = None
        self._traceback: list[str] = []

    def start(self) -> IO[str]:
        sys.stderr.flush()
        self._saved_fd = os.dup(2)
        read_fd, self._write_fd = os.pipe()
        os.dup2(self._write_fd, 2)
        self._thread = threading.Thread(target=self._read, args=(read_fd,),
                                        name="livecam-native-stderr", daemon=True)
        self._thread.start()
        import atexit

        atexit.register(self.stop)
        return os.fdopen(os.dup(self._saved_fd), "w", buffering=1, encoding="utf-8",
                         errors="backslashreplace")

    def stop(self) -> None:
        if self._saved_fd < 0:
            return
        sys.stderr.flush()
        os.dup2(self._saved_fd, 2)
        # the end mark follows everything written so far; the reader stops there. Waiting
        # for EOF instead waited the whole second whenever a library kept a copy of fd 2
        # (1.0-1.7 s of a daemon's SIGTERM exit on a saturated machine)
        with contextlib.suppress(OSError):
            os.write(self._write_fd, _END_MARK)
        os.close(self._saved_fd)
        os.close(self._write_fd)
        self._saved_fd = self._write_fd = -1
        if self._thread is not None:
            self._thread.join(1.0)  # everything written before the mark is logged

    def _read(self, read_fd: int) -> None:
        pending = b""
        with os.fdopen(read_fd, "rb", buffering=0) as pipe:
            while chunk := pipe.read(65536):
                pending += chunk
                ended = _END_MARK in pending
                if ended:
                    pending = pending[:pending.index(_END_MARK)]
                *lines, pending = pending.split(b"\n")
                if len(pending) > self._MAX_LINE_BYTES:  # a line that never ends (\r bars)
                    lines.append(pending)
                    pending = b""
                for raw in lines:
                    self._line(raw.decode("utf-8", "replace").rstrip("\r"))
                if ended:
                    break
        if pending:
            self._line(pending.decode("utf-8", "replace"))
        self._end_traceback()

    def _line(self, text: str) -> None:
        if self._traceback:
            self._traceback.append(text)
            if text and not text[0].isspace() and not text.startswith(_TRACEBACK_CONTINUES):
                self._end_traceback()  # the exception line ends the block
            return
        if text.startswith(_TRACEBACK_CONTINUES[0]):
            self._traceback.append(text)
            return
        if text.strip():
            self._log.log(native_level(text), "%s", text)

    def _end_traceback(self) -> None:
        if self._traceback:
            block, self._traceback = self._traceback, []
            self._log.error("%s", block[-1], extra={"traceback": "\n".join(block)})


def _log_uncaught(logger: logging.Logger) -> None:
    """Uncaught exceptions in any thread and unraisable ones (``__del__``) go to ``logger``."""

    def main_hook(kind: type[BaseException], value: BaseException,
                  tb: TracebackType | None) -> None:
        logger.critical("uncaught exception: %s", value, exc_info=(kind, value, tb))

    def thread_hook(args: threading.ExceptHookArgs) -> None:
        if args.exc_type is SystemExit:
            return
        name = args.thread.name if args.thread is not None else "?"
        logger.error("uncaught exception in thread %s: %s", name, args.exc_value,
                     exc_info=args.exc_value or True)

    def unraisable_hook(args: Any) -> None:
        logger.error("%s: %s", args.err_msg or "exception ignored", args.exc_value,
                     exc_info=(args.exc_type, args.exc_value, args.exc_traceback))

    sys.excepthook = main_hook
    threading.excepthook = thread_hook
    sys.unraisablehook = unraisable_hook


def setup_logging(level: str, *, json_lines: bool = False) -> None:
    """Point the root logger at stderr, as plain lines or (``json_lines``) JSON lines with the
    native capture above. Main thread; calling it again replaces the formatter and level and
    keeps one capture per process."""
    root = logging.getLogger()
    previous = next((h for h in root.handlers if isinstance(h, _Handler)), None)
    native = previous.native if previous is not None else None
    if json_lines:
        if native is None and sys.platform != "win32":
            native = NativeStderr()
            stream = native.start()
        elif native is not None and previous is not None:
            stream = previous.stream
        else:
            # Windows: C libraries there write to their own C runtime's stderr, which a
            # redirected fd 2 does not reach; Python-level output is still logged as JSON.
            stream = sys.stderr
        handler = _Handler(stream)
        handler.native = native
        handler.setFormatter(JsonFormatter())
        _log_uncaught(logging.getLogger("livecam"))
        logging.captureWarnings(True)
    else:
        if native is not None:
            native.stop()  # plain lines go straight to stderr again
            native = None
        handler = _Handler(sys.stderr)
        fmt = logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s", "%H:%M:%S")
        fmt.converter = time.localtime
        handler.setFormatter(fmt)
    handler.addFilter(_QuietLibraries())
    root.handlers[:] = [handler]
    root.setLevel(level)
    _quiet_opencv(debug=root.level <= logging.DEBUG)


def _quiet_opencv(*, debug: bool) -> None:
    """OpenCV's own log at errors only (its warnings repeat what livecam says in one line:
    "can't open camera by index" before "camera 99 cannot be opened"), and its warnings too
    with DEBUG. Never its INFO and DEBUG lines: OpenCV writes those to stdout, which is the
    output of commands such as ``ctl status`` and a pipe's data (``--output file:-``), and
    they bypass the log's format (``advanced.logging.json``). An ``OPENCV_LOG_LEVEL`` the user set
    stays theirs."""
    if _USERS_OPENCV_LEVEL is not None:
        return
    os.environ["OPENCV_LOG_LEVEL"] = "WARNING" if debug else "ERROR"  # read when cv2 loads
    if "cv2" in sys.modules:
        import cv2

        # cv::utils::logging::LOG_LEVEL_WARNING, _ERROR; builds differ in where they put it
        # (OpenCV 5 keeps it in cv2.utils.logging alone: cv2.setLogLevel crashed every command)
        set_level = getattr(cv2, "setLogLevel", None) or getattr(
            getattr(getattr(cv2, "utils", None), "logging", None), "setLogLevel", None)
        if set_level is not None:
            set_level(3 if debug else 2)
