"""Face swap stages: classic (mesh warp, the default) and neural (inswapper family).

:func:`build_swap_stages` is what the app calls after the analysis stages. Submodules import
OpenCV and (at ``open()``) mediapipe lazily, so importing this package stays light.
Shared building blocks: :mod:`livecam.swap.blend` (feathered masks and paste-back, also used by
the neural swap), :mod:`livecam.swap.warp` (dense piecewise-affine warp), :mod:`livecam.swap.mesh`
(face-mesh triangles), :mod:`livecam.swap.colour`, :mod:`livecam.swap.cover` (what is shown where
a face cannot be swapped: fail closed).
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from livecam.config import Config
    from livecam.core.stage import Stage
    from livecam.identity.model import IdentitySource

log = logging.getLogger(__name__)


def build_swap_stages(config: Config, identities: IdentitySource) -> list[Stage]:
    """The swap stage(s) for ``config.swap.mode``, constructed but not opened.

    ``identities`` loads identities by name (``IdentityLibrary.from_config(config.identity)``,
    or an ``IdentityCollection`` with one-off ``--source`` identities in front). The stages
    read the active identity from each packet's ``state``.
    """
    if config.swap.mode == "neural":
        neural = importlib.import_module("livecam.swap.neural")
        from livecam.swap.cover import FaceCover
        from livecam.swap.enhance import build_face_enhancer

        enhancer = build_face_enhancer(
            config.swap.enhancer, blend=config.swap.enhancer_blend,
            fidelity=config.swap.enhancer_fidelity, engine_config=config.engine,
            models_config=config.models)
        models = neural.NeuralModels.from_config(config)
        stages: list[Stage] = [neural.build_neural_stage(
            models, identities.load, assign=config.swap.assign,
            cover=FaceCover.from_config(config.swap),
            keep_eyes=config.swap.keep_eyes == "always", keep_mouth=config.swap.keep_mouth,
            mouth_size=config.swap.mouth_size, pixel_boost_px=config.swap.pixel_boost,
            enhancer=enhancer)]
    else:
        from livecam.swap.stage import ClassicSwapStage

        warn_unused_neural_options(config, "the classic swap")
        stages = [ClassicSwapStage(config.swap, identities)]
    return stages + hands_stages(config)


def warn_unused_neural_options(config: Config, path: str) -> None:
    """One warning when ``swap.enhancer`` or ``swap.pixel_boost`` is set for a swap ``path``
    that does not run them (the classic swap; the neural swap runs them on the CPU path and
    in the GPU pipeline)."""
    unused = [f"swap.{key}={value}" for key, value, off in (
        ("enhancer", config.swap.enhancer, "none"), ("pixel_boost", config.swap.pixel_boost, 128))
        if value != off]
    if unused:
        log.warning("%s is not applied by %s (only the neural swap runs it)",
                    " and ".join(unused), path)


def hands_stages(config: Config) -> list[Stage]:
    """``[HandsInFront]`` when ``swap.hands_in_front`` (after whichever swap stage runs, the
    GPU pipeline's included), else nothing."""
    if not config.swap.hands_in_front:
        return []
    from livecam.swap.occlusion import HandsInFront

    return [HandsInFront.from_config(config.swap)]


__all__ = ["build_swap_stages", "hands_stages", "warn_unused_neural_options"]
