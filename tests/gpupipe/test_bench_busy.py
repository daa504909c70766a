"""scripts/bench_gpu.py reports each run's GPU busy share from nvidia-smi, sampled over that
run's window. Before, the notes of runs 92-96 had one nvidia-smi log for a whole device call
and could not tell the runs' windows apart.

This machine has no GPU driver, so ``nvidia-smi`` here is a stand-in script on PATH that
prints what the real one prints for ``--format=csv,noheader,nounits`` (one number a line, or
``[N/A]``) and exits; the code under test starts it, stops it and reads its lines as it does
the real one's.
"""

from __future__ import annotations

import importlib.util
import os
import stat
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the stand-in is a sh script")


def _product(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    # scripts/ is no package on sys.path (`pytest` as README runs it): load the file itself
    spec = importlib.util.spec_from_file_location(
        "bench_gpu_product", Path(__file__).parents[2] / "scripts" / "bench_gpu_product.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


def test_the_windows_samples_are_read_and_summed_up(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    # its arguments are written last, once its samples are out
    smi.write_text("#!/bin/sh\nprintf '37\\n[N/A]\\n81\\n52\\n'\n"
                   'echo "$@" > "$(dirname "$0")/args.tmp" && '
                   'mv "$(dirname "$0")/args.tmp" "$(dirname "$0")/args"\n')
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{smi.parent}{os.pathsep}{os.environ['PATH']}")
    product = _product(monkeypatch)
    with product.GpuBusy(interval_ms=250) as busy:
        # the window ends after the samples (a real window is seconds of them): wait for
        # the stand-in to have printed them, or 60 s on a loaded host
        deadline = time.monotonic() + 60
        while not (smi.parent / "args").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
    assert busy.summary() == {"min": 37.0, "mean": 170 / 3, "max": 81.0, "n": 3.0}
    args = (smi.parent / "args").read_text().split()
    assert "--query-gpu=utilization.gpu" in args and "-lms=250" in args


def test_without_nvidia_smi_there_is_no_summary(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    product = _product(monkeypatch)
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no nvidia-smi
    with product.GpuBusy() as busy:
        pass
    assert busy.summary() is None


def test_the_pinned_host_memory_is_read_from_torchs_host_allocator(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The pinned host memory a run holds (runs 92-96 left it unmeasured). This machine has
    no CUDA, so torch's ``cuda.is_available`` and ``cuda.host_memory_stats`` answer as on the
    H200; without CUDA there is nothing to report."""
    import torch

    product = _product(monkeypatch)
    assert product._host_pinned_mib() is None  # no CUDA here
    stats = {"allocated_bytes.current": 3 * 2**20, "allocated_bytes.peak": 25 * 2**20}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "host_memory_stats", lambda: stats)
    assert product._host_pinned_mib() == {"current": 3.0, "peak": 25.0}
    monkeypatch.setattr(torch.cuda, "host_memory_stats", dict)  # statistics of another torch
    assert product._host_pinned_mib() is None
