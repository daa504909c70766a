"""An identity whose preparation is held until the test lets it go, and a check that a call
did not wait for it: the tests that a switch to an identity being prepared covers the face
rather than holds up the stream's frames (classic, CPU neural and GPU paths)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class HeldIdentity:
    """Wraps ``prepare(name)``: for ``held`` it sets :attr:`started` and waits for
    :attr:`release` (60 s at most) before it answers."""

    def __init__(self, prepare: Callable[[str], Any], held: str) -> None:
        self._prepare = prepare
        self.held = held
        self.started = threading.Event()
        self.release = threading.Event()

    def __call__(self, name: str) -> Any:
        if name == self.held:
            self.started.set()
            assert self.release.wait(60), "the test did not release the held identity"
        return self._prepare(name)

    def returns_while_held(self, call: Callable[[], Any], timeout_s: float = 10.0) -> Any:
        """``call()`` on a thread while the held identity is being prepared; fails when it
        did not return within ``timeout_s`` (it waited for that preparation), then releases
        the identity either way. Returns what ``call`` returned."""
        assert self.started.wait(60), f"{self.held} was not prepared ahead of use"
        got: list[Any] = []
        thread = threading.Thread(target=lambda: got.append(call()), daemon=True)
        thread.start()
        thread.join(timeout_s)  # a frame that does not wait takes well under a second
        waited = thread.is_alive()
        self.release.set()
        thread.join(60)
        assert not waited, f"the call waited for {self.held}'s preparation"
        assert got, "the call raised"
        return got[0]
