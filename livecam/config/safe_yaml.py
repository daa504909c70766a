"""YAML with limits: what every livecam YAML reader (config, ``--set``, manifests, trackers) uses.

PyYAML's ``safe_load`` builds shared objects for aliases, so a 490-byte document of nested
aliases ("billion laughs") loads cheaply, but anything that walks or prints the value (a
validation error message, a loop over a list) expands it to billions of items. PyYAML has no
limit of its own, so :class:`_BoundedLoader` counts, while composing, how many nodes each node
stands for once its aliases are expanded, and refuses a document past :data:`MAX_NODES` or
nested deeper than :data:`MAX_DEPTH` (the composer recurses once per level: deeper nesting
would end in a ``RecursionError``). Both limits are far above any real config (``config.yaml``
has ~150 nodes, 3 levels).

Everything that can go wrong comes back as one :class:`YamlRefused` (``ValueError``) whose
message is short: no value is ever echoed back whole.
"""

from __future__ import annotations

import os
import stat
import sys
from typing import Any

import yaml

#: Most nodes a document may stand for with every alias expanded.
MAX_NODES = 100_000
#: Deepest nesting of lists/mappings.
MAX_DEPTH = 64
#: Largest YAML text read from a file, bytes (config.yaml is ~15 KB).
MAX_TEXT_BYTES = 1 << 20


class YamlRefused(ValueError):
    """The text is not YAML livecam accepts; ``str()`` is one short line (no value echoed)."""


class YamlSyntaxError(YamlRefused):
    """The text is not YAML at all (as opposed to YAML past a limit)."""


class _LimitExceeded(yaml.YAMLError):
    def __init__(self, problem: str, mark: yaml.Mark | None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = mark


class _BoundedLoader(yaml.SafeLoader):
    """``SafeLoader`` that refuses alias bombs and deep nesting while composing (before any
    Python object is built). One instance loads one document; not shared between threads."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        # id(node) -> nodes it stands for with aliases expanded; nodes live as long as the
        # document, so ids are not reused while this loader runs
        self._expanded: dict[int, int] = {}

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            return super().compose_node(parent, index)  # weighed where it is used
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _LimitExceeded(f"nests deeper than {MAX_DEPTH} levels",
                                     self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    # (the stubs type ``anchor`` as a dict; PyYAML passes the anchor's name or None)
    def compose_sequence_node(self, anchor: Any) -> yaml.SequenceNode:
        node = super().compose_sequence_node(anchor)
        self._weigh(node, node.value)
        return node

    def compose_mapping_node(self, anchor: Any) -> yaml.MappingNode:
        node = super().compose_mapping_node(anchor)
        self._weigh(node, [part for pair in node.value for part in pair])
        return node

    def _weigh(self, node: yaml.Node, children: list[yaml.Node]) -> None:
        size = 1 + sum(self._expanded.get(id(child), 1) for child in children)
        if size > MAX_NODES:
            raise _LimitExceeded(f"expands to more than {MAX_NODES:,} values through "
                                 "aliases (&anchor/*alias)", node.start_mark)
        self._expanded[id(node)] = size


def load_yaml(text: str) -> Any:
    """Parse one YAML document with the limits above; raises :class:`YamlRefused`.

    The message says what is wrong and, where known, on which line.
    """
    loader: _BoundedLoader | None = None
    try:
        loader = _BoundedLoader(text)  # the reader checks for unprintable characters here
        return loader.get_single_data()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        if mark is None and isinstance(exc, yaml.reader.ReaderError):
            raise YamlSyntaxError(f"is not YAML text (character #{exc.character:x} at "
                                  f"position {exc.position})") from None
        where = f" (line {mark.line + 1})" if mark is not None else ""
        if isinstance(exc, _LimitExceeded):
            raise YamlRefused(f"{exc.problem}{where}") from None
        raise YamlSyntaxError(f"is not valid YAML{where}") from None
    except (ValueError, OverflowError):
        # e.g. an integer of more than 4300 digits (Python's int() limit) or a date like
        # 2024-13-45: PyYAML lets the builtin's error through
        raise YamlRefused("holds a number or date that cannot be read") from None
    except RecursionError:  # belt and braces: MAX_DEPTH keeps the composer far from it
        raise YamlRefused(f"nests deeper than {MAX_DEPTH} levels") from None
    finally:
        if loader is not None:
            loader.dispose()


def read_yaml_file(path: Any) -> Any:
    """Read and parse a YAML file (UTF-8, at most :data:`MAX_TEXT_BYTES`).

    Raises ``FileNotFoundError``/``OSError`` as ``open`` does (``IsADirectoryError`` for a
    folder), :class:`YamlRefused` for a path that is no regular file (a FIFO, a device, a
    socket: opened without waiting for a writer, so such a path swapped in for a config file
    cannot hang a start or a reload) and for text that is too large, not UTF-8, or refused by
    :func:`load_yaml`.
    """
    with _open_regular(path) as fh:
        data = fh.read(MAX_TEXT_BYTES + 1)
    if len(data) > MAX_TEXT_BYTES:
        raise YamlRefused(f"is larger than {MAX_TEXT_BYTES >> 20} MiB (not a config file?)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise YamlRefused(f"is not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    return load_yaml(text)


def _open_regular(path: Any) -> Any:
    """``path`` opened for binary reading if it is a regular file (see
    :func:`read_yaml_file`); a FIFO is opened non-blocking, so the open returns at once."""
    if sys.platform == "win32":
        flags = os.O_RDONLY | os.O_BINARY  # no FIFOs to wait on; open a folder fails itself
    else:
        flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(21, "Is a directory", str(path))
        if not stat.S_ISREG(mode):
            kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a socket"
                    if stat.S_ISSOCK(mode) else "a device")
            raise YamlRefused(f"is {kind}, not a regular file: give a YAML file")
        if sys.platform != "win32":
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
