"""`livecam ctl reload` against a running daemon: a config file that can no longer be loaded
is said (one line: the file, the error, that the previous config stays) with exit 1, not
answered with the state and exit 0 while the error went only to the daemon's log; a good
reload exits 0 and says so. SIGHUP still runs on a broken config and logs it."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.daemon.conftest import Daemon

SYNTHETIC = ["--input", "synthetic:160x120", "--output", "virtualcam",
             "--set", "advanced.output.backend=recording"]
GOOD = "swap:\n  mode: classic\n"

pytestmark = pytest.mark.slow


def _invalid_yaml(path: Path) -> None:
    path.write_text("swap:\n  mode: [classic\n")


def _invalid_value(path: Path) -> None:
    path.write_text("swap:\n  mode: nonsense\n")


def _deleted(path: Path) -> None:
    path.unlink()


def _folder(path: Path) -> None:
    path.unlink()
    path.mkdir()


# how the file is broken -> what the error line says about it
BROKEN: list[tuple[Callable[[Path], None], str]] = [
    (_invalid_yaml, "is not valid YAML"), (_invalid_value, "'nonsense' is not allowed"),
    (_deleted, "does not exist"), (_folder, "is a folder")]


def _repair(path: Path) -> None:
    if path.is_dir():
        path.rmdir()
    path.write_text(GOOD)


def test_ctl_reload_of_a_broken_config_says_why_and_exits_1(
        new_daemon: Callable[[], Daemon]) -> None:
    d = new_daemon()
    config = d.root / "livecam.yaml"
    config.write_text(GOOD)
    d.start("--config", str(config), *SYNTHETIC)
    d.wait_ready()

    good = d.ctl("reload", check=False)
    assert good.returncode == 0, good.stderr
    assert good.stdout.startswith("reloaded"), good.stdout

    for breaks, says in BROKEN:
        breaks(config)
        result = d.ctl("reload", check=False)
        assert result.returncode == 1, (breaks.__name__, result.stdout, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, (breaks.__name__, result.stderr)
        assert "config not reloaded" in lines[0] and str(config) in lines[0], lines[0]
        assert says in lines[0] and "previous config" in lines[0], lines[0]
        assert "reloaded:" not in result.stdout, result.stdout
        _repair(config)

    again = d.ctl("reload", check=False)
    assert again.returncode == 0 and again.stdout.startswith("reloaded"), again

    # SIGHUP on a broken config: logged, and the daemon runs on
    assert d.proc is not None
    _invalid_yaml(config)
    d.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 60
    while "config not reloaded" not in d.stderr():
        assert time.monotonic() < deadline, "SIGHUP on a broken config logged nothing"
        assert d.proc.poll() is None, d.stderr()
        time.sleep(0.1)
    sent = d.status()["frames"]["sent"]
    while d.status()["frames"]["sent"] <= sent:
        assert time.monotonic() < deadline, "the daemon stopped sending after SIGHUP"
        time.sleep(0.1)
