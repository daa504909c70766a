"""A whole config cut into the sections its builders take, as ``livecam.app`` cuts it."""

from __future__ import annotations

from livecam.app import gpu_sections
from livecam.config import Config
from livecam.gpupipe.factory import neural_models
from livecam.swap.neural_models import NeuralModels


def models_of(config: Config) -> NeuralModels:
    """The neural swap's models of ``config`` (``swap.model`` from ``models``, run as
    ``engine`` says), built from its sections as the GPU pipeline builds them."""
    return neural_models(gpu_sections(config))
