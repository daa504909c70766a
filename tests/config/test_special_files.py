"""A config path that is no regular file (issue 39 item 16): a FIFO swapped in for the config
file once hung the start, and every later reload behind the first (the open waited for a
writer that never came). Now it is refused at once, and the next reload of a real file works."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from livecam.config import load_config
from livecam.core.errors import ConfigError
from tests.control.test_reload_ctl import Served, overrides, serve  # noqa: F401  (fixture)

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")


def _load_in_thread(path: Path) -> tuple[threading.Event, list[BaseException]]:
    done, errors = threading.Event(), []

    def load() -> None:
        try:
            load_config(path)
        except BaseException as exc:  # handed to the test
            errors.append(exc)
        finally:
            done.set()

    threading.Thread(target=load, daemon=True).start()
    return done, errors


def test_a_fifo_config_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    path = tmp_path / "livecam.yaml"
    os.mkfifo(path)
    done, errors = _load_in_thread(path)
    finished = done.wait(60)
    if not finished:  # release the blocked open, then fail
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
    assert finished, "loading a FIFO config waited for a writer"
    (error,) = errors
    assert isinstance(error, ConfigError)
    assert str(error) == (f"config file {path} is a FIFO (named pipe), not a regular file: "
                          "give a YAML file")


def test_a_device_config_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a device, not a regular file"):
        load_config("/dev/zero")


def test_a_folder_config_still_says_folder(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a folder"):
        load_config(tmp_path)


def test_a_config_replaced_by_a_fifo_fails_its_reload_and_the_next_reload_works(
        serve: Callable[..., Served], tmp_path: Path) -> None:  # noqa: F811
    path = tmp_path / "livecam.yaml"
    path.write_text("pipeline:\n  status_interval_s: 0\n")
    served = serve(lambda: load_config(path, overrides(tmp_path)))
    path.unlink()
    os.mkfifo(path)
    try:
        result = served.ctl("reload")
        assert result.returncode == 1, (result.stdout, result.stderr)
        assert "FIFO" in result.stderr and "config not reloaded" in result.stderr
        path.unlink()
        path.write_text("pipeline:\n  status_interval_s: 0\n")
        result = served.ctl("reload")
        assert result.returncode == 0, (result.stdout, result.stderr)
        assert result.stdout.startswith("reloaded:"), result.stdout
    finally:
        if path.is_fifo():  # a reload still blocked in open (before the fix): release it
            with contextlib.suppress(OSError):  # ENXIO: no reader waits
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
