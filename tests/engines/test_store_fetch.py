"""Model store and fetch against a local HTTP server on 127.0.0.1 serving a stand-in file."""

from __future__ import annotations

import hashlib
import http.server
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from livecam.core.errors import ModelError
from livecam.engines.fetch import fetch_model
from livecam.engines.manifest import load_manifest, load_manifests
from livecam.engines.store import ModelStore

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Served:
    payload: bytes
    cut_first_after: int | None = None  # drop the first connection after this many bytes
    range_headers: list[str | None] = field(default_factory=list)


def _handler(served: Served) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return None

        def do_GET(self) -> None:
            asked = self.headers.get("Range")
            served.range_headers.append(asked)
            data, start = served.payload, 0
            if asked:
                start = int(asked.removeprefix("bytes=").split("-")[0])
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            else:
                self.send_response(200)
            body = data[start:]
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if served.cut_first_after is not None:
                self.wfile.write(body[:served.cut_first_after])
                served.cut_first_after = None
                self.close_connection = True
                return
            self.wfile.write(body)

    return Handler


@pytest.fixture
def server() -> Iterator[tuple[str, Served]]:
    served = Served(payload=bytes(range(256)) * 4096)  # 1 MiB stand-in "model"
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(served))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/standin.onnx", served
    httpd.shutdown()
    httpd.server_close()


def _store(tmp_path: Path, url: str, sha256: str | None) -> ModelStore:
    sha_line = f"    sha256: {sha256}\n" if sha256 else ""
    (tmp_path / "manifests").mkdir()
    (tmp_path / "manifests" / "standin.yaml").write_text(
        "name: standin\nkind: swapper\nfile: standin.onnx\n"
        f"sources:\n  - url: {url}\n{sha_line}"
        "inputs:\n  - {name: target, shape: [1, 3, 128, 128]}\n"
        "outputs:\n  - {name: output, shape: [1, 3, 128, 128]}\n")
    return ModelStore(tmp_path / "models", load_manifests(tmp_path / "manifests"))


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


def test_without_a_documented_hash_the_first_copy_is_held_to(tmp_path: Path) -> None:
    store = _store(tmp_path, "http://127.0.0.1:9/none", None)
    src = tmp_path / "m.onnx"
    src.write_bytes(b"first")
    path = store.adopt("standin", src)
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
