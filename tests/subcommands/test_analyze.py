"""``livecam analyze`` as a user runs it: a real H.264 clip of a real face in, JSON and an
annotated H.264 video out (subprocess, real encoder and decoder)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import av
import numpy as np
import pytest

from livecam.output.sinks import FileSink
from tests.helpers.clips import Trajectory, face_sprites, make_clip

N_FRAMES = 24


def livecam(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "livecam.cli", *args], capture_output=True,
                          text=True, timeout=180)


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory,
         astronaut_bgr: np.ndarray) -> tuple[Path, np.ndarray]:
    """The astronaut's face walking right across a 640x360 frame, encoded with x264."""
    path = tmp_path_factory.mktemp("analyze") / "walk.mp4"
    walk = Trajectory.linear((180, 180), (460, 190), N_FRAMES, 130)
    frames, _ = make_clip(face_sprites(astronaut_bgr)[:1], [walk], (640, 360))
    sink = FileSink(path=path, crf=18)
    sink.open(width=640, height=360, fps=30.0)
    for frame in frames:
        sink.send(frame)
    sink.close()
    return path, walk.centers_xy


def _decode(path: Path) -> list[np.ndarray]:
    with av.open(str(path)) as container:
        return [f.to_ndarray(format="bgr24") for f in container.decode(video=0)]


def test_analyze_follows_the_face_and_draws_it(tmp_path: Path,
                                               clip: tuple[Path, np.ndarray]) -> None:
    path, centres = clip
    out_json, out_video = tmp_path / "faces.json", tmp_path / "debug.mp4"
    result = livecam("analyze", "--input", f"file:{path}", "--json", str(out_json),
                     "--output", f"file:{out_video}")
    assert result.returncode == 0, result.stderr
    assert f"{N_FRAMES} frames" in result.stdout
    doc = json.loads(out_json.read_text())
    assert (doc["width"], doc["height"], len(doc["frames"])) == (640, 360, N_FRAMES)
    # one tracked face from the second frame on (ByteTrack confirms on its 2nd sighting),
    # always the same id, its box centred on where the clip put the face
    ids = set()
    for frame in doc["frames"][1:]:
        assert len(frame["faces"]) == 1, frame["index"]
        face = frame["faces"][0]
        ids.add(face["track_id"])
        assert len(face["landmarks_xy"]) == 468 and len(face["keypoints_xy"]) == 6
        x1, y1, x2, y2 = face["box_xyxy"]
        centre = np.array([(x1 + x2) / 2, (y1 + y2) / 2])
        assert np.linalg.norm(centre - centres[frame["index"]]) < 8  # measured 0.4-5.1 px
    assert len(ids) == 1
    # the annotated video: every frame, with the green box drawn around the face
    drawn = _decode(out_video)
    assert len(drawn) == N_FRAMES
    for frame in doc["frames"][1:]:
        x1, y1, x2, _ = (round(v) for v in frame["faces"][0]["box_xyxy"])
        image = drawn[frame["index"]].astype(int)
        top_edge = image[max(y1, 1) - 1:y1 + 2, x1 + 5:x2 - 5]
        # green: G well above B and R along the box's top edge
        assert (top_edge[..., 1] - np.maximum(top_edge[..., 0], top_edge[..., 2])).mean() > 100


def test_analyze_bad_input_is_one_line_exit_2(tmp_path: Path) -> None:
    out_json = tmp_path / "faces.json"
    missing = livecam("analyze", "--input", f"file:{tmp_path / 'nope.mp4'}",
                      "--json", str(out_json))
    assert missing.returncode == 2
    assert "no such file" in missing.stderr and "Traceback" not in missing.stderr
    zero = livecam("analyze", "--input", "synthetic", "--json", str(out_json), "--frames", "0")
    assert zero.returncode == 2 and "--frames must be at least 1" in zero.stderr
    # the JSON named as the drawn video too: said in analyze's words (not "two streams")
    same = livecam("analyze", "--input", "synthetic", "--json", str(out_json), "--output",
                   f"file:{out_json}")
    assert same.returncode == 2 and "--output" in same.stderr and "--json" in same.stderr
    assert "streams" not in same.stderr, same.stderr
    assert not out_json.exists()


def test_a_json_file_that_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    """Before: a folder named as --json ran the whole analysis, then ended in an
    IsADirectoryError traceback; a write the disk refuses (here the process may write files of
    at most 100 bytes, RLIMIT_FSIZE: as a full disk, every larger write fails) in an OSError
    traceback."""
    import resource

    folder = tmp_path / "faces.json"
    folder.mkdir()
    run = livecam("analyze", "--input", "synthetic:64x48", "--frames", "2", "--json",
                  str(folder))
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    assert f"--json {folder} is a folder" in run.stderr, run.stderr

    def small_files_only() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (100, 100))

    out = tmp_path / "out.json"
    run = subprocess.run([sys.executable, "-m", "livecam.cli", "analyze", "--input",
                          "synthetic:64x48", "--frames", "2", "--json", str(out)],
                         capture_output=True, text=True, timeout=180,
                         preexec_fn=small_files_only)
    assert run.returncode == 1, run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    assert f"livecam: error: cannot write {out}: File too large" in run.stderr, run.stderr
    assert not out.exists() and list(tmp_path.glob(".out.json.*")) == []  # nothing half-written


def test_a_json_path_that_cannot_be_written_is_refused_before_the_analysis(
        tmp_path: Path, clip: tuple[Path, np.ndarray]) -> None:
    """Before: the whole input was analysed (and the debug video written) before the JSON's
    folder turned out not to be writable. Now nothing runs: no debug video is made."""
    path, _ = clip
    a_file = tmp_path / "notes.txt"
    a_file.write_text("a file, not a folder")
    video = tmp_path / "debug.mp4"
    run = livecam("analyze", "--input", f"file:{path}", "--json", str(a_file / "faces.json"),
                  "--output", f"file:{video}")
    assert run.returncode == 1, run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    assert f"cannot write {a_file / 'faces.json'}" in run.stderr, run.stderr
    assert not video.exists()  # refused before the input was opened


def test_an_input_naming_a_folder_says_it_is_a_folder(tmp_path: Path) -> None:
    folder = tmp_path / "photos"
    folder.mkdir()
    for kind in ("image", "file"):
        run = livecam("analyze", "--input", f"{kind}:{folder}", "--json",
                      str(tmp_path / "o.json"))
        assert run.returncode == 2, run.stderr
        assert f"--input {kind}:{folder} is a folder" in run.stderr, run.stderr


def test_ctrl_c_keeps_the_frames_analysed_so_far(tmp_path: Path) -> None:
    """A long analysis interrupted with Ctrl-C wrote nothing before: every frame analysed was
    lost. Now the JSON holds them, marked incomplete, and the exit status is 130."""
    import signal
    import threading

    out = tmp_path / "faces.json"
    # Ctrl-C reaches a command run in a terminal, where Python has its KeyboardInterrupt
    # handler. A shell without job control (CI run as `... &`) starts commands with SIGINT
    # ignored, and Python then keeps ignoring it: the child would never stop and this test
    # hung. So the child sets the handler a terminal's Python has.
    argv = ["analyze", "--input", "synthetic:160x120", "--frames", "1000000", "--json", str(out)]
    child = ("import runpy, signal, sys\n"
             "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
             f"sys.argv = ['livecam', *{argv!r}]\n"
             "runpy.run_module('livecam.cli', run_name='__main__')\n")
    proc = subprocess.Popen([sys.executable, "-c", child],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    progress = threading.Event()

    def read_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if "frames analysed" in line:
                progress.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        assert progress.wait(120), "no progress line: " + "".join(lines[-20:])
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)  # never forever: a child that ignores the signal fails here
        assert proc.stdout is not None
        stdout = proc.stdout.read()
        reader.join(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = "".join(lines)
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err, err[-2000:]
    doc = json.loads(out.read_text())
    assert doc["complete"] is False and len(doc["frames"]) >= 1
    assert [f["index"] for f in doc["frames"]] == list(range(len(doc["frames"])))
    assert f"{len(doc['frames'])} frames" in stdout + err, (stdout, err[-2000:])
