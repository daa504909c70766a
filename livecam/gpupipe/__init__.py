"""The all-GPU frame pipeline (see docs/gpu-pipeline.md).

- :mod:`~livecam.gpupipe.slots`: :class:`Slot` / :class:`SlotRing` (stream, events, pinned
  and device buffers sized once).
- :mod:`~livecam.gpupipe.program`: :class:`FrameProgram`, the per-tick work on the device.
- :mod:`~livecam.gpupipe.graphs`: CUDA-graph capture per slot, face bucket and detection.
- :mod:`~livecam.gpupipe.scheduler`: :class:`GpuScheduler` (submit/collect, overlapped
  ticks) and :class:`TickResult`.
- :mod:`~livecam.gpupipe.build`: :func:`build_program` from the MediaPipe ``.tflite`` files
  and an open torch engine; :class:`ProgramOptions` (from the ``gpu`` config section).
- :mod:`~livecam.gpupipe.baseline`: the naive baseline the benchmark compares against.

Importing this package imports nothing heavy; the submodules import torch.
"""
