"""Waiting for a model's lock that another livecam process holds: said, and bounded.

Before: a second ``livecam models import`` or ``fetch`` while another process held the model's
lock (or a lock a network file system kept for a client that is gone) waited forever.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from livecam.engines.fetch import fetch_model
from livecam.engines.store import ModelBusyError
from tests.engines.store_support import (
    leftovers,
    open_store,
    paused,
    raised_within,
    serve,
    sha,
    two_payloads,
    worker_env,
    write_manifest,
)

WAIT_S = 3  # advanced.models.lock_wait_s in these tests
BOUND_S = 120  # what the command may take at most on a loaded host (before: forever)


@pytest.mark.parametrize(("verb", "lock_suffix", "doing"), [
    ("import", ".lock", "writing"),
    ("fetch", ".part.lock", "fetching"),
])
def test_a_held_lock_is_waited_for_in_one_line_then_given_up_in_one_line(
        tmp_path: Path, verb: str, lock_suffix: str, doing: str) -> None:
    payload, _ = two_payloads(1)
    with serve(payload) as (url, served):
        write_manifest(tmp_path, [(url, sha(payload))])
        store = open_store(tmp_path)
        src = tmp_path / "copy.onnx"
        src.write_bytes(payload)
        store.models_dir.mkdir()
        lock = store.models_dir / f".standin.onnx{lock_suffix}"
        with paused(tmp_path, "hold", str(lock)):  # another livecam, mid-write
            run = subprocess.run(
                [sys.executable, "-m", "livecam.cli", "models", verb, "standin",
                 *([str(src)] if verb == "import" else []),
                 "--set", f"advanced.models.dir={store.models_dir}",
                 "--set", f"advanced.models.manifests_dir={tmp_path / 'manifests'}",
                 "--set", f"advanced.models.lock_wait_s={WAIT_S}"],
                capture_output=True, text=True, timeout=BOUND_S, env=worker_env())
    lines = run.stderr.splitlines()
    assert run.returncode == 1, run.stderr
    assert len(lines) == 2, run.stderr
    assert f"another livecam process is {doing}" in lines[0] and "standin" in lines[0]
    assert "waiting" in lines[0]
    assert lines[1].startswith("livecam: error: "), lines[1]
    assert "standin" in lines[1] and str(lock) in lines[1]
    assert "advanced.models.lock_wait_s" in lines[1]
    assert not store.path("standin").exists()
    assert leftovers(store) == []  # nothing half-written, no copy left behind
    assert served.range_headers == []  # the second fetch downloaded nothing


def test_models_verify_says_which_model_it_could_not_check_and_moves_nothing(
        tmp_path: Path) -> None:
    """A model held by another process is not verified, says why, and is not set aside as a
    bad file; ``models verify`` goes on to the next model and exits 1."""
    payload, _ = two_payloads(1)
    write_manifest(tmp_path, [("http://127.0.0.1:9/none", sha(payload))])
    store = open_store(tmp_path)
    src = tmp_path / "copy.onnx"
    src.write_bytes(payload)
    store.adopt("standin", src)
    with paused(tmp_path, "hold", str(store.models_dir / ".standin.onnx.lock")):
        run = subprocess.run(
            [sys.executable, "-m", "livecam.cli", "models", "verify",
             "--set", f"advanced.models.dir={store.models_dir}",
             "--set", f"advanced.models.manifests_dir={tmp_path / 'manifests'}",
             "--set", f"advanced.models.lock_wait_s={WAIT_S}"],
            capture_output=True, text=True, timeout=BOUND_S, env=worker_env())
    assert run.returncode == 1, run.stderr
    assert "FAILED" in run.stdout and "another livecam process is still" in run.stdout
    assert "Traceback" not in run.stderr
    assert store.path("standin").read_bytes() == payload
    assert not (store.models_dir / "rejected").exists()
    assert store.verify("standin", force=True) == sha(payload)


def test_a_download_that_waited_in_vain_is_kept_for_the_next_fetch(tmp_path: Path) -> None:
    """The download lock free, the model's lock held: the fetch downloads, gives up at the
    install, and keeps its download (not set aside as a bad file); the next one installs it
    without downloading it again."""
    payload, _ = two_payloads(2)
    with serve(payload) as (url, served):
        write_manifest(tmp_path, [(url, sha(payload))])
        store = open_store(tmp_path)
        store.lock_wait_s = 1.0
        store.models_dir.mkdir()
        with paused(tmp_path, "hold", str(store.models_dir / ".standin.onnx.lock")):
            assert isinstance(_in_time(lambda: fetch_model(store, "standin", retries=1)),
                              ModelBusyError)
        assert store.partial_path("standin").stat().st_size == len(payload)
        assert not (store.models_dir / "rejected").exists()
        assert _in_time(lambda: fetch_model(store, "standin", retries=1)) is None
        assert store.path("standin").read_bytes() == payload
        assert len(served.range_headers) == 2 and served.range_headers[1] is not None
        assert leftovers(store) == []


def _in_time(fn: Callable[[], object]) -> BaseException | None:
    return raised_within(fn, BOUND_S, "still waiting")
