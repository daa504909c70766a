"""A reload request's result over the streams it went to: done once each stream that began
finished, one line per distinct error, the callback called once."""

from __future__ import annotations

from livecam.core.reload_result import ReloadResult


def test_done_once_every_stream_that_began_finished() -> None:
    result = ReloadResult()
    calls: list[str] = []
    result.begin()
    result.begin()
    result.add_done_callback(lambda: calls.append("done"))
    line = "config not reloaded: config file c.yaml is not valid YAML (line 2)"
    result.finish(error=line, message=line)
    assert not result.done and calls == []
    result.finish(error=line, message=line)  # the same file for every stream: one line
    assert result.done and calls == ["done"]
    assert result.error == line and result.message == line


def test_a_good_reload_has_no_error_and_a_late_callback_runs_at_once() -> None:
    result = ReloadResult()
    result.begin()
    result.finish(error=None, message="reloaded: 2 identities (a, b)")
    calls: list[str] = []
    result.add_done_callback(lambda: calls.append("done"))
    assert calls == ["done"] and result.error is None
    assert result.message == "reloaded: 2 identities (a, b)"
