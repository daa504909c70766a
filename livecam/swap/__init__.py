"""Face swap stages: classic (mesh warp, the default) and neural (inswapper family).

:func:`build_classic_swap_stage` and :func:`build_neural_swap_stage` are what the composition
root (:mod:`livecam.app`, which picks one) calls after the analysis stages. Submodules import
OpenCV and (at ``open()``) mediapipe lazily, so importing this package stays light.
Shared building blocks: :mod:`livecam.swap.blend` (feathered masks and paste-back, also used by
the neural swap), :mod:`livecam.swap.warp` (dense piecewise-affine warp), :mod:`livecam.swap.mesh`
(face-mesh triangles), :mod:`livecam.swap.colour`, :mod:`livecam.swap.cover` (what is shown where
a face cannot be swapped: fail closed).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from livecam.config.engine import EngineConfig, ModelsConfig
    from livecam.config.swap import SwapConfig
    from livecam.core.stage import Stage
    from livecam.identity.model import IdentitySource
    from livecam.swap.neural import NeuralSwapStage
    from livecam.swap.stage import ClassicSwapStage

log = logging.getLogger(__name__)


def build_classic_swap_stage(swap: SwapConfig, identities: IdentitySource) -> ClassicSwapStage:
    """The classic (mesh warp) swap stage for the ``swap`` section, constructed but not opened;
    one warning for the neural options it does not run. Raises :class:`TypeError` for anything
    but the swap section (the composition root, :mod:`livecam.app`, picks the swap and hands
    each builder its sections).

    ``identities`` loads identities by name (``IdentityLibrary.from_config(config.identity)``,
    or an ``IdentityCollection`` with one-off ``--source`` identities in front). The stage
    reads the active identity from each packet's ``state``."""
    _require_swap(swap, "build_classic_swap_stage")
    from livecam.swap.stage import ClassicSwapStage

    warn_unused_neural_options(swap, "the classic swap")
    return ClassicSwapStage(swap, identities)


def build_neural_swap_stage(swap: SwapConfig, identities: IdentitySource, *,
                            models: ModelsConfig, engine: EngineConfig,
                            max_faces: int) -> NeuralSwapStage:
    """The neural (inswapper family) swap stage for the ``swap`` section, its model from the
    ``models`` section on the ``engine`` section's backend (``max_faces``:
    ``analysis.max_faces``), with ``swap.enhancer``; constructed but not opened. Raises
    :class:`TypeError` for a whole config in place of a section. ``identities``: as
    :func:`build_classic_swap_stage`."""
    _require_swap(swap, "build_neural_swap_stage")
    from livecam.swap.cover import FaceCover
    from livecam.swap.enhance import build_face_enhancer
    from livecam.swap.neural import build_neural_stage
    from livecam.swap.neural_models import NeuralModels

    enhancer = build_face_enhancer(swap.enhancer, blend=swap.enhancer_blend,
                                   fidelity=swap.enhancer_fidelity, engine_config=engine,
                                   models_config=models)
    neural = NeuralModels.from_sections(models, engine, model=swap.model, max_faces=max_faces)
    return build_neural_stage(
        neural, identities.load, assign=swap.assign, cover=FaceCover.from_config(swap),
        keep_eyes=swap.keep_eyes == "always", keep_mouth=swap.keep_mouth,
        mouth_size=swap.mouth_size, pixel_boost_px=swap.pixel_boost, enhancer=enhancer,
        missing_log_interval_s=swap.missing_log_interval_s)


def warn_unused_neural_options(swap: SwapConfig, path: str) -> None:
    """One warning when ``swap.enhancer`` or ``advanced.swap.pixel_boost`` is set for a swap
    ``path`` that does not run them (the classic swap; the neural swap runs them on the CPU path and
    in the GPU pipeline)."""
    unused = [f"swap.{key}={value}" for key, value, off in (
        ("enhancer", swap.enhancer, "none"), ("pixel_boost", swap.pixel_boost, 128))
        if value != off]
    if unused:
        log.warning("%s is not applied by %s (only the neural swap runs it)",
                    " and ".join(unused), path)


def hands_stages(swap: SwapConfig) -> list[Stage]:
    """``[HandsInFront]`` when ``swap.hands_in_front`` (after whichever swap stage runs, the
    GPU pipeline's included), else nothing."""
    _require_swap(swap, "hands_stages")
    if not swap.hands_in_front:
        return []
    from livecam.swap.occlusion import HandsInFront

    return [HandsInFront.from_config(swap)]


def _require_swap(swap: object, builder: str) -> None:
    from livecam.config.swap import SwapConfig

    if not isinstance(swap, SwapConfig):
        raise TypeError(f"{builder} takes the config's swap section (config.swap), "
                        f"not {type(swap).__name__}")


__all__ = ["build_classic_swap_stage", "build_neural_swap_stage", "hands_stages",
           "warn_unused_neural_options"]
