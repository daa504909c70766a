"""How the command line ends the process (``livecam.cli.main``)."""

from __future__ import annotations

import argparse

import pytest

from livecam import cli


def _main_with(monkeypatch: pytest.MonkeyPatch, *, left_blocked: bool
               ) -> tuple[list[int], int]:
    """``cli.main`` on a subcommand that returns 3: the codes ``os._exit`` was called with (it
    is replaced: the real one would end pytest's process) and the SystemExit's code."""
    exits: list[int] = []
    parser = argparse.ArgumentParser()
    parser.set_defaults(command="run", func=lambda args: 3)
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    monkeypatch.setattr("livecam.capture.thread.threads_left_blocked", lambda: left_blocked)
    monkeypatch.setattr(cli.os, "_exit", exits.append)
    with pytest.raises(SystemExit) as ended:
        cli.main([])
    return exits, int(ended.value.code or 0)


def test_a_thread_left_blocked_in_a_read_ends_the_process_without_teardown(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a Ctrl-C'd listening RTMP run exited by SIGSEGV in the teardown (its capture thread was
    # still inside av.open); the exit code is the command's
    exits, _ = _main_with(monkeypatch, left_blocked=True)
    assert exits == [3]


def test_otherwise_the_process_ends_through_sys_exit(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _main_with(monkeypatch, left_blocked=False) == ([], 3)
