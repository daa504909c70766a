"""The neural swap on the GPU, shared by every stream of a process (see docs/gpu-pipeline.md).

- :mod:`~livecam.gpupipe.slots`: :class:`Slot` / :class:`SlotRing` (stream, events, device
  buffers sized once) and each stream's pinned :class:`FrameBuffers`.
- :mod:`~livecam.gpupipe.program`: :class:`SwapProgram`, the per-tick work on the device.
- :mod:`~livecam.gpupipe.graphs`: CUDA-graph capture per slot and face bucket.
- :mod:`~livecam.gpupipe.scheduler`: :class:`GpuScheduler` (submit/collect, overlapped ticks).
- :mod:`~livecam.gpupipe.hub`: :class:`GpuSwapHub`, the ticks of every stream, one generator.
- :mod:`~livecam.gpupipe.stage`: :class:`GpuSwapStage`, one stream's asynchronous swap stage.
- :mod:`~livecam.gpupipe.factory`: when and how ``livecam run`` builds them.
- :mod:`~livecam.gpupipe.baseline`: the naive baseline the benchmark compares against.

Importing this package imports nothing heavy; the submodules import torch.
"""
