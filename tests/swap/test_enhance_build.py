"""swap.enhancer from the config: manifests, model checks at start, the stage it ends up in."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from livecam.config.engine import EngineConfig, ModelsConfig
from livecam.core.errors import ConfigError, ModelError
from livecam.engines.manifest import default_manifests_dir, load_manifests
from livecam.engines.store import ModelStore, sha256_file
from livecam.swap.enhance import build_face_enhancer
from tests.helpers.standins import build_enhancer

ENHANCERS = ("codeformer", "gfpgan_1.4", "gpen_bfr_256", "gpen_bfr_512")


def test_enhancer_manifests_pin_published_files() -> None:
    manifests = load_manifests()
    for name in ENHANCERS:
        m = manifests[name]
        assert m.kind == "enhancer" and m.crop_size_px in (256, 512)
        assert m.accepted_sha256, f"{name} lists no documented sha256"
        assert all(s.size_bytes for s in m.sources)
        assert m.template in ("ffhq_512", "arcface_128")
    assert [s.name for s in manifests["codeformer"].inputs] == ["input", "weight"]


def test_unknown_enhancer_is_a_config_error_listing_the_choices() -> None:
    engine = EngineConfig(backend="onnxruntime", device="cpu")
    assert build_face_enhancer("none", blend=0.8, fidelity=0.5, engine_config=engine,
                               models_config=ModelsConfig()) is None
    with pytest.raises(ConfigError, match=r"gfpgan_1\.4.*gpen_bfr_256"):
        build_face_enhancer("inswapper_128", blend=0.8, fidelity=0.5, engine_config=engine,
                            models_config=ModelsConfig())


def test_missing_enhancer_fails_at_open_naming_fetch(tmp_path: Path) -> None:
    enhancer = build_face_enhancer("gpen_bfr_256", blend=0.8, fidelity=0.5,
                                   engine_config=EngineConfig(backend="onnxruntime",
                                                              device="cpu"),
                                   models_config=ModelsConfig(dir=str(tmp_path)))
    assert enhancer is not None
    with pytest.raises(ModelError, match=r"livecam models fetch gpen_bfr_256"):
        enhancer.open()


def test_imported_enhancer_runs_in_the_neural_swap(tmp_path: Path,
                                                   astronaut_bgr: np.ndarray) -> None:
    """A stand-in imported under a manifest that accepts it, built from the config exactly
    as `livecam run` builds the swap: the enhanced face differs from the plain swap's."""
    from livecam.app import build_swap_stages
    from livecam.config import load_config
    from livecam.core.types import Frame, Packet, RuntimeState
    from tests.helpers.standins import build_arcface, build_inswapper

    build, manifests, models = tmp_path / "build", tmp_path / "manifests", tmp_path / "models"
    for d in (build, manifests, models):
        d.mkdir()
    built = {"inswapper_128": build_inswapper(build / "inswapper_128.onnx"),
             "w600k_r50": build_arcface(build / "w600k_r50.onnx"),
             "gpen_bfr_256": build_enhancer(build / "gpen.onnx", size_px=256)}
    for name, path in built.items():
        data = yaml.safe_load((default_manifests_dir() / f"{name}.yaml").read_text())
        data["sources"] = [{"url": "file:///standin", "sha256": sha256_file(path)}]
        (manifests / f"{name}.yaml").write_text(yaml.safe_dump(data))
    store = ModelStore(models, load_manifests(manifests))
    for name, path in built.items():
        store.adopt(name, path)

    from livecam.analysis.photo import analyze_photo

    faces = analyze_photo(astronaut_bgr).with_fields(track_ids=np.array([3], np.int64))
    packet = Packet(frame=Frame(0, 0, astronaut_bgr), image_bgr=astronaut_bgr, faces=faces,
                    state=RuntimeState(active_identity="a"))
    outs = {}
    for enhancer in ("none", "gpen_bfr_256"):
        config = load_config(None, overrides=[
            "swap.mode=neural", f"swap.enhancer={enhancer}", "engine.backend=onnxruntime",
            "advanced.engine.device=cpu", f"advanced.models.dir={models}",
            f"advanced.models.manifests_dir={manifests}"])
        (stage,) = build_swap_stages(config, _NoIdentities())
        stage.source_embedding = lambda name: np.ones(512, np.float32)  # type: ignore[attr-defined]
        with stage:
            outs[enhancer] = stage.process(packet).image_bgr
    plain, enhanced = outs["none"], outs["gpen_bfr_256"]
    assert (plain != astronaut_bgr).any(axis=-1).sum() > 3000
    differs = (enhanced != plain).any(axis=-1)
    assert differs.sum() > 3000
    x1, _, x2, y2 = faces.boxes_xyxy[0]
    ys, xs = np.nonzero(differs)
    pad = 0.6 * (x2 - x1)
    assert xs.min() > x1 - pad and xs.max() < x2 + pad and ys.max() < y2 + pad


class _NoIdentities:
    def load(self, name: str) -> object:
        raise AssertionError("the test gives the embedding directly")


def test_models_import_and_list_through_the_cli(tmp_path: Path) -> None:
    """`livecam models import` refuses a file that is not the published enhancer (one line
    naming the expected sha256, no traceback, the file left where it was) and installs one its
    manifest accepts."""
    import subprocess
    import sys

    standin = build_enhancer(tmp_path / "gpen.onnx", size_px=256)
    models = tmp_path / "models"

    def livecam(*verb: str, manifests_dir: Path | None = None
                ) -> subprocess.CompletedProcess[str]:
        sets = ["--set", f"advanced.models.dir={models}"]
        if manifests_dir is not None:
            sets += ["--set", f"advanced.models.manifests_dir={manifests_dir}"]
        return subprocess.run([sys.executable, "-m", "livecam.cli", "models", *sets, *verb],
                              capture_output=True, text=True, timeout=120)

    refused = livecam("import", "gpen_bfr_256", str(standin))
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "bad8bf04" in refused.stderr and "not imported" in refused.stderr
    assert standin.exists()
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    data = yaml.safe_load((default_manifests_dir() / "gpen_bfr_256.yaml").read_text())
    data["sources"] = [{"url": "file:///standin", "sha256": sha256_file(standin)}]
    (manifests / "gpen_bfr_256.yaml").write_text(yaml.safe_dump(data))
    accepted = livecam("import", "gpen_bfr_256", str(standin), manifests_dir=manifests)
    assert accepted.returncode == 0, accepted.stderr
    listed = livecam("list", manifests_dir=manifests)
    assert "gpen_bfr_256" in listed.stdout and "installed" in listed.stdout
