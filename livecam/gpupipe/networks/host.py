"""Frames in page-locked host memory, put there by the capture thread as it reads them.

A frame reaches the GPU asynchronously only from page-locked ("pinned") host memory. Without
this module the follower's networks copy each frame into a pinned staging buffer of their own
before they upload it: 0.5 ms a 1080p frame on the H200's host, on the thread that every frame
of the stream waits for. With ``advanced.gpu.pinned_capture`` the
capture thread copies the frame into pinned memory as it reads it (:func:`pinned_copy`, the
:class:`~livecam.core.stage.HostFrames` hook of the analysis stage) and the networks upload
straight from there (:func:`pinned_tensor`). A source that can decode into a buffer it is
given (a camera through OpenCV) decodes straight into a pinned block
(:meth:`PinnedFrames.empty`): no copy at all.

The memory comes from torch's caching host allocator: after the first frames a new frame takes
a block that an older frame gave back when its last reference went, and the allocator hands a
block out again only after every non-blocking copy that read it has finished (torch records
an event on the block with each such copy). So a frame is never overwritten while its upload
runs, and nothing here has to say when a frame is done with.
"""

from __future__ import annotations

import logging
import threading

import numpy as np
import torch

from livecam.core.types import ImageBGR

log = logging.getLogger(__name__)

_failed = threading.Event()  # pinning failed once: frames stay where the source put them


class PinnedFrames:
    """The capture thread's way into pinned memory (the analysis stage's ``host_frames``):
    called with a frame, a copy of it there (:func:`pinned_copy`); :meth:`empty` gives a
    block a source decodes its next frame into, so that frame needs no copy at all (a camera
    through OpenCV: :meth:`livecam.capture.sources.CameraSource.read_into`)."""

    def __call__(self, image_bgr: ImageBGR) -> ImageBGR:
        """``image_bgr`` copied into pinned memory, read-only (as the capture thread's frames
        are).

        Where pinned memory cannot be had (none left, no CUDA), the frame itself, once warned:
        the networks then copy it into their own staging as before, so nothing is lost but the
        time.
        """
        out = self.empty(tuple(image_bgr.shape))
        if out is None:
            return image_bgr
        np.copyto(out, image_bgr)
        out.flags.writeable = False
        return out

    @staticmethod
    def empty(shape: tuple[int, ...]) -> np.ndarray | None:
        """A writable uint8 array of ``shape`` in a pinned block of its own, or None where
        pinned memory cannot be had (warned once, as for a copy)."""
        if _failed.is_set():
            return None
        try:
            block = torch.empty(shape, dtype=torch.uint8, pin_memory=True)
        except RuntimeError as exc:
            _failed.set()
            log.warning("frames cannot be put in page-locked memory (%s): the GPU's face "
                        "networks copy each frame into their own instead (set "
                        "advanced.gpu.pinned_capture=false to not try)", exc)
            return None
        return block.numpy()


#: ``image_bgr`` copied into pinned memory (see :class:`PinnedFrames`), the analysis stage's
#: ``host_frames`` on CUDA
pinned_copy = PinnedFrames()


def pinned_tensor(image_bgr: ImageBGR) -> torch.Tensor | None:
    """The pinned block a frame of :func:`pinned_copy` lives in, (H, W, 3) uint8, or None for
    any other array (the caller copies it into its own staging then).

    The whole block only: a view of another shape, or of other strides, of it is None (a
    C-contiguous uint8 view of the block's shape holds all of its bytes, so it starts where the
    block starts).
    """
    base = image_bgr.base
    if not isinstance(base, torch.Tensor) or base.dtype != torch.uint8:
        return None
    if image_bgr.dtype != np.uint8 or not image_bgr.flags.c_contiguous:
        return None
    if (tuple(base.shape) != image_bgr.shape or not base.is_contiguous()
            or not base.is_pinned()):
        return None
    return base
