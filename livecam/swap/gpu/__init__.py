"""The swap's building blocks on torch tensors, batched and CUDA-graph capturable, each the twin
of a CPU function (tests/swap/gpu compares them on real photos):

- :mod:`~livecam.swap.gpu.warp`: ``cv2.warpAffine`` (fixed-point positions, bilinear, borders).
- :mod:`~livecam.swap.gpu.align`: 5-point similarity to the ArcFace templates; 5 points from the
  face mesh.
- :mod:`~livecam.swap.gpu.blend`: feathered masks, low-frequency colour gain, windowed
  paste-back.
- :mod:`~livecam.swap.gpu.paste`: insightface's paste-back with static shapes.
- :mod:`~livecam.swap.gpu.neural`: :class:`GpuInswapper`, the neural swap around a torch engine.

Importing this package imports nothing heavy; the submodules import torch.
"""
