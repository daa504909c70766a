"""The all-GPU frame pipeline (see docs/gpu-pipeline.md).

- :mod:`~livecam.pipeline.gpu.slots`: :class:`Slot` / :class:`SlotRing` (stream, events, pinned
  and device buffers sized once).
- :mod:`~livecam.pipeline.gpu.program`: :class:`FrameProgram`, the per-tick work on the device.
- :mod:`~livecam.pipeline.gpu.graphs`: CUDA-graph capture per slot, face bucket and detection.
- :mod:`~livecam.pipeline.gpu.scheduler`: :class:`GpuScheduler` (submit/collect, overlapped
  ticks) and :class:`TickResult`.
- :mod:`~livecam.pipeline.gpu.build`: :func:`build_program` from the MediaPipe ``.tflite`` files
  and an open torch engine; :class:`ProgramOptions` (from the ``gpu`` config section).
- :mod:`~livecam.pipeline.gpu.baseline`: the naive baseline the benchmark compares against.

Importing this package imports nothing heavy; the submodules import torch.
"""
