"""Per-track assignments against a careless or hostile client (issue 39 item 16): `livecam ctl
assign 999 bob` once exited 0 for a track that does not exist, and assignments were unbounded.
The track is a real one: MediaPipe follows the astronaut's face in a still image input."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import cv2
import numpy as np
import pytest

from livecam.config import Config
from livecam.control.requests import RequestError, Tracks, build_command
from livecam.core import commands as cmd
from livecam.core.commands import MAX_TRACK_ASSIGNMENTS
from livecam.core.types import RuntimeState
from tests.control.conftest import NAMES, PhotoCatalog, Running, start_running


@pytest.fixture
def tracking(fast_config: Config, tmp_path: Path, astronaut_bgr: np.ndarray
             ) -> Iterator[tuple[Running, int]]:
    """A run whose frames hold one real, tracked face; (the run, that face's track id)."""
    from livecam.analysis import build_stages

    photo = tmp_path / "astronaut.png"
    cv2.imwrite(str(photo), astronaut_bgr)
    r = start_running(fast_config, tmp_path, PhotoCatalog(astronaut_bgr, NAMES),
                      input_spec=f"image:{photo}", stages=build_stages(fast_config.analysis))
    try:
        last = r.app.live.wait_newer(-1, 60)
        while last is not None and not last.track_ids:  # the tracker confirms the face
            last = r.app.live.wait_newer(last.frames_sent, 60)
        assert last is not None and last.track_ids, "no track for the astronaut's face"
        yield r, last.track_ids[0]
    finally:
        r.app.stop()


def _ctl(r: Running, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "livecam.cli", "ctl", "--url", r.url,
                           "--token-file", str(r.token_file),
                           "--set", "advanced.control.apply_wait_s=60", *args],
                          capture_output=True, text=True, timeout=60)


def test_ctl_assign_to_a_track_that_is_not_there_exits_2_saying_so(
        tracking: tuple[Running, int]) -> None:
    r, track = tracking
    before = r.app.state
    result = _ctl(r, "assign", "999", "bob")
    assert result.returncode == 2, (result.stdout, result.stderr)
    (line,) = result.stderr.strip().splitlines()
    assert "no track 999" in line and f"tracks now: {track}" in line, line
    r.commands_applied()
    assert r.app.state == before
    result = _ctl(r, "assign", str(track), "bob")
    assert result.returncode == 0, result.stderr
    assert r.app.state.identity_for_track(track) == "bob"
    # clearing works whether the track is still there or not; clearing nothing does not
    assert _ctl(r, "assign", str(track), "none").returncode == 0
    assert r.app.state.identity_for_track(track) is None
    assert _ctl(r, "assign", "999", "none").returncode == 2


def test_assignments_stop_at_the_cap_with_a_clear_error(tracking: tuple[Running, int]) -> None:
    r, track = tracking
    # tracks that came and went, each given an identity (queued directly: the API only takes
    # tracks in the picture, and 64 people are not in this one)
    for k in range(MAX_TRACK_ASSIGNMENTS):
        r.app.commands.put(cmd.AssignTrack(10_000 + k, "alice"))
    r.commands_applied()
    result = _ctl(r, "assign", str(track), "bob")
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert f"at most {MAX_TRACK_ASSIGNMENTS} tracks" in result.stderr
    assert "assign TRACK none" in result.stderr
    assert r.app.state.identity_for_track(track) is None
    assert _ctl(r, "assign", "10000", "none").returncode == 0  # one cleared, room again
    assert _ctl(r, "assign", str(track), "bob").returncode == 0
    assert r.app.state.identity_for_track(track) == "bob"
    assert len(r.app.state.track_identities) == MAX_TRACK_ASSIGNMENTS


def test_build_command_checks_tracks_only_when_given() -> None:
    def assign(track: int, name: str | None, tracks: Tracks | None) -> object:
        return build_command("assign", {"track_id": track, "name": name}, names=NAMES,
                             snapshot_path=lambda: "x.png", tracks=tracks)

    assert assign(999, "bob", None) == cmd.AssignTrack(999, "bob")  # fuzz tests, no run
    full = Tracks(frozenset({1, 100}), frozenset(range(100, 100 + MAX_TRACK_ASSIGNMENTS)),
                  MAX_TRACK_ASSIGNMENTS)
    with pytest.raises(RequestError) as err:
        assign(1, "bob", full)
    assert err.value.status == 409
    assert assign(100, "bob", full) == cmd.AssignTrack(100, "bob")  # a re-assignment: no growth
    with pytest.raises(RequestError) as err:
        assign(2, "bob", full)
    assert err.value.status == 404


def test_assign_track_itself_keeps_at_most_the_cap() -> None:
    state = RuntimeState(identities=NAMES)
    for k in range(MAX_TRACK_ASSIGNMENTS + 10):
        state = cmd.AssignTrack(k, "bob").apply(state)
    assert len(state.track_identities) == MAX_TRACK_ASSIGNMENTS
    assert state.track_identities[0][0] == 10  # the oldest (lowest ids) went
