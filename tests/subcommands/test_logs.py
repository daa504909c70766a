"""JSON logs: with ``advanced.logging.json`` every line on stderr is one JSON object, whatever wrote
it.

Each case runs in a child process (the capture redirects the process's file descriptor 2,
which pytest's own capture also uses). The noise comes from the real libraries: libpng via
OpenCV reading a PNG with a damaged text chunk, LiteRT creating its XNNPACK delegate for
MediaPipe's face mesh model, Python tracebacks, a thread dying, a warning.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from livecam.subcommands.logs import native_level


def with_damaged_chunk(png: bytes) -> bytes:
    """``png`` plus a tEXt chunk whose CRC is wrong: libpng warns and still decodes it."""
    import struct

    body = b"tEXt" + b"Comment\x00hello"
    chunk = struct.pack(">I", len(body) - 4) + body + struct.pack(">I", 1234)
    return png[:33] + chunk + png[33:]  # after the signature and IHDR


def damaged_png(path: Path) -> Path:
    import cv2
    import numpy as np

    _, buf = cv2.imencode(".png", np.full((32, 32, 3), 100, np.uint8))
    path.write_bytes(with_damaged_chunk(bytes(buf)))
    return path


def run_child(code: str, *, level: str = "INFO", json_lines: bool = True
              ) -> subprocess.CompletedProcess[str]:
    prelude = ("from livecam.subcommands.logs import setup_logging\n"
               f"setup_logging({level!r}, json_lines={json_lines})\n")
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=120)


def json_lines(stderr: str) -> list[dict[str, Any]]:
    """Every line parsed; fails naming the first line that is not one JSON object."""
    records = []
    for line in stderr.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            pytest.fail(f"stderr line is not JSON: {line!r}")
        assert isinstance(value, dict), line
        assert {"t", "level", "logger", "msg"} <= value.keys(), line
        records.append(value)
    return records


def test_c_libraries_python_tracebacks_threads_and_warnings_all_come_out_as_json(
        tmp_path: Path) -> None:
    png = damaged_png(tmp_path / "damaged.png")
    result = run_child(f"""
        import logging, os, sys, threading, traceback, warnings
        import cv2
        from livecam.analysis.litert import open_mediapipe_model
        assert cv2.imread({str(png)!r}) is not None          # libpng warning (C, fd 2)
        open_mediapipe_model("face_landmark", "face_landmark.tflite", 1)  # "INFO: Created ..."
        logging.getLogger("livecam.test").info("with fields", extra={{"timings_ms": {{"a": 1}}}})
        try:
            1 / 0
        except ZeroDivisionError:
            traceback.print_exc()                             # as http.server prints them
        t = threading.Thread(target=lambda: [][1], name="worker")
        t.start(); t.join()
        warnings.warn("old knob", UserWarning)
        print("plain print to stderr", file=sys.stderr)
        os.write(2, b"no newline at the end")
    """)
    assert result.returncode == 0, result.stderr
    records = json_lines(result.stderr)
    by_msg = {r["msg"]: r for r in records}
    assert by_msg["libpng warning: tEXt: CRC error"]["logger"] == "native"
    assert by_msg["libpng warning: tEXt: CRC error"]["level"] == "WARNING"
    tflite = [r for r in records if "XNNPACK delegate" in r["msg"]]
    assert tflite and tflite[0]["logger"] == "native" and tflite[0]["level"] == "INFO"
    assert by_msg["with fields"]["timings_ms"] == {"a": 1}
    # a printed traceback is one record, its last line the message
    zero = by_msg["ZeroDivisionError: division by zero"]
    assert zero["level"] == "ERROR" and zero["traceback"].startswith("Traceback (most recent")
    assert 'File "<string>", line' in zero["traceback"]
    died = [r for r in records if r["msg"].startswith("uncaught exception in thread worker")]
    assert died and died[0]["level"] == "ERROR" and "IndexError" in died[0]["exc"]
    assert any(r["logger"] == "py.warnings" and "old knob" in r["msg"] for r in records)
    assert by_msg["plain print to stderr"]["logger"] == "native"
    assert by_msg["no newline at the end"]["logger"] == "native"  # drained at exit


def test_an_uncaught_exception_in_the_main_thread_is_one_critical_record() -> None:
    result = run_child("raise RuntimeError('boom')")
    assert result.returncode == 1
    records = json_lines(result.stderr)
    assert [r["level"] for r in records] == ["CRITICAL"]
    assert records[0]["msg"] == "uncaught exception: boom"
    assert "RuntimeError: boom" in records[0]["exc"]


def test_back_to_plain_lines_ends_the_capture() -> None:
    result = run_child("""
        import os, logging
        from livecam.subcommands.logs import setup_logging
        setup_logging("INFO", json_lines=True)   # twice: still one capture
        os.write(2, b"captured\\n")
        setup_logging("INFO", json_lines=False)
        os.write(2, b"raw again\\n")
        logging.getLogger("x").warning("plain record")
    """)
    assert result.returncode == 0
    lines = result.stderr.splitlines()
    assert json.loads(lines[0])["msg"] == "captured"
    assert lines[1] == "raw again"
    assert lines[2].endswith("WARNING x: plain record")
    assert len(lines) == 3


@pytest.mark.parametrize(("line", "level"), [
    ("INFO: Created TensorFlow Lite XNNPACK delegate for CPU.", logging.INFO),
    ("libpng warning: iCCP: known incorrect sRGB profile", logging.WARNING),
    ("[ WARN:0@0.013] global cap_v4l.cpp:914 open VIDEOIO(V4L2:/dev/video7): can't open "
     "camera by index", logging.WARNING),
    ("[ERROR:0@0.014] global obsensor_uvc_stream_channel.cpp:158 getStreamChannelGroup "
     "Camera index out of range", logging.ERROR),
    ("[h264 @ 0x55822428d280] error while decoding MB 22 26, bytestream 80", logging.ERROR),
    ("W0000 00:00:1712345678.123 123 face_landmarker_graph.cc:174] Sets FaceBlendshapes",
     logging.WARNING),
    ("I0000 00:00:1712345678.123 123 gl_context.cc:357] GL version: 3.2", logging.INFO),
    ("[h264 @ 0x55822428d280] Reference 2 >= 2", logging.WARNING),
])
def test_native_lines_get_the_level_they_say(line: str, level: int) -> None:
    assert native_level(line) == level


@pytest.mark.parametrize("json_lines_on", [False, True])
def test_other_libraries_info_lines_stay_out_of_the_log_unless_debugging(
        json_lines_on: bool) -> None:
    """Before: at the default INFO level a library's own INFO records reached the user's
    console (matplotlib's "generated new fontManager" on the first `livecam analyze`). Now
    only livecam's INFO lines and everyone's warnings show; --log-level DEBUG shows all."""
    code = """
        import logging
        logging.getLogger("matplotlib.font_manager").info("generated new fontManager")
        logging.getLogger("matplotlib.font_manager").warning("a library's warning")
        logging.getLogger("livecam.run").info("livecam's own line")
    """
    quiet = run_child(code, json_lines=json_lines_on)
    assert "generated new fontManager" not in quiet.stderr, quiet.stderr
    assert "a library's warning" in quiet.stderr and "livecam's own line" in quiet.stderr
    loud = run_child(code, level="DEBUG", json_lines=json_lines_on)
    assert "generated new fontManager" in loud.stderr, loud.stderr


def test_a_camera_that_cannot_open_is_livecams_one_line_alone(tmp_path: Path) -> None:
    """Before: OpenCV's own "[ WARN:0@0.9] global cap_v4l.cpp:913 open VIDEOIO(V4L2:
    /dev/video99): can't open camera by index" lines came first. OpenCV's log now shows its
    errors only, unless --log-level DEBUG (no camera 99 exists on a test machine)."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "OPENCV_LOG_LEVEL"}
    run = subprocess.run(
        [sys.executable, "-m", "livecam.cli", "run", "--input", "camera:99", "--output", "null",
         "--frames", "1", "--set", "control.api=false", "--set", "control.hotkeys=false",
         "--set", f"identity.library_dir={tmp_path / 'lib'}"],
        capture_output=True, text=True, timeout=180, env=env)
    assert run.returncode == 1, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("livecam: error: camera 99"), run.stderr


def test_native_stderr_stops_at_once_when_a_library_holds_a_copy_of_fd_2() -> None:
    """Issue 39 item 15: stop waited for the pipe's EOF, which never came while a library
    kept a copy of fd 2: a daemon's exit after SIGTERM waited the whole 1 s join (1.0-1.7 s
    exits on a saturated machine). Now stop ends the reader at a mark written after
    everything else, and what was written before it is still logged. In a process of its
    own: it moves the process's fd 2."""
    import subprocess
    import sys

    script = (
        "import logging, os, sys\n"
        "from livecam.subcommands.logs import NativeStderr\n"
        "seen = []\n"
        "class Keep(logging.Handler):\n"
        "    def emit(self, record): seen.append(record.getMessage())\n"
        "logging.getLogger('livecam.native').addHandler(Keep())\n"
        "logging.getLogger('livecam.native').setLevel(logging.DEBUG)\n"
        "native = NativeStderr('livecam.native')\n"
        "native.start()\n"
        "held = os.dup(2)  # a library's copy of stderr\n"
        "os.write(2, b'written before the stop\\n')\n"
        "native.stop()\n"
        "print(native._thread.is_alive(), 'written before the stop' in seen)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"], done.stdout


def test_opencv_5s_log_level_is_set_where_opencv_5_keeps_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: every command crashed at start with OpenCV 5 (``AttributeError: module 'cv2'
    has no attribute 'setLogLevel'``, on the GPU machine's opencv-python-headless 5.0.0): it
    keeps the call in ``cv2.utils.logging`` alone. This machine has OpenCV 4, so OpenCV 5's
    layout is laid over the real module here."""
    import types

    import cv2

    from livecam.subcommands import logs

    levels: list[int] = []
    monkeypatch.delattr(cv2, "setLogLevel")
    monkeypatch.setattr(cv2.utils, "logging", types.SimpleNamespace(setLogLevel=levels.append),
                        raising=False)
    monkeypatch.setattr(logs, "_USERS_OPENCV_LEVEL", None)
    monkeypatch.setenv("OPENCV_LOG_LEVEL", "")
    logs._quiet_opencv(debug=False)
    logs._quiet_opencv(debug=True)
    assert levels == [2, 3]
