"""Two livecam processes writing one model at once, and one killed in the middle.

Before: every import staged its copy as ``<file>.import`` and every fetch downloaded into
``<file>.part``, names shared by all processes, and the stamp was written after the file was
moved into place, outside any lock: two writers could crash, leave a half-written file, or put
one process's stamp on the other's file.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from livecam.engines.fetch import fetch_model
from livecam.engines.store import ModelStore
from tests.engines.store_support import (
    leftovers,
    open_store,
    paused,
    raised_within,
    serve,
    sha,
    two_payloads,
    worker,
    write_manifest,
)

REPO = Path(__file__).resolve().parents[2]
WAIT_S = 30.0


def _two_good_copies(tmp_path: Path, url: str = "http://127.0.0.1:9/none",
                     mib: int = 2) -> tuple[ModelStore, Path, Path]:
    """A store whose model accepts two different files (two published hashes), and both."""
    a, b = two_payloads(mib)
    write_manifest(tmp_path, [(url, sha(a)), ("http://127.0.0.1:9/other", sha(b))])
    src_a, src_b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    src_a.write_bytes(a)
    src_b.write_bytes(b)
    return open_store(tmp_path), src_a, src_b


def _assert_installed_and_stamped_together(store: ModelStore, good: set[bytes]) -> None:
    data = store.path("standin").read_bytes()
    assert data in good, "the installed file is none of the copies"
    stamp = json.loads(store.path("standin").with_name("standin.onnx.sha256.json").read_text())
    assert stamp["sha256"] == sha(data), "the stamp names another file's hash"
    assert store.verify("standin") == sha(data)
    assert store.verify("standin", force=True) == sha(data)


@contextmanager
def _said_waiting(event: threading.Event) -> Iterator[None]:
    """Set ``event`` when livecam logs that it waits for another process's lock."""

    class Said(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "another livecam process is" in record.getMessage():
                event.set()

    said = Said()
    logging.getLogger("livecam.engines").addHandler(said)
    try:
        yield
    finally:
        logging.getLogger("livecam.engines").removeHandler(said)


def _run_together(first: Callable[[], object], second: Callable[[], object], *,
                  then: threading.Event) -> list[BaseException]:
    """``first`` and ``second`` on threads of their own, ``then`` set once ``second`` ends
    (however it ends); what either raised."""
    errors: list[BaseException] = []

    def guarded(fn: Callable[[], object], done: threading.Event | None) -> threading.Thread:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:
                errors.append(exc)
            finally:
                if done is not None:
                    done.set()

        return threading.Thread(target=run)

    threads = [guarded(first, None), guarded(second, then)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S)
        assert not thread.is_alive(), "a writer never finished"
    return errors


def test_an_import_overtaken_by_another_still_installs_its_own_whole_file(
        tmp_path: Path) -> None:
    """A hashed its copy; B imported in full; then A went on. Before: both shared
    ``.import``, so B wrote over A's copy and moved it away, and A crashed
    (FileNotFoundError)."""
    store, src_a, src_b = _two_good_copies(tmp_path)
    a_hashed, b_done = threading.Event(), threading.Event()

    def pause_once_hashed(done: int, total: int | None) -> None:
        if done == total and not a_hashed.is_set():
            a_hashed.set()
            assert b_done.wait(WAIT_S)

    def import_b() -> None:
        assert a_hashed.wait(WAIT_S)
        store.adopt("standin", src_b)

    errors = _run_together(lambda: store.adopt("standin", src_a, progress=pause_once_hashed),
                           import_b, then=b_done)
    assert errors == []
    assert store.path("standin").read_bytes() == src_a.read_bytes()  # A moved in last
    _assert_installed_and_stamped_together(store, {src_a.read_bytes()})
    assert leftovers(store) == []


def test_a_check_overtaken_by_an_import_does_not_stamp_the_new_file_with_the_old_hash(
        tmp_path: Path) -> None:
    """``verify`` hashed A; B was imported (or waited for the check); then verify wrote its
    stamp. Before: the stamp named A's hash with B's size, times and inode, so loading took B
    for A unhashed."""
    store, src_a, src_b = _two_good_copies(tmp_path)
    store.adopt("standin", src_a)
    hashed, imported = threading.Event(), threading.Event()  # imported: or waits to
    results: list[str] = []

    def pause_once_hashed(done: int, total: int | None) -> None:
        if done == total and not hashed.is_set():
            hashed.set()
            assert imported.wait(WAIT_S)

    def check() -> None:
        results.append(store.verify("standin", force=True, progress=pause_once_hashed))

    def import_b() -> None:
        assert hashed.wait(WAIT_S)
        store.adopt("standin", src_b)

    with _said_waiting(imported):
        errors = _run_together(check, import_b, then=imported)
    assert errors == []
    assert results in ([sha(src_a.read_bytes())], [sha(src_b.read_bytes())])
    _assert_installed_and_stamped_together(store, {src_b.read_bytes()})


def test_two_fetches_at_once_leave_one_whole_verified_file(tmp_path: Path) -> None:
    """A was downloading when B started. Before: both wrote ``.part``: B resumed from A's
    bytes and moved the file into place while A still appended to it; A then crashed."""
    payload, _ = two_payloads(4)
    with serve(payload) as (url, _served):
        write_manifest(tmp_path, [(url, sha(payload))])
        store = open_store(tmp_path)
        a_started, b_moved_on = threading.Event(), threading.Event()

        def pause_once_started(done: int, total: int | None) -> None:
            if not a_started.is_set():
                a_started.set()
                assert b_moved_on.wait(WAIT_S)  # B finished, or B waits for A

        def fetch_b() -> None:
            assert a_started.wait(WAIT_S)
            fetch_model(store, "standin", retries=1)

        with _said_waiting(b_moved_on):
            errors = _run_together(
                lambda: fetch_model(store, "standin", progress=pause_once_started, retries=1),
                fetch_b, then=b_moved_on)
        assert errors == []
        _assert_installed_and_stamped_together(store, {payload})
        assert leftovers(store) == []
        assert not (store.models_dir / "rejected").exists()


@pytest.mark.slow
def test_processes_importing_and_fetching_one_model_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three processes, started together: two import two good copies in turn, one fetches;
    none may fail, and what is left is one whole file stamped with its own hash."""
    # a spawned process imports the worker by its module name with the parent's sys.path; a
    # plain `pytest` (importlib mode) has not put the repository there
    monkeypatch.syspath_prepend(str(REPO))
    a, _ = two_payloads(2)
    with serve(a) as (url, _served):
        store, src_a, src_b = _two_good_copies(tmp_path, url)
        ctx = multiprocessing.get_context("spawn")
        start, errors = ctx.Barrier(3), ctx.Queue()
        procs = [ctx.Process(target=worker, args=(tmp_path, role, sources, url, 15, start,
                                                  errors))
                 for role, sources in (("import", [src_a, src_b]), ("import", [src_b, src_a]),
                                       ("fetch", []))]
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join(120)
        failed = []
        while not errors.empty():
            failed.append(errors.get())
        assert failed == []
        assert [proc.exitcode for proc in procs] == [0, 0, 0]
        _assert_installed_and_stamped_together(store, {src_a.read_bytes(), src_b.read_bytes()})
        assert leftovers(store) == []


def _killed_midway(tmp_path: Path, mode: str, arg: str) -> None:
    """Run store_support's MODE in a process and kill -9 it once it says it got there."""
    with paused(tmp_path, mode, arg):
        pass


def _in_time(fn: Callable[[], object]) -> None:
    """Call ``fn``; fail (not hang) when a lock left by the killed process blocks it."""
    assert raised_within(fn, WAIT_S, "blocked by what the killed process left") is None


def test_an_import_killed_while_hashing_leaves_nothing_taken_as_good(tmp_path: Path) -> None:
    store, src_a, _ = _two_good_copies(tmp_path)
    _killed_midway(tmp_path, "import-hashing", str(src_a))
    assert not store.status("standin", rehash=True).present
    assert not store.status("standin").verified
    _in_time(lambda: store.adopt("standin", src_a))
    _assert_installed_and_stamped_together(store, {src_a.read_bytes()})


def test_an_import_killed_before_its_stamp_leaves_no_stamp_that_vouches_for_it(
        tmp_path: Path) -> None:
    """Killed with B moved into place and A's stamp still there: that stamp must not be
    taken for B, and the next import must not wait for the dead process."""
    store, src_a, src_b = _two_good_copies(tmp_path)
    store.adopt("standin", src_a)
    _killed_midway(tmp_path, "import-installing", str(src_b))
    data = store.path("standin").read_bytes()
    assert data in (src_a.read_bytes(), src_b.read_bytes())
    assert store.verify("standin") == sha(data)  # the stamp of A is not B's
    _in_time(lambda: store.adopt("standin", src_b))
    _assert_installed_and_stamped_together(store, {src_b.read_bytes()})


def test_a_fetch_killed_midway_is_resumed_and_nothing_half_written_is_loaded(
        tmp_path: Path) -> None:
    payload, _ = two_payloads(4)
    with serve(payload) as (url, served):
        write_manifest(tmp_path, [(url, sha(payload))])
        store = open_store(tmp_path)
        _killed_midway(tmp_path, "fetch", url)
        status = store.status("standin", rehash=True)
        assert not status.present and not status.verified
        _in_time(lambda: fetch_model(store, "standin", retries=1))
        assert served.range_headers[0] is None and served.range_headers[-1] is not None
        _assert_installed_and_stamped_together(store, {payload})
        assert leftovers(store) == []
