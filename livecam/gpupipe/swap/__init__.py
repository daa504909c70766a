"""The swap's building blocks on torch tensors, batched and CUDA-graph capturable, each the twin
of a CPU function (tests/gpupipe/swap compares them on real photos):

- :mod:`~livecam.gpupipe.swap.warp`: ``cv2.warpAffine`` (fixed-point positions, bilinear, borders).
- :mod:`~livecam.gpupipe.swap.align`: 5-point similarity to the ArcFace templates; 5 points from the
  face mesh.
- :mod:`~livecam.gpupipe.swap.blend`: feathered masks, low-frequency colour gain, windowed
  paste-back.
- :mod:`~livecam.gpupipe.swap.paste`: insightface's paste-back with static shapes.
- :mod:`~livecam.gpupipe.swap.neural`: :class:`GpuInswapper`, the neural swap around a torch engine.

Importing this package imports nothing heavy; the submodules import torch.
"""
