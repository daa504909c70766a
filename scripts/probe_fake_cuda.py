"""Run the swap's compiled parts (alignment and paste-back) on fake CUDA tensors that may not
fall back to a real kernel, as torch's precompiling traces them, on a machine without a GPU.

    python -m scripts.probe_fake_cuda

needs a CUDA build of torch (a CPU build cannot make CUDA tensors, fake or not; with no GPU
it still imports). An op with no fake-tensor kernel on CUDA fails here as it failed on the
H200, where the paste-back could not be saved whole (device run 111: cuDNN's grid sampler,
which ``F.grid_sample`` takes on CUDA). Prints one line per part and window; exit 1 if one
fails.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from livecam.engines.torch_engine import TorchEngine
from livecam.gpupipe.build import build_program
from livecam.gpupipe.program import align_crops, paste_faces
from livecam.gpupipe.swap.keep import LOOPS, POINTS, KeepLoops
from tests.helpers.standins import build_inswapper


def _on_fake_cuda(obj: Any, mode: FakeTensorMode, seen: set[int], depth: int = 2) -> None:
    """Each tensor ``obj`` holds (and livecam objects it holds, two levels down) made a fake
    CUDA tensor of the same shape and dtype."""
    if id(obj) in seen or depth < 0:
        return
    seen.add(id(obj))
    for name, value in list(vars(obj).items()):
        if isinstance(value, torch.Tensor):
            setattr(obj, name, FakeTensor(mode, value.to("meta"), torch.device("cuda", 0)))
        elif (hasattr(value, "__dict__") and not isinstance(value, type | torch.nn.Module)
              and type(value).__module__.startswith("livecam")):
            _on_fake_cuda(value, mode, seen, depth - 1)


def main() -> int:
    if not torch.backends.cuda.is_built():
        print("this torch is a CPU build: install a CUDA build of torch to probe", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        engine = TorchEngine(build_inswapper(Path(tmp) / "inswapper.onnx", batch="N"),
                             device="cpu", precision="fp32", cuda_graphs=False)
        engine.open()
        swapper = build_program(engine, device="cpu", window_px=640).swapper
    mode = FakeTensorMode(allow_fallback_kernels=False)
    _on_fake_cuda(swapper, mode, set())
    cuda, n, failed = torch.device("cuda", 0), 2, 0
    with mode:
        frames = torch.empty((1, 1080, 1920, 3), dtype=torch.uint8, device=cuda)
        index = torch.zeros(n, dtype=torch.long, device=cuda)
        pred = torch.empty((n, 3, 128, 128), device=cuda)
        valid = torch.ones(n, dtype=torch.bool, device=cuda)
        hands = torch.zeros((1, 1080, 1920), dtype=torch.uint8, device=cuda)
        keep = KeepLoops(torch.empty((n, LOOPS, POINTS, 2), device=cuda),
                         torch.empty((n,), device=cuda))
        for window in (640, 1088):
            for part, extras in (("alignment", None), ("paste-back", (None, None)),
                                 ("paste-back, hands and kept eyes", (hands, keep))):
                try:
                    matrices, crops, _, _ = align_crops(
                        swapper, frames, index, torch.empty((n, 5, 2), device=cuda), window)
                    if extras is not None:
                        paste_faces(swapper, frames, index, pred, crops, matrices, valid,
                                    *extras, window)
                    print(f"{part}, {window} px window: traced")
                except Exception as exc:  # the op torch names is the finding
                    failed += 1
                    print(f"{part}, {window} px window: {type(exc).__name__}: {exc}"[:300])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
