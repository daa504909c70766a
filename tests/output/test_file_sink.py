"""`file:` outputs a careless user names: a container that cannot hold H.264, an unknown or no
suffix. One line that says which files work, and no file left behind."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from livecam.core.errors import OutputError
from livecam.output.sinks import FileSink


@pytest.mark.parametrize("name", ["out.webm", "out.gif", "out.txt", "out"])
def test_a_file_output_livecam_cannot_write_says_which_files_work(tmp_path: Path,
                                                                  name: str) -> None:
    """Before: "'webm' format does not support 'libx264' codec", "Could not determine output
    format": true, but not what to do."""
    sink = FileSink(path=tmp_path / name)
    with pytest.raises(OutputError) as err:
        sink.open(width=64, height=48, fps=30.0)
    message = str(err.value)
    assert f"cannot write {tmp_path / name}" in message
    assert "use a .mp4, .mkv or .mov file" in message, message
    assert not (tmp_path / name).exists()


@pytest.mark.parametrize("name", ["out.mp4", "out.MKV", "out.mov"])
def test_the_files_it_names_are_written(tmp_path: Path, name: str) -> None:
    import av
    import numpy as np

    sink = FileSink(path=tmp_path / name)
    sink.open(width=64, height=48, fps=30.0)
    for i in range(5):
        sink.send(np.full((48, 64, 3), 40 * i, np.uint8))
    sink.close()
    with av.open(str(tmp_path / name)) as container:
        assert sum(1 for _ in container.decode(video=0)) == 5


def _record(output: Path, frames: int, *extra: str) -> subprocess.CompletedProcess[str]:
    """``livecam run`` of a small synthetic input into ``output`` (a process of its own: a
    crash in the encoder must fail the test, not end pytest)."""
    return subprocess.run(
        [sys.executable, "-m", "livecam.cli", "run", "--input", "synthetic:64x48",
         "--output", f"file:{output}", "--frames", str(frames), "--set", "control.api=false",
         "--set", "control.hotkeys=false", *extra],
        capture_output=True, text=True, timeout=300, check=False)


def test_a_folder_named_as_the_output_file_is_refused_in_one_line(tmp_path: Path) -> None:
    """Before: `--output file:rec.mp4` where rec.mp4 is a folder started the run, then ended
    in an IsADirectoryError traceback at the first frame and again at the stop."""
    folder = tmp_path / "rec.mp4"
    folder.mkdir()
    with pytest.raises(OutputError, match="is a folder"):
        FileSink(path=folder).open(width=64, height=48, fps=30.0)
    run = _record(folder, 3)
    assert run.returncode == 1, run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    assert f"livecam: error: output {folder} is a folder" in run.stderr, run.stderr
    assert not any(folder.iterdir())


@pytest.mark.parametrize(("frames", "said", "realtime"),
                         [(3, "cannot finish", "false"), (3, "cannot write", "true"),
                          (200, "cannot write", "true")])
def test_a_full_disk_ends_the_recording_in_one_line(tmp_path: Path, frames: int,
                                                     said: str, realtime: str) -> None:
    """A disk that fills during a recording (here the file is a link to Linux's /dev/full,
    where every write fails with ENOSPC). Before: a traceback when the encoder's last frames
    were written at the stop (3 frames) and a segmentation fault (exit 139) when a write failed
    during the run (200 frames): PyAV crashed flushing a file whose header had failed. An
    offline run's encoder holds the first frames back (the stop writes them); a live one's
    writes each frame as it goes."""
    full = tmp_path / "rec.mp4"
    full.symlink_to("/dev/full")
    run = _record(full, frames, "--set", f"advanced.pipeline.realtime={realtime}")
    assert run.returncode == 1, (run.returncode, run.stderr)
    assert "Traceback" not in run.stderr, run.stderr
    assert f"livecam: error: {said} {full}: [Errno 28] No space left on device" in run.stderr, \
        run.stderr


def test_a_live_recording_holds_no_frames_for_the_stop_to_encode(tmp_path: Path) -> None:
    """Issue 39 item 15: frames the encoder held back (lookahead, B-frames; 16 with the
    defaults) were encoded by the stop, up to 0.6 s of a SIGTERM on a saturated machine. A
    live run's file sink (as `livecam run`/`daemon` build it) emits every frame as it goes."""
    from livecam.app import build_app
    from livecam.config import load_config

    config = load_config(None, ["advanced.pipeline.realtime=true"])
    app = build_app(config, input_spec="synthetic:64x48",
                    output_spec=f"file:{tmp_path / 'a.mp4'}")
    sink = app.sink
    assert isinstance(sink, FileSink)
    sink.open(width=64, height=48, fps=30)
    try:
        for k in range(8):
            sink.send(np.full((48, 64, 3), 10 * k, np.uint8))
        held = sum(1 for _ in sink._stream.encode(None))  # what close() would encode
    finally:
        sink._container.close()  # flushed above: close() would flush a second time
    assert held == 0


def test_a_disk_that_fills_part_way_is_said_not_left_as_a_file_cut_short(
        tmp_path: Path) -> None:
    """A disk with room for the file's start only (a real tmpfs, 8 KB left). Before: FFmpeg's
    MP4 muxer, writing fragments straight to the file, dropped the ENOSPC: every mux and the
    close returned, `livecam run` file to file exited 0 and its output held 2 of 4 frames
    (`livecam demo` the same). Now the write is refused with the file named."""
    from tests.disk_faults import full_folder

    def keep_room(folder: Path) -> None:
        (folder / "room").write_bytes(b"\0" * 8 * 1024)

    rng = np.random.default_rng(0)
    with full_folder(tmp_path / "disk", size_kib=128, prepare=keep_room) as disk:
        (disk / "room").unlink()
        out = disk / "rec.mp4"
        sink = FileSink(path=out)
        sink.open(width=320, height=180, fps=30.0)
        with pytest.raises(OutputError, match=f"{out}.*No space left on device"):
            for _ in range(4):  # noise: about 26 KB a frame
                sink.send(rng.integers(0, 256, (180, 320, 3), dtype=np.uint8))
            sink.close()
        sink.close()  # after the failure: nothing more, no crash
