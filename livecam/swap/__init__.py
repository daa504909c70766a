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
    from livecam.core.stage import AnyStage, Stage
    from livecam.identity.model import IdentitySource
    from livecam.swap.neural import NeuralSwapStage

log = logging.getLogger(__name__)


def build_swap_stages(config: Config, identities: IdentitySource) -> list[AnyStage]:
    """The swap stage(s) for ``config.swap.mode``, constructed but not opened.

    ``identities`` loads identities by name (``IdentityLibrary.from_config(config.identity)``,
    or an ``IdentityCollection`` with one-off ``--source`` identities in front). The stages
    read the active identity from each packet's ``state``. With ``engine.backend: triton``
    the neural swap keeps ``advanced.engine.triton_in_flight`` frames in flight
    (:class:`~livecam.swap.neural_remote.RemoteSwapStage`, an asynchronous last stage).
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
        stage = neural.build_neural_stage(
            models, identities.load, assign=config.swap.assign,
            cover=FaceCover.from_config(config.swap),
            keep_eyes=config.swap.keep_eyes == "always", keep_mouth=config.swap.keep_mouth,
            mouth_size=config.swap.mouth_size, pixel_boost_px=config.swap.pixel_boost,
            enhancer=enhancer, missing_log_interval_s=config.swap.missing_log_interval_s)
        return [remote_swap(config, stage), *hands_stages(config)]
    from livecam.swap.stage import ClassicSwapStage

    warn_unused_neural_options(config, "the classic swap")
    return [ClassicSwapStage(config.swap, identities), *hands_stages(config)]


def remote_swap(config: Config, stage: NeuralSwapStage) -> AnyStage:
    """``stage`` (the neural swap) with ``advanced.engine.triton_in_flight`` frames in flight when
    its model runs on Triton; as it is otherwise, with 1, and with ``swap.hands_in_front`` (only
    the last stage can finish frames later, and the hands stage comes after the swap)."""
    in_flight = config.engine.triton_in_flight
    if config.engine.backend != "triton" or in_flight <= 1:
        return stage
    if config.swap.hands_in_front:
        log.info("swap.hands_in_front: the Triton swap keeps one request in flight (the hands "
                 "stage runs after it)")
        return stage
    from livecam.swap.neural_remote import RemoteSwapStage

    return RemoteSwapStage(stage, capacity=in_flight)


def warn_unused_neural_options(config: Config, path: str) -> None:
    """One warning when ``swap.enhancer`` or ``advanced.swap.pixel_boost`` is set for a swap
    ``path`` that does not run them (the classic swap; the neural swap runs them on the CPU path and
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


__all__ = ["build_swap_stages", "hands_stages", "remote_swap", "warn_unused_neural_options"]
