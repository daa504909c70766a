"""What a livecam killed in the middle of writing a model leaves in the store, and who removes it.

Before: an import killed with kill -9 left its private copy (``.<file>.*.import/``, as large
as the model) in the models dir for good, and a fetch killed midway left its ``.part`` there
after the model was installed another way: nothing read them, nothing removed them. Now a
later import, fetch or ``models verify`` removes them, but never what a live process is still
writing.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from livecam.engines.fetch import fetch_model
from livecam.engines.store import ModelStore
from tests.engines.store_support import (
    leftovers,
    let_go,
    open_store,
    paused,
    serve,
    sha,
    two_payloads,
    write_manifest,
)


def _store_with_two_copies(tmp_path: Path, url: str = "http://127.0.0.1:9/none",
                           ) -> tuple[ModelStore, Path, Path]:
    """A store whose model accepts two different files (two published hashes), and both."""
    a, b = two_payloads(2)
    write_manifest(tmp_path, [(url, sha(a)), ("http://127.0.0.1:9/other", sha(b))])
    src_a, src_b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    src_a.write_bytes(a)
    src_b.write_bytes(b)
    return open_store(tmp_path), src_a, src_b


def _import_folders(store: ModelStore) -> list[Path]:
    return sorted(p for p in store.models_dir.iterdir() if p.name.endswith(".import"))


def _cli(tmp_path: Path, *args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    from livecam.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["models", "--set", f"advanced.models.dir={tmp_path / 'models'}", "--set",
              f"advanced.models.manifests_dir={tmp_path / 'manifests'}", *args])
    return int(exc.value.code or 0), capsys.readouterr().err


def test_the_next_import_removes_the_folder_of_an_import_killed_midway(tmp_path: Path) -> None:
    store, src_a, src_b = _store_with_two_copies(tmp_path)
    with paused(tmp_path, "import-hashing", str(src_a)):
        pass  # killed while it hashed its copy
    assert len(_import_folders(store)) == 1, "the kill should have left the import's folder"
    store.adopt("standin", src_b)
    assert store.path("standin").read_bytes() == src_b.read_bytes()
    assert leftovers(store) == []


def test_models_verify_removes_the_folder_of_an_import_killed_midway(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store, src_a, _ = _store_with_two_copies(tmp_path)
    store.adopt("standin", src_a)
    with paused(tmp_path, "import-hashing", str(src_a)):
        pass
    assert len(_import_folders(store)) == 1
    code, err = _cli(tmp_path, "verify", capsys=capsys)
    assert code == 0, err
    assert leftovers(store) == []
    assert "removed 1 folder" in err and "stopped midway" in err, err  # where the space went


def test_a_live_import_keeps_its_folder_while_another_import_cleans_up(tmp_path: Path) -> None:
    """A runs (stopped while it hashes its copy) while B imports: B must not take A's folder
    for a dead one's; A then goes on and installs its own file."""
    store, src_a, src_b = _store_with_two_copies(tmp_path)
    with paused(tmp_path, "import-hashing", str(src_a)) as a:
        folders = _import_folders(store)
        assert len(folders) == 1
        store.adopt("standin", src_b)
        assert _import_folders(store) == folders, "B removed the folder A still writes"
        code, out, err = let_go(a)
        assert (code, out) == (0, "done\n"), err
    assert store.path("standin").read_bytes() == src_a.read_bytes()  # A moved in last
    assert store.verify("standin", force=True) == sha(src_a.read_bytes())
    assert leftovers(store) == []


def test_an_import_removes_the_partial_download_of_a_fetch_killed_midway(
        tmp_path: Path) -> None:
    """The model installed another way, a later fetch never resumes that ``.part``."""
    payload, _ = two_payloads(4)
    with serve(payload) as (url, _served):
        write_manifest(tmp_path, [(url, sha(payload))])
        store = open_store(tmp_path)
        with paused(tmp_path, "fetch", url):
            pass  # killed in the middle of the download
        assert store.partial_path("standin").exists()
        src = tmp_path / "copy.onnx"
        src.write_bytes(payload)
        store.adopt("standin", src)
        assert leftovers(store) == []
        fetch_model(store, "standin", retries=1)  # already there: nothing to fetch
        assert leftovers(store) == []


def test_a_partial_download_a_live_fetch_writes_is_kept(tmp_path: Path) -> None:
    payload, _ = two_payloads(4)
    with serve(payload) as (url, _served):
        write_manifest(tmp_path, [(url, sha(payload))])
        store = open_store(tmp_path)
        src = tmp_path / "copy.onnx"
        src.write_bytes(payload)
        with paused(tmp_path, "fetch", url) as fetch:
            part = store.partial_path("standin")
            assert part.exists()
            store.adopt("standin", src)
            assert part.exists(), "the import removed the .part a live fetch is writing"
            code, out, err = let_go(fetch)  # it goes on, and installs the same bytes
            assert (code, out) == (0, "done\n"), err
        assert store.verify("standin", force=True) == hashlib.sha256(payload).hexdigest()
        assert leftovers(store) == []
