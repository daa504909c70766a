"""Write the documented default config (``python -m livecam.config.document > config.yaml``).

The help text of each :func:`~livecam.config.fields.knob` becomes the comment of its key, so
``config.yaml`` and the schema cannot drift apart (a test compares them).
"""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Callable
from typing import Any

import yaml

from livecam.config.fields import user_fields
from livecam.config.names import is_streamer
from livecam.config.schema import Config

HEADER = """\
# livecam configuration: every key with its default and meaning.
# Use with `livecam run --config FILE`; override single keys with `--set section.key=value`.
# Unknown keys, wrong types and out-of-range values stop livecam with a one-line error.
# The keys a streamer sets come first; tuning knobs follow under `advanced:`
# (`--set advanced.gpu.slots=4`). `livecam config` shows the keys in effect.
"""

ADVANCED_HEADER = """
# Tuning knobs: the defaults suit most streams. Written under `advanced:` (`--set advanced.KEY`);
# their old names without `advanced.` still work for one release, with a warning.
advanced:"""


def _scalar(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    return text.removesuffix("\n...").removesuffix("...").strip()


def _section(obj: Any, indent: int, wanted: Callable[[str], bool], prefix: str = "") -> list[str]:
    """The keys of ``obj`` whose attribute path ``wanted`` accepts, documented, as YAML lines."""
    lines: list[str] = []
    pad = " " * indent
    for f in user_fields(obj):
        value = getattr(obj, f.name)
        dotted = f"{prefix}{f.name}"
        if dataclasses.is_dataclass(value):
            inner = _section(value, indent + 2, wanted, dotted + ".")
            if not inner:
                continue
            doc = (type(value).__doc__ or "").strip().splitlines()
            lines.append("")
            if doc and not doc[0].startswith(type(value).__name__ + "("):
                lines.append(f"{pad}# {doc[0]}")
            lines.append(f"{pad}{f.name}:")
            lines.extend(inner)
            continue
        if not wanted(dotted):
            continue
        help_text = f.metadata.get("help", "")
        choices = f.metadata.get("choices")
        if choices:
            help_text += " One of: " + ", ".join(str(c) for c in choices) + "."
        wrapped = textwrap.wrap(help_text, 96 - indent) or [""]
        if isinstance(value, (list, tuple, dict)) and value:
            for w in wrapped:
                lines.append(f"{pad}# {w}")
            dumped = yaml.safe_dump({f.name: _plain(value)}, default_flow_style=False,
                                    sort_keys=False)
            lines.extend(pad + line for line in dumped.rstrip().splitlines())
            continue
        entry = f"{pad}{f.name}: {_scalar(_plain(value))}"
        if len(entry) + len(wrapped[0]) + 3 <= 100 and len(wrapped) == 1:
            lines.append(f"{entry}  # {wrapped[0]}")
        else:
            for w in wrapped:
                lines.append(f"{pad}# {w}")
            lines.append(entry)
    return lines


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def render(config: Config | None = None, *, advanced: bool = True) -> str:
    """``config`` (default: the built-in defaults) as a documented YAML file: the streamer
    keys, then (``advanced``) every other key under ``advanced:``."""
    config = Config() if config is None else config
    text = HEADER + "\n".join(_section(config, 0, is_streamer)).lstrip("\n") + "\n"
    if advanced:
        rest = _section(config, 2, lambda key: not is_streamer(key))
        text += ADVANCED_HEADER + "\n" + "\n".join(rest).lstrip("\n") + "\n"
    return text


if __name__ == "__main__":
    print(render(), end="")
