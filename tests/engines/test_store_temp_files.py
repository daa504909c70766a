"""The temp files of the model store's stamps and pins, when a livecam is killed while it writes
one, and who removes them.

Before: a stamp (``.<file>.sha256.json``) or ``pins.json`` is written through a temp file
beside it (``.<name>.*.tmp``); a process killed with kill -9 before the rename left that temp
file in the models dir for good: nothing read it, nothing removed it. Now the next import,
fetch or ``models verify`` removes it, but never the one a live process is still writing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.core.stopped_write import let_go, stopped, temp_files
from tests.engines.store_support import leftovers, open_store, sha, two_payloads, write_manifest

_STAMP = ".standin.onnx.sha256.json.*.tmp"
_PINS = ".pins.json.*.tmp"


def _settings(tmp_path: Path) -> list[str]:
    return ["--set", f"advanced.models.dir={tmp_path / 'models'}", "--set",
            f"advanced.models.manifests_dir={tmp_path / 'manifests'}"]


def _cli(tmp_path: Path, *args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    from livecam.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["models", *_settings(tmp_path), *args])
    return int(exc.value.code or 0), capsys.readouterr().err


def _import_args(tmp_path: Path, stop_at: str) -> list[str]:
    """A first import of a model: published sha256 (its stamp is written), or none and
    --trust (its pin is written first)."""
    payload, _ = two_payloads(1)
    write_manifest(tmp_path, [("http://127.0.0.1:9/none", sha(payload) if stop_at == _STAMP
                               else None)])
    src = tmp_path / "copy.onnx"
    src.write_bytes(payload)
    trust = ["--trust"] if stop_at == _PINS else []
    return ["models", *_settings(tmp_path), "import", "standin", str(src), *trust]


@pytest.mark.parametrize("stop_at", [_STAMP, _PINS], ids=["stamp", "pins"])
def test_models_verify_removes_the_temp_file_of_an_import_killed_mid_write(
        tmp_path: Path, stop_at: str, capsys: pytest.CaptureFixture[str]) -> None:
    with stopped(stop_at, *_import_args(tmp_path, stop_at)) as (_, tmp):
        pass  # killed with its temp file written, not yet renamed
    models = tmp_path / "models"
    assert tmp.parent == models and temp_files(models) == [tmp.name]
    code, err = _cli(tmp_path, "verify", capsys=capsys)
    assert code == 0, err
    assert temp_files(models) == []
    assert leftovers(open_store(tmp_path)) == []


def test_the_next_import_removes_the_stamp_temp_of_a_verify_killed_mid_write(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = _import_args(tmp_path, _STAMP)
    store = open_store(tmp_path)
    src = Path(args[-1])
    store.adopt("standin", src)
    with stopped(_STAMP, "models", *_settings(tmp_path), "verify") as (_, tmp):
        pass
    assert temp_files(store.models_dir) == [tmp.name]
    code, err = _cli(tmp_path, "import", "standin", str(src), capsys=capsys)
    assert code == 0, err
    assert temp_files(store.models_dir) == []


@pytest.mark.parametrize("stop_at", [_STAMP, _PINS], ids=["stamp", "pins"])
def test_the_temp_file_a_live_import_writes_is_kept(tmp_path: Path, stop_at: str) -> None:
    """The import stopped before its rename holds the lock of what it writes: a tidy meanwhile
    (what import, fetch and ``models verify`` do first) leaves its temp file alone, and the
    import then goes on and installs the model."""
    with stopped(stop_at, *_import_args(tmp_path, stop_at)) as (proc, tmp):
        store = open_store(tmp_path)
        store.tidy()
        assert tmp.is_file(), "the tidy removed the temp file a live import writes"
        code, _, err = let_go(proc)
        assert code == 0, err
    assert store.verify("standin", force=True) == sha(two_payloads(1)[0])
    assert temp_files(store.models_dir) == [] and leftovers(store) == []
