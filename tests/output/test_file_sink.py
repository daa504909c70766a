"""`file:` outputs a careless user names: a container that cannot hold H.264, an unknown or no
suffix. One line that says which files work, and no file left behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from livecam.core.errors import OutputError
from livecam.output.sinks import FileSink


@pytest.mark.parametrize("name", ["out.webm", "out.gif", "out.txt", "out"])
def test_a_file_output_livecam_cannot_write_says_which_files_work(tmp_path: Path,
                                                                  name: str) -> None:
    """Before: "'webm' format does not support 'libx264' codec", "Could not determine output
    format": true, but not what to do."""
    sink = FileSink(path=tmp_path / name)
    with pytest.raises(OutputError) as err:
        sink.open(width=64, height=48, fps=30.0)
    message = str(err.value)
    assert f"cannot write {tmp_path / name}" in message
    assert "use a .mp4, .mkv or .mov file" in message, message
    assert not (tmp_path / name).exists()


@pytest.mark.parametrize("name", ["out.mp4", "out.MKV", "out.mov"])
def test_the_files_it_names_are_written(tmp_path: Path, name: str) -> None:
    import av
    import numpy as np

    sink = FileSink(path=tmp_path / name)
    sink.open(width=64, height=48, fps=30.0)
    for i in range(5):
        sink.send(np.full((48, 64, 3), 40 * i, np.uint8))
    sink.close()
    with av.open(str(tmp_path / name)) as container:
        assert sum(1 for _ in container.decode(video=0)) == 5
