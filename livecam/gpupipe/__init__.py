"""The GPU path, shared by every stream of a process (see docs/gpu-pipeline.md): the face
follower's networks and the neural swap.

- :mod:`~livecam.gpupipe.networks`: MediaPipe's face detector and face mesh as batched torch
  modules, shared by the streams (:class:`~livecam.gpupipe.networks.shared.SharedFaceNetworks`;
  each stream's :class:`~livecam.gpupipe.networks.client.StreamFaceNetworks` implements the
  follower's ``FaceNetworks`` protocol, as the CPU's MediaPipe networks do).
- :mod:`~livecam.gpupipe.swap`: the swap's maths on tensors (align, warp, paste-back, the kept
  eyes and mouth, the enhancer), each the twin of a CPU function.

- :mod:`~livecam.gpupipe.slots`: :class:`Slot` / :class:`SlotRing` (stream, events, device
  buffers sized once) and each stream's pinned :class:`FrameBuffers`.
- :mod:`~livecam.gpupipe.program`: :class:`SwapProgram`, the per-tick work on the device.
- :mod:`~livecam.gpupipe.graphs`: CUDA-graph capture per slot and face bucket.
- :mod:`~livecam.gpupipe.scheduler`: :class:`GpuScheduler` (submit/collect, overlapped ticks).
- :mod:`~livecam.gpupipe.hub`: :class:`GpuSwapHub`, the ticks of every stream, one generator.
- :mod:`~livecam.gpupipe.stage`: :class:`GpuSwapStage`, one stream's asynchronous swap stage.
- :mod:`~livecam.gpupipe.factory`: when and how ``livecam run`` builds them.
- :mod:`~livecam.gpupipe.shapes`, :mod:`~livecam.gpupipe.memory`,
  :mod:`~livecam.gpupipe.prepared`: what a start compiles and captures (buckets, never the
  number of streams), the memory it needs, and what the engine cache already holds.

Importing this package imports nothing heavy; the submodules import torch.
"""
