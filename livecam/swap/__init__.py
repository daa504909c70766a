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
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from livecam.config import Config
    from livecam.core.stage import Stage
    from livecam.identity.model import IdentitySource


def build_swap_stages(config: Config, identities: IdentitySource) -> list[Stage]:
    """The swap stage(s) for ``config.swap.mode``, constructed but not opened.

    ``identities`` loads identities by name (``IdentityLibrary.from_config(config.identity)``,
    or an ``IdentityCollection`` with one-off ``--source`` identities in front). The stages
    read the active identity from each packet's ``state``.
    """
    if config.swap.mode == "neural":
        neural = importlib.import_module("livecam.swap.neural")
        from livecam.swap.cover import FaceCover

        models = neural.NeuralModels.from_config(config)
        return [neural.build_neural_stage(models, identities.load, assign=config.swap.assign,
                                          cover=FaceCover.from_config(config.swap),
                                          keep_eyes=config.swap.keep_eyes == "always",
                                          keep_mouth=config.swap.keep_mouth,
                                          mouth_size=config.swap.mouth_size)]
    from livecam.swap.stage import ClassicSwapStage

    return [ClassicSwapStage(config.swap, identities)]


__all__ = ["build_swap_stages"]
