"""Configuration: frozen dataclasses loaded from ``config.yaml``, ``--config`` and ``--set``."""

from livecam.config.loader import load_config, parse_override
from livecam.config.schema import Config

__all__ = ["Config", "load_config", "parse_override"]
