"""The installed ``livecam`` command, run as a user runs it (subprocesses)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import av
import pytest


def livecam(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "livecam.cli", *args], capture_output=True,
                          text=True, timeout=timeout)


def test_help_lists_commands() -> None:
    result = livecam("--help")
    assert result.returncode == 0
    for command in ("run", "doctor"):
        assert command in result.stdout
    assert "--input" in livecam("run", "--help").stdout


def test_help_does_not_import_heavy_packages() -> None:
    code = ("import sys; from livecam.cli import build_parser; build_parser(); "
            "heavy = [m for m in ('mediapipe', 'torch', 'onnxruntime', 'av', 'cv2', 'tensorrt') "
            "if m in sys.modules]; print(heavy); sys.exit(1 if heavy else 0)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_doctor_reports_and_says_file_only() -> None:
    # this machine has no camera and no v4l2loopback: file only, exit status 1
    result = livecam("doctor")
    assert result.returncode == 1, result.stderr
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("verdict: file only (no camera and no virtual camera)"), last
    # optional parts are listed after their own heading, apart from the default path
    head = result.stdout.index("Optional (")
    assert result.stdout.index("TensorRT") > head > result.stdout.index("cameras")
    for topic in ("cameras", "virtual camera", "torch", "TensorRT", "onnxruntime"):
        assert topic in result.stdout
    # the backend `auto` would pick, with its reason (no GPU here: onnxruntime on the CPU)
    assert "engine backend (auto): onnxruntime: auto:" in result.stdout
    # models the neural swap needs: missing in a fresh user dir, with the command to get them
    assert "neural model inswapper_128: not installed" in result.stdout
    assert "livecam models fetch inswapper_128" in result.stdout
    # ai-edge-litert is a dependency: the face models run directly, not through MediaPipe
    assert "[ok  ] face model runtime: LiteRT" in result.stdout
    # whether the face networks can compile on a GPU (informational without CUDA)
    assert "torch.compile on the GPU (Triton):" in result.stdout


def test_run_synthetic_to_file(tmp_path: Path) -> None:
    out = tmp_path / "x.mp4"
    result = livecam("run", "--input", "synthetic:320x240", "--output", f"file:{out}",
                     "--frames", "20", "--set", "capture.fps=60")
    assert result.returncode == 0, result.stderr
    with av.open(str(out)) as container:
        assert sum(1 for _ in container.decode(video=0)) == 20


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="v4l2loopback advice is Linux's")
def test_missing_virtual_camera_says_how_to_create_one() -> None:
    # CI has no v4l2loopback device, which is exactly the situation this message is for.
    result = livecam("run", "--input", "synthetic:320x240", "--output", "virtualcam",
                     "--frames", "1")
    assert result.returncode == 1
    assert "modprobe v4l2loopback" in result.stderr and "exclusive_caps=1" in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_input_file_is_one_clear_line(tmp_path: Path) -> None:
    result = livecam("run", "--input", f"file:{tmp_path}/none.mp4", "--output", "null")
    assert result.returncode == 2  # bad input, like every other (issue 11)
    assert "does not exist" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(("argv", "expected"), [
    (["ctl", "status", "--stream", "1"], {"stream": 1}),
    (["ctl", "select", "alice", "--json"], {"json": True, "name": "alice"}),
    (["ctl", "--stream", "2", "bypass", "on"], {"stream": 2}),
    (["models", "import", "w600k_r50", "m.onnx", "--set", "advanced.models.dir=/x"],
     {"overrides": ["advanced.models.dir=/x"]}),
    (["identity", "list", "--json", "--set", "identity.library_dir=/x"],
     {"json": True, "overrides": ["identity.library_dir=/x"]}),
    (["engines", "--set", "advanced.engine.device=cpu", "list", "--set",
      "engine.backend=onnxruntime",
      "--log-level", "DEBUG"],
     {"overrides": ["advanced.engine.device=cpu", "engine.backend=onnxruntime"],
      "log_level": "DEBUG"}),
])
def test_a_subcommands_options_may_come_after_its_verb(argv: list[str],
                                                       expected: dict[str, object]) -> None:
    """Before: `livecam ctl status --stream 1` and `livecam models import NAME PATH --set ...`
    were "unrecognized arguments": the options belonged to the word before the verb."""
    from livecam.cli import build_parser
    from livecam.subcommands.common import overrides_of

    args = build_parser().parse_args(argv)
    seen = {key: getattr(args, key) for key in expected if key != "overrides"}
    if "overrides" in expected:
        seen["overrides"] = overrides_of(args)
    assert seen == expected
