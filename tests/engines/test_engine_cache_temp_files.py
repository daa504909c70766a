"""The engine cache's temp files, when a livecam is killed while it saves an engine, and who
removes them.

Before: an engine, its sidecar and the timing cache are written through a temp file beside
them (``.<name>.*.tmp``); a process killed with kill -9 before the rename left that temp file,
as large as the engine, in the cache for good. Now the next start (`livecam engines`, an engine
opening its cache entry) or the next write to the cache removes it, but never the one a live
process is still writing (every write holds the cache's lock).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from livecam.engines.engine_cache import EngineCache, EngineKey
from tests.core.stopped_write import let_go, stopped, temp_files

_KEY = EngineKey(model_sha256="0" * 64, gpu_name="none", compute_capability="0.0",
                 tensorrt_version="0", precision="fp16")
_ENGINE = b"not really an engine" * 4096
_SAVE = f"""
from livecam.engines.engine_cache import EngineCache, EngineKey
EngineCache(argv[0]).save("standin", EngineKey(**{_KEY.to_dict()!r}), {_ENGINE!r})
"""
_ENGINE_TEMP = ".standin-*.engine.*.tmp"


def _engines_list(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    from livecam.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["engines", "--set", f"advanced.engine.cache_dir={root}", "list"])
    return int(exc.value.code or 0), capsys.readouterr().err


def test_the_next_start_removes_the_temp_file_of_a_save_killed_mid_write(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "engines"
    with stopped(_ENGINE_TEMP, "-c", _SAVE, str(root)) as (_, tmp):
        pass  # killed with the engine's temp file written, not yet renamed
    assert tmp.parent == root and temp_files(root) == [tmp.name]
    code, err = _engines_list(root, capsys)
    assert code == 0, err
    assert temp_files(root) == []


def test_the_next_save_removes_the_temp_file_of_a_save_killed_mid_write(
        tmp_path: Path) -> None:
    root = tmp_path / "engines"
    with stopped(_ENGINE_TEMP, "-c", _SAVE, str(root)) as (_, tmp):
        pass
    assert temp_files(root) == [tmp.name]
    cache = EngineCache(root)
    cache.save("other", _KEY, b"another engine")
    assert temp_files(root) == []
    assert cache.load("other", _KEY) == b"another engine"


def test_the_temp_file_a_live_save_writes_is_kept(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The save stopped before its rename holds the cache's lock: a start meanwhile leaves its
    temp file alone (and does not wait for it), and the save then goes on."""
    root = tmp_path / "engines"
    with stopped(_ENGINE_TEMP, "-c", _SAVE, str(root)) as (proc, tmp):
        code, err = _engines_list(root, capsys)
        assert code == 0, err
        assert tmp.is_file(), "the start removed the temp file a live save writes"
        code, _, err = let_go(proc)
        assert code == 0, err
    assert EngineCache(root).load("standin", _KEY) == _ENGINE
    assert temp_files(root) == []
