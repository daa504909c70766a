"""``livecam engines build`` prepares the GPU pipeline as ``livecam run`` opens it, so the first
run loads the face networks' compiled calls whole instead of compiling them (on the H200 a
first start spent 205-234 s compiling them, device runs 109-111)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from livecam.app import gpu_sections
from livecam.cli import main
from livecam.config import Config, load_config
from tests.helpers.standins import install_standin_models


def _sets(root: Path) -> list[str]:
    models_dir, manifests_dir = install_standin_models(root)
    return [f"advanced.models.dir={models_dir}", f"advanced.models.manifests_dir={manifests_dir}",
            f"advanced.engine.cache_dir={root / 'cache'}", "advanced.engine.device=cpu",
            "advanced.gpu.pipeline=always",
            "advanced.engine.torch_mode=cuda_graphs", "advanced.gpu.cuda_graphs=false",
            "advanced.analysis.detector_model=short", "analysis.max_faces=1",
            "advanced.analysis.tile_size_px=0"]


def _torch_networks_on_cpu(config: Config, device: str, *, shared: Any = None,
                           stream: int = 0) -> tuple[Any, Any]:
    """This machine has no CUDA GPU, where the follower runs the face networks' torch ports
    (compiled): here they run on the CPU, through the seam ``build_gpu_stages`` calls (the
    real follower takes MediaPipe's own networks on a CPU, which are not compiled)."""
    from livecam.gpupipe.factory import torch_follower_networks

    return torch_follower_networks(config, "cpu", shared=shared, stream=stream)


def _build(sets: list[str], *extra: str) -> int:
    args = [a for s in sets for a in ("--set", s)]
    with pytest.raises(SystemExit) as done:
        main(["engines", *args, "build", "inswapper_128", *extra])
    return int(done.value.code or 0)


@pytest.mark.slow
def test_build_prepares_the_pipeline_that_the_first_run_then_loads_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from livecam.app import SharedStages, build_app
    from livecam.gpupipe import factory
    from livecam.gpupipe.networks import compiled, precompiled
    from livecam.identity import IdentityLibrary

    sets = _sets(tmp_path)
    monkeypatch.setattr(factory, "follower_networks", _torch_networks_on_cpu)
    assert _build(sets, "--size", "320x240") == 0
    out = capsys.readouterr()
    assert "preparing the GPU pipeline for 320x240 frames" in out.err
    saved = list((tmp_path / "cache" / "inductor" / "precompiled").glob("*.bin"))
    # the detector; the mesh runs at prepare where it is captured in a CUDA graph
    assert saved and f"{len(saved)} compiled calls" in out.out
    # the first `livecam run` (a new process: nothing compiled in memory) on that camera size
    monkeypatch.setattr(precompiled, "_LOADED", {})
    monkeypatch.setattr(compiled, "_KEPT", {})
    config = load_config(None, [*sets, "swap.mode=neural"])
    stages = factory.build_gpu_stages(gpu_sections(config),
                                      IdentityLibrary.from_config(config.identity),
                                      shared=SharedStages())
    app = build_app(config, input_spec="synthetic:320x240", output_spec="null", stages=stages)
    app.open()
    app.stop()
    # the CLI above set livecam's log up as a user's run does: its lines go to stderr
    lines = [line for line in capsys.readouterr().err.splitlines()
             if "livecam.gpupipe.networks.compiled" in line]
    assert sum("compiled code loaded whole" in line for line in lines) == len(saved), lines
    assert not any("compiled the" in line for line in lines), lines


def test_a_bad_size_is_refused_before_anything_compiles(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _build(_sets(tmp_path), "--size", "1920by1080") == 2
    err = capsys.readouterr().err
    assert "--size '1920by1080': give the frame size as WxH" in err
    assert "Traceback" not in err and not (tmp_path / "cache" / "inductor").exists()


def test_without_the_gpu_pipeline_cuda_graphs_mode_has_nothing_to_build(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sets = [s for s in _sets(tmp_path) if not s.startswith("advanced.gpu.pipeline")]
    assert _build([*sets, "advanced.gpu.pipeline=never", "engine.backend=torch"]) == 2
    err = capsys.readouterr().err
    assert "nothing to compile (use --set advanced.engine.torch_mode=compiled)" in err


@pytest.mark.slow
def test_a_start_says_what_it_would_compile_and_after_the_build_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Before ``livecam engines build`` a GPU start of four streams says, before anything is
    prepared, that it will compile and for about how long; after the build (which prepares
    one stream and many) a start of four streams finds every shape prepared."""
    import logging

    from livecam.app import SharedStages
    from livecam.gpupipe import factory, shapes
    from livecam.identity import IdentityLibrary

    # no CUDA here: the plan lists what a CUDA start compiles (the swap's parts and the face
    # networks); the networks do compile on the CPU through the follower seam
    monkeypatch.setattr(shapes, "compiles_on", lambda device: True)
    monkeypatch.setattr(factory, "follower_networks", _torch_networks_on_cpu)
    sets = _sets(tmp_path)
    config = load_config(None, [*sets, "swap.mode=neural"])

    def start_check() -> list[str]:
        # a handler on the logger itself: the CLI's log set-up stops livecam's records from
        # reaching the root logger (caplog's)
        records: list[logging.LogRecord] = []
        handler = logging.Handler(logging.INFO)
        handler.emit = records.append  # type: ignore[method-assign]
        logger = logging.getLogger("livecam.gpupipe.prepared")
        logger.addHandler(handler)
        level = logger.level
        logger.setLevel(logging.INFO)
        try:
            stages = factory.build_gpu_stages(
                gpu_sections(config), IdentityLibrary.from_config(config.identity),
                shared=SharedStages(4))
            stages[-1].check_fits(320, 240)  # type: ignore[attr-defined]
        finally:
            logger.removeHandler(handler)
            logger.setLevel(level)
        return [r.getMessage() for r in records]

    before = start_check()
    assert len(before) == 1 and "this start compiles" in before[0], before
    assert "face detector" in before[0] and "swap paste-back" in before[0]
    assert "s on an H200 before the output starts" in before[0]
    assert "livecam engines build inswapper_128 --size 320x240" in before[0]
    assert _build(sets, "--size", "320x240") == 0
    out = capsys.readouterr()
    assert "1 to 64 streams" in out.err
    assert "compiled shapes recorded as prepared for starts of 1 to 64 streams" in out.out
    after = start_check()
    assert len(after) == 1 and "nothing compiles" in after[0], after


def test_a_start_that_compiled_a_shape_does_not_announce_it_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On an H100, 16 streams started in 5.6 s from a cache an earlier start had filled, yet
    said "this start compiles 4 shape(s) ... about 65 s": only ``livecam engines build``
    recorded what the cache holds. Now a start records each shape it compiled or loaded;
    one that failed (it runs uncompiled) is announced again. No CUDA here: the plan is the
    CUDA start's, and the compiles are told through the seam every compiled call tells
    (:mod:`livecam.engines.compile_progress`), as they would be on a GPU."""
    from livecam.engines import compile_progress
    from livecam.gpupipe import factory, prepared, shapes

    monkeypatch.setattr(compile_progress._LISTENING, "recorders", {})
    monkeypatch.setattr(shapes, "compiles_on", lambda device: True)
    config = load_config(None, [*_sets(tmp_path), "swap.mode=neural"])
    check = factory.start_check(gpu_sections(config), n_streams=16, device="cpu",
                                model_path=tmp_path / "none.onnx")
    plan = shapes.plan_start(config, width_px=320, height_px=240).compiled_shapes()
    folder, key = factory.compile_cache_dir(config), prepared.environment_key("cpu")
    check(320, 240)
    assert prepared.missing(folder, key, plan) == list(plan)
    *compiled, failed = plan
    for shape in compiled:
        compile_progress.started(shape.part, shape.inputs)
        compile_progress.finished(shape.part, shape.inputs, "compiled", 1.0)
    compile_progress.finished(failed.part, failed.inputs, "failed", 1.0)
    assert prepared.missing(folder, key, plan) == [failed]
    check(320, 240)  # a second stream's check keeps the one recorder
    assert len(compile_progress._LISTENING.recorders) == 1


def test_the_build_reports_each_compiled_shape_as_it_goes_and_the_total(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """On an H100 a build spent over 510 s without a line: now each shape says what it is
    when it starts and how long it took when it ends, counted against the start's plan.
    No CUDA here: the face networks' torch ports run on the CPU through the follower seam,
    and ``torch.compile`` is replaced by a wrapper that compiles nothing (a CPU compile of
    every shape takes minutes; what is checked is the reporting around each first call,
    which :class:`CompiledNetwork` makes whatever the compiler does)."""
    import torch

    from livecam.gpupipe import factory, shapes
    from livecam.gpupipe.networks import compiled

    calls: list[object] = []

    def fake_compile(module: Any, **_options: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            calls.append(module)
            return module(*args, **kwargs)
        return call

    monkeypatch.setattr(torch, "compile", fake_compile)
    monkeypatch.setattr(compiled, "precompiled_available", lambda: False)
    monkeypatch.setattr(compiled, "_KEPT", {})
    monkeypatch.setattr(shapes, "compiles_on", lambda device: True)
    monkeypatch.setattr(factory, "follower_networks", _torch_networks_on_cpu)
    sets = _sets(tmp_path)
    assert _build([*sets, "advanced.pipeline.max_streams=1"], "--size", "320x240") == 0
    err = capsys.readouterr().err.splitlines()
    config = load_config(None, [*sets, "swap.mode=neural", "advanced.pipeline.max_streams=1"])
    plan = shapes.plan_start(config, width_px=320, height_px=240).compiled_shapes()
    lines = [line for line in err if line.startswith("compiling ")]
    assert calls and lines, err
    total = len(plan)
    for k, line in enumerate(lines, start=1):
        assert line.startswith(f"compiling {k}/{total}: "), line
        assert "not in the start's plan" not in line, line
        assert line.rsplit("... ", 1)[1].endswith(" s"), line  # how and how long, same line
    described = {s.describe() for s in plan}
    assert {line.split(": ", 1)[1].rsplit(" ... ", 1)[0] for line in lines} <= described
    assert any("face detector (1,240,320,3)" in line for line in lines), lines
    # (the mesh and the swap's parts first run in a CUDA graph's capture, or on a CPU at the
    # first frame: a build on a CPU does not meet them, and the total says so)
    summary = [line for line in err if "planned shapes compiled or loaded" in line]
    assert summary == [err[-1]] and summary[0].startswith(f"{len(lines)} of {total} "), err


def test_a_full_disk_leaves_the_record_as_it_was_and_the_start_going(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A start records each compiled shape as it finishes (:class:`StartRecorder`); with the
    disk full half-way through the record's write, the record stays as it was, no temporary
    file is left in the engine cache, and the start goes on (the next start announces the
    shape again)."""
    import errno

    from livecam.gpupipe import prepared
    from livecam.gpupipe.shapes import CompiledShape

    first = CompiledShape("face mesh", ((1, 240, 320, 3), 1))
    prepared.record(tmp_path, "key", [first])
    before = (tmp_path / prepared.FILE).read_bytes()
    write_text = Path.write_text

    def full(self: Path, text: str, *args: Any, **kwargs: Any) -> int:
        write_text(self, text[:10], *args, **kwargs)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full)
    recorder = prepared.StartRecorder(tmp_path, "key")
    recorder.finished("face detector", ((1, 240, 320, 3), 1), "compiled", 1.0)
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == [prepared.FILE]
    assert (tmp_path / prepared.FILE).read_bytes() == before
    assert prepared.missing(tmp_path, "key", [first]) == []
