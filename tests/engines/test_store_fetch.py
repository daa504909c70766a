"""Model store and fetch against a local HTTP server on 127.0.0.1 serving a stand-in file
(tests/engines/store_support.py)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from livecam.core.errors import ConfigError, ModelError, UsageError
from livecam.engines.fetch import fetch_model
from livecam.engines.manifest import load_manifest, load_manifests
from tests.engines.store_support import Served, serve
from tests.engines.store_support import make_store as _store

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def server() -> Iterator[tuple[str, Served]]:
    with serve(bytes(range(256)) * 4096) as served:  # 1 MiB stand-in "model"
        yield served


def test_fetch_verifies_and_installs(tmp_path: Path, server: tuple[str, Served]) -> None:
    url, served = server
    store = _store(tmp_path, url, hashlib.sha256(served.payload).hexdigest())
    seen: list[tuple[int, int | None]] = []
    path = fetch_model(store, "standin", progress=lambda done, total: seen.append((done, total)))
    assert path.read_bytes() == served.payload
    assert seen[-1] == (len(served.payload), len(served.payload))
    assert store.require("standin") == path


def test_fetch_resumes_with_a_range_request(tmp_path: Path, server: tuple[str, Served]) -> None:
    url, served = server
    served.cut_first_after = 300_000
    store = _store(tmp_path, url, hashlib.sha256(served.payload).hexdigest())
    path = fetch_model(store, "standin", retries=2)
    assert path.read_bytes() == served.payload
    assert served.range_headers == [None, "bytes=300000-"]


def test_a_corrupted_download_is_refused_and_kept_aside(tmp_path: Path,
                                                        server: tuple[str, Served]) -> None:
    url, served = server
    store = _store(tmp_path, url, "f" * 64)
    with pytest.raises(ModelError, match="does not match"):
        fetch_model(store, "standin")
    assert not store.path("standin").exists()
    rejected = list((tmp_path / "models" / "rejected").iterdir())
    assert len(rejected) == 1 and rejected[0].read_bytes() == served.payload


def test_a_corrupted_installed_file_is_never_loaded(tmp_path: Path,
                                                    server: tuple[str, Served]) -> None:
    url, served = server
    store = _store(tmp_path, url, hashlib.sha256(served.payload).hexdigest())
    path = fetch_model(store, "standin")
    path.write_bytes(served.payload[:-1] + b"\x00")  # one byte flipped on disk
    with pytest.raises(ModelError, match="livecam models fetch standin"):
        store.require("standin")
    assert not path.exists()
    assert len(list((tmp_path / "models" / "rejected").iterdir())) == 1


def test_missing_model_names_fetch_and_import(tmp_path: Path) -> None:
    store = _store(tmp_path, "http://127.0.0.1:9/none", None)
    with pytest.raises(ModelError, match=r"livecam models fetch standin.*livecam models import"):
        store.require("standin")


def test_import_checks_the_hash(tmp_path: Path) -> None:
    good = tmp_path / "good.onnx"
    good.write_bytes(b"model")
    store = _store(tmp_path, "http://127.0.0.1:9/none", hashlib.sha256(b"model").hexdigest())
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"other")
    with pytest.raises(ModelError, match="not imported"):
        store.adopt("standin", bad)
    assert bad.exists() and not store.path("standin").exists()
    assert store.adopt("standin", good).read_bytes() == b"model"
    assert store.status("standin").verified


@pytest.mark.parametrize("move", [False, True])
def test_a_source_changed_after_it_was_hashed_is_not_installed_as_good(tmp_path: Path,
                                                                      move: bool) -> None:
    """Before: the source was hashed, then copied, and the stamp of the hash it had went on
    the copy: a file another program changed in between (a download still writing, a shared
    folder) was installed and loaded unverified under the good hash."""
    good = b"model" * 1000
    store = _store(tmp_path, "http://127.0.0.1:9/none", hashlib.sha256(good).hexdigest())
    src = tmp_path / "m.onnx"
    src.write_bytes(good)

    def change_source_once_hashed(done: int, total: int | None) -> None:
        if done == total and src.exists():
            src.write_bytes(b"evil" * 1000)

    try:
        path = store.adopt("standin", src, move=move, progress=change_source_once_hashed)
    except ModelError:
        assert not store.path("standin").exists()
    else:
        assert path.read_bytes() == good
        assert store.verify("standin") == hashlib.sha256(good).hexdigest()


def test_without_a_documented_hash_a_trusted_copy_is_held_to(tmp_path: Path) -> None:
    store = _store(tmp_path, "http://127.0.0.1:9/none", None)
    src = tmp_path / "m.onnx"
    src.write_bytes(b"first")
    path = store.adopt("standin", src, trust=True)
    path.write_bytes(b"changed")
    with pytest.raises(ModelError):
        store.verify("standin")


def test_repository_manifests_load() -> None:
    manifests = load_manifests(REPO / "engines")
    assert {"inswapper_128", "inswapper_128_fp16", "w600k_r50", "gfpgan_1.4"} <= set(manifests)
    swapper = manifests["inswapper_128"]
    assert [s.name for s in swapper.inputs] == ["target", "source"]
    assert swapper.template == "arcface_128" and swapper.recognizer == "w600k_r50"
    assert "e4a3f08c753cb72d04e10aa0f7dbe3deebbf39567d4ead6dce08e98aa49e16af" in \
        swapper.accepted_sha256
    assert not manifests["inswapper_128_fp16"].accepted_sha256
    assert load_manifest(REPO / "engines" / "w600k_r50.yaml").mean == 127.5


# -- issue 11: verify always hashes; no silent trust; a cut-short download is never installed


def _cli(tmp_path: Path, *args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from livecam.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["models", "--set", f"advanced.models.dir={tmp_path / 'models'}", "--set",
              f"advanced.models.manifests_dir={tmp_path / 'manifests'}", *args])
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


def test_models_verify_rehashes_a_flipped_byte_with_its_mtime_restored(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    payload = bytes(range(256)) * 64
    store = _store(tmp_path, "http://127.0.0.1:9/none", hashlib.sha256(payload).hexdigest())
    src = tmp_path / "good.onnx"
    src.write_bytes(payload)
    path = store.adopt("standin", src)
    assert _cli(tmp_path, "verify", capsys=capsys)[0] == 0
    before = path.stat()
    with path.open("r+b") as f:  # one byte flipped in place, size unchanged
        f.seek(1000)
        f.write(bytes([payload[1000] ^ 0xFF]))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # and the mtime put back
    assert path.stat().st_size == before.st_size
    assert path.stat().st_mtime_ns == before.st_mtime_ns
    code, out, _ = _cli(tmp_path, "verify", capsys=capsys)
    assert code == 1 and "FAILED" in out and "ok" not in out
    assert not path.exists()  # moved aside, never loaded


def test_verify_with_nothing_installed_says_so(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Before: `livecam models verify` with no model installed printed nothing and exited 0,
    which reads as "all verified"."""
    _store(tmp_path, "http://127.0.0.1:9/none", None)
    code, out, _ = _cli(tmp_path, "verify", capsys=capsys)
    assert code == 0
    assert f"no models installed in {tmp_path / 'models'}" in out, out
    assert "livecam models fetch" in out


def test_loading_notices_a_restored_mtime_too(tmp_path: Path) -> None:
    payload = bytes(range(256)) * 64
    store = _store(tmp_path, "http://127.0.0.1:9/none", hashlib.sha256(payload).hexdigest())
    src = tmp_path / "good.onnx"
    src.write_bytes(payload)
    path = store.adopt("standin", src)
    assert store.require("standin") == path
    before = path.stat()
    path.write_bytes(payload[:-1] + b"\x00")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # ctime still moves on
    with pytest.raises(ModelError, match="was not loaded"):
        store.require("standin")


def test_verify_shows_progress_for_large_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    import livecam.subcommands.models as models_cli

    payload = bytes(range(256)) * 4096 * 3  # 3 MiB, with the threshold lowered to 1 MiB
    store = _store(tmp_path, "http://127.0.0.1:9/none", hashlib.sha256(payload).hexdigest())
    src = tmp_path / "good.onnx"
    src.write_bytes(payload)
    store.adopt("standin", src)
    monkeypatch.setattr(models_cli, "_PROGRESS_MIN_BYTES", 1 << 20)
    code, out, err = _cli(tmp_path, "verify", "standin", capsys=capsys)
    assert code == 0 and "ok" in out
    assert "3.0 / 3.0 MiB (100.0%)" in err


def test_unpublished_model_needs_trust_and_keeps_its_pin(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # before: random bytes were imported as "verified" and a second import replaced the pin
    store = _store(tmp_path, "http://127.0.0.1:9/none", None)
    first, second = tmp_path / "first.onnx", tmp_path / "second.onnx"
    first.write_bytes(os.urandom(4096))
    second.write_bytes(os.urandom(4096))
    code, _, err = _cli(tmp_path, "import", "standin", str(first), capsys=capsys)
    assert code == 2 and "--trust" in err and len(err.strip().splitlines()) == 1
    assert not store.path("standin").exists() and store.pin("standin") is None
    code, out, _ = _cli(tmp_path, "import", "standin", str(first), "--trust", capsys=capsys)
    assert code == 0 and "pinned" in out
    pin = store.pin("standin")
    assert pin is not None and pin["sha256"] == hashlib.sha256(first.read_bytes()).hexdigest()
    for extra in ((), ("--trust",)):
        code, _, err = _cli(tmp_path, "import", "standin", str(second), *extra, capsys=capsys)
        assert code == 1 and "is pinned to" in err and "--trust --replace" in err
        assert store.pin("standin") == pin and store.path("standin").read_bytes() == \
            first.read_bytes()
    code, _, err = _cli(tmp_path, "import", "standin", str(second), "--replace", capsys=capsys)
    assert code == 2 and "needs --trust" in err
    code, _, _ = _cli(tmp_path, "import", "standin", str(second), "--trust", "--replace",
                      capsys=capsys)
    assert code == 0
    assert store.pin("standin")["sha256"] == hashlib.sha256(second.read_bytes()).hexdigest()  # type: ignore[index]


def test_a_pin_survives_a_tampered_file(tmp_path: Path) -> None:
    # before: a file that failed took the recorded hash with it; the next copy was trusted
    store = _store(tmp_path, "http://127.0.0.1:9/none", None)
    good, other = tmp_path / "good.onnx", tmp_path / "other.onnx"
    good.write_bytes(b"good model")
    other.write_bytes(b"other model")
    path = store.adopt("standin", good, trust=True)
    path.write_bytes(b"tampered!!")
    with pytest.raises(ModelError):
        store.verify("standin", force=True)
    assert store.pin("standin") is not None
    with pytest.raises(ModelError, match="is pinned to"):
        store.adopt("standin", other, trust=True)
    assert store.adopt("standin", good).read_bytes() == b"good model"


def test_an_installed_file_nobody_vouched_for_is_not_loaded(tmp_path: Path) -> None:
    store = _store(tmp_path, "http://127.0.0.1:9/none", None)
    store.path("standin").parent.mkdir(parents=True)
    store.path("standin").write_bytes(b"dropped in by hand")
    with pytest.raises(UsageError, match="--trust"):
        store.require("standin")
    store.adopt("standin", store.path("standin"), trust=True)  # vouched for in place
    assert store.require("standin").read_bytes() == b"dropped in by hand"


def test_unpublished_fetch_without_trust_downloads_nothing(tmp_path: Path,
                                                           server: tuple[str, Served]) -> None:
    url, served = server
    store = _store(tmp_path, url, None)
    with pytest.raises(UsageError, match="--trust"):
        fetch_model(store, "standin")
    assert served.range_headers == []  # nothing was requested


def test_a_download_cut_short_without_a_length_is_never_installed(
        tmp_path: Path, server: tuple[str, Served]) -> None:
    # before: installed and pinned as "verified"
    url, served = server
    served.send_length, served.cut_first_after = False, 300_000
    store = _store(tmp_path, url, None)
    with pytest.raises((ModelError, UsageError)):  # nothing vouches for it: not even fetched
        fetch_model(store, "standin", retries=1)
    assert not store.path("standin").exists()
    served.cut_first_after = 300_000
    with pytest.raises(ModelError, match="did not send the file's size"):
        fetch_model(store, "standin", retries=1, trust=True)
    assert not store.path("standin").exists() and store.pin("standin") is None


def test_a_cut_short_download_of_a_published_model_is_not_installed(
        tmp_path: Path, server: tuple[str, Served]) -> None:
    url, served = server
    served.send_length, served.cut_first_after = False, 300_000
    store = _store(tmp_path, url, hashlib.sha256(served.payload).hexdigest())
    with pytest.raises(ModelError, match="does not match"):
        fetch_model(store, "standin", retries=1)
    assert not store.path("standin").exists()
    # the next fetch (whole this time) installs it
    assert fetch_model(store, "standin").read_bytes() == served.payload


def test_trusted_fetch_with_a_known_size_pins_the_copy(tmp_path: Path,
                                                       server: tuple[str, Served]) -> None:
    url, served = server
    store = _store(tmp_path, url, None)
    path = fetch_model(store, "standin", trust=True)
    assert path.read_bytes() == served.payload
    pin = store.pin("standin")
    assert pin is not None and pin["sha256"] == hashlib.sha256(served.payload).hexdigest()
    assert pin["source"] == url
    # a later fetch of other bytes is held to the pin
    path.unlink()
    served.payload = b"x" * len(served.payload)
    with pytest.raises(ModelError, match="does not match"):
        fetch_model(store, "standin", retries=1, trust=True)
    assert store.pin("standin") == pin


def test_a_models_dir_or_engine_cache_that_is_a_file_is_one_line(tmp_path: Path) -> None:
    """Before: `livecam engines clear` with advanced.engine.cache_dir set to a file, and an
    import or a fetch into an advanced.models.dir that is a file, ended in a FileExistsError
    traceback."""
    not_a_folder = tmp_path / "cache"
    not_a_folder.write_text("not a folder")
    run = subprocess.run([sys.executable, "-m", "livecam.cli", "engines", "--set",
                          f"advanced.engine.cache_dir={not_a_folder}", "clear"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert (f"livecam: error: advanced.engine.cache_dir {not_a_folder} is a file, not a "
            "folder: set advanced.engine.cache_dir to a folder you can write") in run.stderr
    payload = bytes(range(256)) * 64
    store = _store(tmp_path, "http://127.0.0.1:9/none", hashlib.sha256(payload).hexdigest())
    src = tmp_path / "good.onnx"
    src.write_bytes(payload)
    (tmp_path / "models").write_text("not a folder")  # the store makes it on first write
    with pytest.raises(ConfigError, match=r"advanced\.models\.dir .* is a file, not a folder"):
        store.adopt("standin", src)
    assert not_a_folder.read_text() == "not a folder"


def test_a_host_that_does_not_resolve_is_not_asked_again(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Issue 39 item 20: a failed DNS lookup was retried 6 times in 0.4 s (3 tries of each
    of 2 sources), 6 WARNING lines for one fact. `.invalid` never resolves (RFC 6761)."""
    import logging

    store = _store(tmp_path, "http://livecam-test.invalid/standin.onnx", "ab" * 32)
    with caplog.at_level(logging.WARNING, logger="livecam.engines.fetch"), \
            pytest.raises(ModelError) as err:
        fetch_model(store, "standin", retries=3)
    assert "livecam-test.invalid does not resolve" in str(err.value)
    lines = [r.getMessage() for r in caplog.records if r.name == "livecam.engines.fetch"]
    assert len(lines) == 1, lines


def test_other_network_errors_are_retried_with_a_growing_wait(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A refused connection (nothing listens on the port) is tried ``retries`` times, with
    waits of backoff_s, then twice that, between the tries."""
    import socket as socket_module

    import livecam.engines.fetch as fetch

    with socket_module.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: connections to it are refused
    waits: list[float] = []
    monkeypatch.setattr(fetch.time, "sleep", waits.append)
    store = _store(tmp_path, f"http://127.0.0.1:{port}/standin.onnx", "ab" * 32)
    with pytest.raises(ModelError):
        fetch_model(store, "standin", retries=3, backoff_s=0.5)
    assert waits == [0.5, 1.0]
