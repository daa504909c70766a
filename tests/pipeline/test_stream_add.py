"""Streams added and removed while the set runs (:meth:`StreamSet.add_stream`,
``remove_stream``): the running streams keep processing while one opens or closes, ids are
never reused, limits are one clear error. The process-level path (`livecam daemon`, `livecam
ctl stream ...`, ``/api/streams``) is ``tests/daemon/test_daemon_streams.py``.

Real threads, real sources and sinks; the added stream's stages are small test stages whose
``open``/``close`` wait for the running stream to make progress: if adding or removing held
anything the running stream needs, they would wait in vain (and the test fails).
"""

from __future__ import annotations

import threading

import pytest

from livecam.app import App
from livecam.config import Config
from livecam.core.stage import StageBase
from livecam.core.types import Packet
from livecam.pipeline.streams import StreamLimitError, StreamSet
from tests.pipeline.test_streams import Marker, stream_app, wait_until


class WaitsForOthers(StageBase):
    """A stage whose ``open`` and ``close`` last until ``other`` processed 20 more frames."""

    name = "waits"

    def __init__(self, other: App) -> None:
        self.other = other
        self.opened_while_running = threading.Event()
        self.closed_while_running = threading.Event()

    def _others_advance(self) -> bool:
        start = self.other.metrics.counter("processed")
        return wait_until(lambda: self.other.metrics.counter("processed") >= start + 20)

    def open(self) -> None:
        if self._others_advance():
            self.opened_while_running.set()

    def close(self) -> None:
        if self._others_advance():
            self.closed_while_running.set()

    def process(self, packet: Packet) -> Packet:
        return packet


def test_a_stream_added_and_removed_while_others_run(fast_config: Config) -> None:
    first = stream_app(fast_config, [Marker()], 0)
    made: list[WaitsForOthers] = []

    def factory(k: int, input_spec: str, output_spec: str, endpoints: object) -> App:
        made.append(WaitsForOthers(first))
        return stream_app(fast_config, [made[-1]], k, width=80)

    streams = StreamSet([first], factory=factory, max_streams=3)
    streams.start()
    try:
        assert wait_until(lambda: first.metrics.counter("processed") > 5)
        k = streams.add_stream("synthetic:80x48", "null")
        assert k == 1 and made[0].opened_while_running.is_set()
        added = streams.targets()[1]
        assert wait_until(lambda: added.metrics.counter("sent") > 5)
        assert [a.stream for a in streams.apps] == [0, 1]
        assert len(streams.commands.queues) == 2  # commands without a stream reach it too

        summary = streams.remove_stream(1)
        assert made[0].closed_while_running.is_set() and summary.sent > 5
        assert list(streams.targets()) == [0] and added.done and not first.done
        assert streams.add_stream("synthetic:80x48", "null") == 2  # ids are never reused
        assert streams.summary().sent >= summary.sent  # removed streams still count
    finally:
        streams.stop()
    assert all(a.done for a in streams.apps)


def test_limits_are_one_clear_error(fast_config: Config) -> None:
    first = stream_app(fast_config, [Marker()], 0)
    streams = StreamSet([first], factory=lambda k, i, o, e: stream_app(fast_config, [], k),
                        max_streams=2)
    with pytest.raises(StreamLimitError, match="not running streams now"):
        streams.add_stream("synthetic:64x48", "null")  # before start
    streams.start()
    try:
        streams.add_stream("synthetic:64x48", "null")
        with pytest.raises(StreamLimitError, match=r"advanced.pipeline.max_streams \(2\)"):
            streams.add_stream("synthetic:64x48", "null")
        with pytest.raises(KeyError):
            streams.remove_stream(7)
        streams.remove_stream(0)
        with pytest.raises(StreamLimitError, match="stream 1 is the last one"):
            streams.remove_stream(1)
    finally:
        streams.stop()
    with pytest.raises(StreamLimitError, match="not running streams now"):
        streams.add_stream("synthetic:64x48", "null")  # after stop
    assert not StreamSet([stream_app(fast_config, [], 0)]).targets()[0].done


def test_a_set_held_open_runs_without_streams_until_stopped(fast_config: Config) -> None:
    streams = StreamSet([], factory=lambda k, i, o, e: stream_app(fast_config, [Marker()], k),
                        hold_open=True)
    streams.start()
    try:
        assert not streams.wait(0.05) and not streams.done
        k = streams.add_stream("synthetic:64x48", "null")
        assert wait_until(lambda: streams.targets()[k].metrics.counter("sent") > 3)
        streams.remove_stream(k)  # the last one: allowed, the set stays up
        assert streams.apps == [] and not streams.done
    finally:
        streams.stop()
    assert streams.wait(1.0) and streams.done
