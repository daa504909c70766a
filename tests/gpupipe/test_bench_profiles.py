"""The GPU benchmark's two profilers of where a frame's kernels come from
(``scripts/bench_gpu_product.py``'s :func:`short_kernel_name` for a CUDA trace, and
``scripts/thread_ops.py``'s :class:`ThreadOps` for the ops behind them). The first H100 trace
cut kernel names at 90 characters, which left every PyTorch elementwise kernel nameless
(the functor sits past the cut); the op count must see ops in threads it did not start."""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path
from types import ModuleType

import torch

SCRIPTS = Path(__file__).parents[2] / "scripts"


def _script(name: str) -> ModuleType:
    # scripts/ is no package on sys.path (`pytest` as README runs it): load the file itself
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_kernel_names_keep_the_functor_that_tells_elementwise_kernels_apart() -> None:
    short = _script("bench_gpu_product").short_kernel_name
    mul = ("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<"
           "at::native::BinaryFunctor<float, float, float, at::native::binary_internal::"
           "MulFunctor<float> > >(at::TensorIteratorBase&, at::native::BinaryFunctor<float, "
           "float, float, at::native::binary_internal::MulFunctor<float> > const&)::"
           "{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<...>)")
    clamp = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous "
             "namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar,"
             " at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#14}"
             "::operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >(int, ...)")
    assert short(mul) == "elementwise_kernel<128, 4> [BinaryFunctor, MulFunctor]"
    assert short(clamp) == "vectorized_elementwise_kernel<4> [launch_clamp_scalar]"
    assert short("Memcpy DtoH (Device -> Pinned)") == "Memcpy DtoH (Device -> Pinned)"


def test_kernel_summary_splits_the_time_by_cuda_stream_and_counts_overlap_once() -> None:
    # a 16-stream trace summed 916 ms of kernels in 1 s: whether the GPU was full needs the
    # time any kernel ran (kernels of several CUDA streams overlap), and which part of the
    # pipeline spent it needs the CUDA stream each ran on
    summary = _script("bench_gpu_product").kernel_summary
    ms = 1_000_000
    spans = [("conv_a", 7, 0, 4 * ms), ("conv_a", 7, 10 * ms, 12 * ms),
             ("Memcpy HtoD (Pinned -> Device)", 9, 2 * ms, 6 * ms),
             ("paste_b", 9, 11 * ms, 20 * ms)]
    out = summary(spans, 0.02)
    assert out["kernel_ms"] == 19.0
    assert out["busy_ms"] == 6.0 + 10.0  # [0, 6) and [10, 20)
    assert [(r["stream"], r["count"], r["ms"], r["busy_ms"]) for r in out["streams"]] == [
        (9, 2, 13.0, 13.0), (7, 2, 6.0, 6.0)]
    assert out["streams"][0]["largest"] == ["paste_b", "Memcpy HtoD (Pinned -> Device)"]
    assert out["kernels"][0] == {"name": "paste_b", "count": 1, "ms": 9.0}


def test_ops_are_counted_in_threads_started_after_install_by_their_livecam_caller() -> None:
    """A thread started after ``install`` (as the streams' are) runs five IoU calls while
    counting is on: every op is put on the livecam function that ran it, views left out.
    Events order the steps, so the count is exact whatever the host's load."""
    from livecam.gpupipe.networks.nms import box_iou_xyxy

    ops = _script("thread_ops").ThreadOps()
    ready, go, done = threading.Event(), threading.Event(), threading.Event()
    boxes = torch.rand(1, 8, 4)

    def pipeline() -> None:
        box_iou_xyxy(boxes)  # counting off: not counted
        ready.set()
        go.wait(30)
        for _ in range(5):
            box_iou_xyxy(boxes)
        done.set()

    ops.install()
    try:
        thread = threading.Thread(target=pipeline)
        thread.start()
    finally:
        ops.uninstall()
    assert ready.wait(30)
    ops.active = True
    go.set()
    assert done.wait(30)
    ops.active = False
    thread.join(30)
    callers = {key.split(" | ")[0] for key in ops.counts}
    assert callers == {"livecam/gpupipe/networks/nms.py:box_iou_xyxy"}
    total = sum(ops.counts.values())
    assert total % 5 == 0 and 10 <= total // 5 <= 40  # its arithmetic, 22 ops a call
    assert not any(key.endswith(("| unbind", "| view", "| slice")) for key in ops.counts)
    ops.install()  # a thread started after uninstall is not counted
    ops.uninstall()
    other = threading.Thread(target=box_iou_xyxy, args=(boxes,))
    before = dict(ops.counts)
    ops.active = True
    other.start()
    other.join(30)
    ops.active = False
    assert ops.counts == before
