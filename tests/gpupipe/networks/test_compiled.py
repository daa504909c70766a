"""The face networks through ``torch.compile`` (:mod:`livecam.gpupipe.networks.compiled`): the same
results as the plain networks, the compiled code cached where ``livecam run`` points it (so a
later start takes it from there), and one tile-search detector for every stream. On the CPU
here (Inductor's C++ code: the same compile and cache path as CUDA's, slower); the CUDA check
with graphs is ``tests/gpupipe/networks/test_gpu_cuda.py``'s, run on the H200."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from livecam.analysis.roi import roi_from_detection
from livecam.gpupipe.networks.client import StreamFaceNetworks
from livecam.gpupipe.networks.compiled import CompiledNetwork, maybe_compiled
from livecam.gpupipe.networks.shared import SharedFaceNetworks, one_stream
from livecam.gpupipe.networks.tiles import GpuTileSearch

TINY = """
import torch

class Tiny(torch.nn.Module):
    size = 5

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x, scale=None):
        y = torch.relu(self.conv(x)) + 1.0
        return y * scale if scale is not None else y
"""


def _tiny() -> torch.nn.Module:
    # the same class text in this process and the fresh one below; a module-level name here,
    # so torch can save its compiled calls (they name the class)
    space: dict[str, object] = {"__name__": __name__}
    exec(TINY, space)
    globals()["Tiny"] = space["Tiny"]
    return space["Tiny"]().eval()  # type: ignore[operator]


@pytest.mark.slow  # torch.compile on the CPU
def test_a_compiled_network_gives_the_modules_results_and_caches_its_code(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    module = _tiny()
    net = CompiledNetwork(module, cache_dir=tmp_path, name="tiny net")
    x = torch.rand(2, 3, 8, 8)
    with caplog.at_level(logging.INFO, logger="livecam.gpupipe.networks.compiled"), \
            torch.inference_mode():
        got = net(x)
        again = net(x, scale=None)  # the same call: no second log line
        scaled = net(x, scale=torch.full((1,), 2.0))
        want = module(x)
    assert torch.allclose(got, want, atol=1e-5) and torch.allclose(again, want, atol=1e-5)
    assert torch.allclose(scaled, want * 2.0, atol=1e-5)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3, lines  # before the first compile, and after each shape's
    assert lines[0].startswith("the tiny net: compiling it, or taking its compiled code")
    assert "compiled the tiny net for inputs [(2, 3, 8, 8)]" in lines[1]
    assert net.size == 5 and net.conv is module.conv  # the module's attributes
    assert any(tmp_path.rglob("*")), "nothing was written into the cache folder"
    assert maybe_compiled(module, None, "tiny net") is module


@pytest.mark.slow  # torch.compile on the CPU
def test_a_later_start_takes_the_compiled_code_from_the_cache(tmp_path: Path) -> None:
    """Two fresh processes (two starts): the first compiles, the second finds the code."""
    script = textwrap.dedent(TINY) + textwrap.dedent(f"""
        import logging
        from pathlib import Path
        from livecam.gpupipe.networks.compiled import CompiledNetwork
        logging.basicConfig(level=logging.INFO, format="%(message)s")
        net = CompiledNetwork(Tiny().eval(), cache_dir=Path({str(tmp_path)!r}), name="tiny net")
        with torch.inference_mode():
            net(torch.rand(2, 3, 8, 8))
    """)

    def start() -> str:
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              timeout=600, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stderr

    first, second = start(), start()
    assert "compiled the tiny net" in first
    assert len(list((tmp_path / "precompiled").glob("*.bin"))) == 1
    # loaded whole: no dynamo trace (precompiled.py; before it, "taken from the cache")
    assert "the tiny net for inputs [(2, 3, 8, 8)]: compiled code loaded whole" in second


@pytest.mark.slow  # torch.compile on the CPU
def test_a_damaged_saved_call_is_compiled_again_and_gives_the_modules_results(
        tmp_path: Path, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A file cut short (a disk filled, another build's file under the same name): the
    network warns, compiles anew, replaces the file, and computes what the module does.
    (The process's loaded calls are emptied before each new network: a new start.)"""
    from livecam.gpupipe.networks import precompiled

    module = _tiny()
    x = torch.rand(2, 3, 8, 8)
    with torch.inference_mode():
        CompiledNetwork(module, cache_dir=tmp_path, name="tiny net")(x)
    (saved,) = (tmp_path / "precompiled").glob("*.bin")
    saved.write_bytes(saved.read_bytes()[:100])
    monkeypatch.setattr(precompiled, "_LOADED", {})
    with caplog.at_level(logging.INFO, logger="livecam.gpupipe.networks"), torch.inference_mode():
        got = CompiledNetwork(module, cache_dir=tmp_path, name="tiny net")(x)
        assert torch.allclose(got, module(x), atol=1e-5)
    assert "could not be loaded" in caplog.text and "compiled the tiny net" in caplog.text
    assert saved.stat().st_size > 1000
    monkeypatch.setattr(precompiled, "_LOADED", {})
    with caplog.at_level(logging.INFO, logger="livecam.gpupipe.networks"), torch.inference_mode():
        again = CompiledNetwork(module, cache_dir=tmp_path, name="tiny net")(x)
    assert torch.allclose(again, got) and "compiled code loaded whole" in caplog.text


def test_a_network_with_other_weights_or_settings_never_loads_anothers_saved_call() -> None:
    """The file name holds the weights and the settings a trace may keep as constants (a
    detector's score threshold), the input shapes, torch's version and livecam's source."""
    from livecam.gpupipe.networks.precompiled import PrecompiledCalls

    def path(module: torch.nn.Module, signature: tuple[object, ...] = ("x",)) -> Path:
        return PrecompiledCalls(module, Path("/cache"), "tiny net").path(signature)

    one, other = _tiny(), _tiny()
    assert path(one) == path(other)  # the same weights and settings: the same file
    other.min_score = 0.7  # type: ignore[assignment]
    assert path(one) != path(other)
    heavier = _tiny()
    with torch.no_grad():
        heavier.conv.weight[0, 0, 0, 0] += 1e-3
    assert path(one) != path(heavier)
    assert path(one) != path(one, ("y",))


@pytest.mark.slow  # torch.compile on the CPU
def test_compiled_face_networks_find_what_the_plain_ones_find(astronaut_bgr: np.ndarray,
                                                              tmp_path: Path) -> None:
    """The real BlazeFace and face mesh compiled (short range, one region: the CPU compiles
    slowly) against the same networks uncompiled, on the astronaut."""
    frame = np.full((360, 640, 3), 90, np.uint8)
    frame[20:340, 160:480] = astronaut_bgr[40:360, 100:420]
    found = []
    for compile_dir in (None, tmp_path):
        nets = one_stream(device="cpu", detector_model="short", min_score=0.5,
                               max_rois=1, compile_dir=compile_dir)
        nets.open()
        try:
            faces = nets.detect(frame.copy())
            assert len(faces) == 1
            roi = roi_from_detection(faces.boxes_xyxy[0], faces.keypoints_xy[0])
            mesh = nets.landmarks(frame.copy(), [roi])[0]
            assert mesh is not None
            found.append((faces.boxes_xyxy[0], mesh.landmarks_xy))
        finally:
            nets.close()
    (box, mesh), (box_c, mesh_c) = found
    assert np.abs(box - box_c).max() < 0.5
    assert np.linalg.norm(mesh - mesh_c, axis=1).max() < 0.5
    assert any((tmp_path).rglob("*"))


def test_every_streams_tile_search_shares_one_detector() -> None:
    """Compiled, one detector is one compile at start, not one a stream; and one batch (on
    CUDA one graph) a frame size for every stream."""
    shared = SharedFaceNetworks(device="cpu", n_streams=3, detector_model="full",
                                min_score=0.5, max_rois=1)
    clients = [shared.slot_for(k) for k in range(3)]
    searches = [GpuTileSearch(c, tile_size_px=640) for c in clients]
    for search in searches:
        search.open()
    try:
        batches = {id(s._batches) for s in searches}
        assert len(batches) == 1
        detector = searches[0]._batches._detector  # type: ignore[union-attr]
        assert detector is shared.tile_detector(16)
        assert detector.max_faces == 16  # SLOTS_PER_TILE
        for search in searches:
            search.prepare(1280, 720)
        assert len({id(s._batches.batch(720, 1280, 640)) for s in searches}) == 1  # type: ignore[union-attr]
    finally:
        for search, client in zip(searches, clients, strict=True):
            search.close()
            client.close()
    own = one_stream(device="cpu", detector_model="full", max_rois=1)
    search = GpuTileSearch(own, tile_size_px=640)
    search.open()
    try:
        assert search._batches is own.tile_batches(16)
        assert own.tile_batches(16)._detector is own.tile_detector(16)
    finally:
        search.close()
        own.close()


def test_livecam_run_compiles_the_networks_into_the_engine_cache_unless_told_not_to(
        tmp_path: Path) -> None:
    from livecam.config import load_config
    from livecam.gpupipe.factory import follower_networks, networks_compile_dir

    config = load_config(None, [f"advanced.engine.cache_dir={tmp_path}"])
    assert networks_compile_dir(config) == tmp_path / "inductor"
    nets, _search = follower_networks(config, "cuda:0")  # not opened: nothing runs here
    assert nets.shared.compile_dir == tmp_path / "inductor"
    off = load_config(None, [f"advanced.engine.cache_dir={tmp_path}",
                             "advanced.gpu.compile_networks=false"])
    assert networks_compile_dir(off) is None
    assert follower_networks(off, "cuda:0")[0].shared.compile_dir is None


def test_a_network_that_cannot_compile_runs_as_it_is_and_the_log_says_so(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A machine whose compiler is broken (here: Inductor's C++ compiler named as a file that
    does not exist) still runs the networks, uncompiled, and says why."""
    import torch._inductor.config as inductor_config

    module = _tiny()
    net = CompiledNetwork(module, cache_dir=tmp_path, name="tiny net")
    x = torch.rand(1, 3, 6, 6)
    # torch's own config patch (undone on exit; a plain setattr would break the config for
    # the tests after this one)
    with inductor_config.patch({"cpp.cxx": ("/nonexistent/g++",)}), \
            caplog.at_level(logging.INFO, logger="livecam.gpupipe.networks.compiled"), \
            torch.inference_mode():
        got = net(x)
        again = net(torch.rand(2, 3, 6, 6))  # another shape: not tried again
        want = module(x)
    assert torch.allclose(got, want) and again.shape == (2, 4, 6, 6)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "could not compile the tiny net" in warnings[0]
    assert "advanced.gpu.compile_networks: false" in warnings[0]


def test_on_a_gpu_without_triton_the_networks_run_as_they_are(
        tmp_path: Path, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Windows' torch wheels bring no Triton: the networks run uncompiled, and the log names
    the package that brings it. (No CUDA here: the module's device is what it asks.)"""
    import importlib.util

    from livecam.gpupipe.networks import compiled

    module = _tiny()
    monkeypatch.setattr(compiled, "_device_type", lambda _m: "cuda")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "triton" else real(name, *a))
    monkeypatch.setattr(compiled.sys, "platform", "win32")
    with caplog.at_level(logging.WARNING, logger="livecam.gpupipe.networks.compiled"):
        assert maybe_compiled(module, tmp_path, "face mesh") is module
    assert "pip install triton-windows" in caplog.text


def test_a_rebuilt_chain_calls_the_networks_compiled_for_the_last_one(tmp_path: Path) -> None:
    """A config reload rebuilds a stream's networks: compiled, they are the same objects (no
    second trace); uncompiled, new modules as before. Nothing is called, so nothing compiles."""
    def nets(compile_dir: Path | None) -> StreamFaceNetworks:
        made = one_stream(device="cpu", detector_model="auto", max_rois=1,
                               compile_dir=compile_dir)
        made.open()
        return made

    def inner(made: StreamFaceNetworks) -> SharedFaceNetworks:
        assert isinstance(made.shared, SharedFaceNetworks)
        return made.shared

    first, second = nets(tmp_path), nets(tmp_path)
    assert isinstance(inner(first)._detectors[0], CompiledNetwork)
    assert [id(d) for d in inner(first)._detectors] == [id(d) for d in inner(second)._detectors]
    assert inner(first)._mesh is inner(second)._mesh
    assert first.tile_detector(16) is second.tile_detector(16)
    assert inner(nets(tmp_path / "elsewhere"))._mesh is not inner(first)._mesh
    plain, plain_again = nets(None), nets(None)
    assert inner(plain)._mesh is not inner(plain_again)._mesh
    for made in (first, second, plain, plain_again):
        made.close()


def test_a_cache_folder_that_cannot_be_made_runs_the_network_as_it_is_and_says_why(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """advanced.engine.cache_dir under a file (or anywhere not writable): the network still runs,
    and the warning names the cause, not only torch's wrapper line."""
    blocker = tmp_path / "a file"
    blocker.write_text("")
    module = _tiny()
    net = CompiledNetwork(module, cache_dir=blocker / "cache", name="tiny net")
    x = torch.rand(1, 3, 6, 6)
    with caplog.at_level(logging.WARNING, logger="livecam.gpupipe.networks.compiled"), \
            torch.inference_mode():
        assert torch.allclose(net(x), module(x))
    assert "NotADirectoryError" in caplog.text, caplog.text


@pytest.mark.slow  # the torch face networks on the CPU: over a minute on 2 cores
def test_streams_calling_a_shared_network_first_at_once_each_get_their_results(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Four stream threads make the first call together: one compiles, the others wait for
    it and reuse it; every result is the module's."""
    import threading

    module = _tiny()
    net = CompiledNetwork(module, cache_dir=tmp_path, name="tiny net")
    inputs = [torch.rand(2, 3, 8, 8) for _ in range(4)]
    got: dict[int, torch.Tensor] = {}
    start = threading.Barrier(4)

    def call(k: int) -> None:
        start.wait()
        with torch.inference_mode():
            got[k] = net(inputs[k])

    threads = [threading.Thread(target=call, args=(k,)) for k in range(4)]
    with caplog.at_level(logging.INFO, logger="livecam.gpupipe.networks.compiled"):
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
    with torch.inference_mode():
        for k in range(4):
            assert torch.allclose(got[k], module(inputs[k]), atol=1e-5)
    compiled_lines = [r.getMessage() for r in caplog.records
                      if r.getMessage().startswith("compiled the tiny net")]
    assert len(compiled_lines) == 1, caplog.text


class _Branchy(torch.nn.Module):
    """A forward that branches on a value: dynamo cannot trace it whole."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if float(x.sum()) > 0:
            return x * 2.0
        return x - 1.0


def test_a_call_torch_cannot_save_whole_is_traced_and_not_tried_again(
        tmp_path: Path, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Seen on the H200 (run 110): one paste-back shape failed to save whole and every start
    paid its failed compile again. Now the reason is kept beside the file; the call runs
    through dynamo as before, and a later start goes there at once."""
    from livecam.gpupipe.networks import precompiled

    x = torch.rand(2, 3)
    with caplog.at_level(logging.INFO, logger="livecam.gpupipe.networks"), torch.inference_mode():
        got = CompiledNetwork(_Branchy(), cache_dir=tmp_path, name="branchy net")(x)
    assert torch.allclose(got, x * 2.0)
    (cannot,) = (tmp_path / "precompiled").glob("*.cannot")
    assert "cannot be saved whole" in caplog.text
    caplog.clear()
    monkeypatch.setattr(precompiled, "_LOADED", {})
    tried = []
    monkeypatch.setattr(torch._dynamo.eval_frame.OptimizedModule, "_aot_compile",
                        lambda *a: tried.append(a))
    with caplog.at_level(logging.INFO, logger="livecam.gpupipe.networks"), torch.inference_mode():
        again = CompiledNetwork(_Branchy(), cache_dir=tmp_path, name="branchy net")(x)
    assert torch.allclose(again, x * 2.0) and not tried
    assert cannot.read_text().split(":")[0] in caplog.text


class _Typed(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.dtype]:
        return x * 2.0, torch.float16  # rebuilt by the saved code from the global ``torch``


def test_a_saved_call_whose_code_names_a_global_loads_whole(
        tmp_path: Path, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Seen on the H200 (run 111): the tile detector's saved call named ``torch`` and torch's
    own loader refused it ("Missing required external references"), so every start traced
    it again. The loader is given the forward's module globals."""
    from livecam.gpupipe.networks import precompiled

    x = torch.rand(2, 3)
    with torch.inference_mode():
        first = CompiledNetwork(_Typed(), cache_dir=tmp_path, name="typed net")(x)
    monkeypatch.setattr(precompiled, "_LOADED", {})  # a new start
    with caplog.at_level(logging.INFO, logger="livecam.gpupipe.networks"), torch.inference_mode():
        again = CompiledNetwork(_Typed(), cache_dir=tmp_path, name="typed net")(x)
    assert "compiled code loaded whole" in caplog.text
    assert not list((tmp_path / "precompiled").glob("*.cannot"))
    assert torch.equal(again[0], x * 2.0) and again[1] is torch.float16 and first[1] is again[1]
