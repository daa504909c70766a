"""``Backoff``: the waits between attempts to reach something that went away (a camera, a
Triton server, a remote swap server, a model download): doubling from a first wait up to a
longest one, back to the first after a success. The one retry policy of the package."""

from __future__ import annotations


class Backoff:
    """Waits of ``initial_s``, twice that, ... up to ``max_s`` (seconds, both > 0;
    ``math.inf``: no longest wait, for a loop with a bounded number of attempts).

    ``next_s()`` gives the wait before the next attempt and doubles the one after it;
    ``reset()`` after a success starts again from ``initial_s``; ``slowest()`` jumps to
    ``max_s`` (an attempt that will not succeed soon, e.g. a refused token). Not thread-safe:
    one retry loop owns it.
    """

    def __init__(self, initial_s: float, max_s: float) -> None:
        if initial_s <= 0 or max_s <= 0:
            raise ValueError(f"waits must be positive, got {initial_s:g} and {max_s:g}")
        self.initial_s = initial_s
        self.max_s = max(max_s, initial_s)
        self._next_s = initial_s

    def next_s(self) -> float:
        """The wait before the next attempt, s; the one after it doubles (up to ``max_s``)."""
        wait_s = self._next_s
        self._next_s = min(2 * wait_s, self.max_s)
        return wait_s

    def reset(self) -> None:
        """An attempt succeeded: the next wait is ``initial_s`` again."""
        self._next_s = self.initial_s

    def slowest(self) -> None:
        """The next waits are ``max_s``."""
        self._next_s = self.max_s
