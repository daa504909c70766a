"""The switching judge on made-up frames (plain numpy): it holds the product to what a
command's ``first_frame_index`` promises and to nothing that depends on the host's speed."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from tests.control.switch_judge import BITS, REAL, Applied, SentFrames, judge
from tests.helpers import frame_code

FACE = (40, 40, 120, 120)  # x1, y1, x2, y2: away from the frame code in the corner
_RNG = np.random.default_rng(0)
BASE = _RNG.integers(0, 256, (240, 320, 3), np.uint8)
LOOKS = {"alice": _RNG.integers(0, 256, (80, 80, 3), np.uint8),
         "bob": _RNG.integers(0, 256, (80, 80, 3), np.uint8)}
COMMANDS = [Applied("alice", frames_sent=3, first_index=3),
            Applied("bob", frames_sent=30, first_index=30),
            Applied(REAL, frames_sent=50, first_index=50)]


def _sent(looks: list[str]) -> SentFrames:
    """Frame k (input index k) showing ``looks[k]``: REAL, an identity or "covered"."""
    sent = SentFrames(BASE, FACE)
    x1, y1, x2, y2 = FACE
    for k, look in enumerate(looks):
        frame = frame_code.draw_code(BASE, k, bits=BITS, box_xyxy=sent.box)
        if look == "covered":
            frame[y1:y2, x1:x2] = cv2.blur(frame[y1:y2, x1:x2], (41, 41))
        elif look != REAL:
            frame[y1:y2, x1:x2] = LOOKS[look]
        sent.add(frame)
    return sent


def _looks(alice_covered: int = 0, bob_covered: int = 0) -> list[str]:
    return ([REAL] * 3 + ["covered"] * alice_covered + ["alice"] * (27 - alice_covered)
            + ["covered"] * bob_covered + ["bob"] * (20 - bob_covered) + [REAL] * 10)


def test_an_identity_may_be_covered_for_any_number_of_frames_before_it_shows() -> None:
    """Preparing an identity takes time, not frames: on a loaded host it covers many."""
    report = judge(_sent(_looks(alice_covered=20, bob_covered=12)), COMMANDS, initial=REAL,
                   threads=2)
    assert report["covered_at_switch"] == [20, 12, 0]
    sent = _sent(_looks(bob_covered=12))  # what a test waits on: frames shown uncovered
    assert sent.shown_since(30, "bob") == 8 and sent.shown_since(50, REAL) == 10


@pytest.mark.parametrize(("where", "look", "why"), [
    (31, "alice", "the identity switched away from, after first_frame_index"),
    (29, "bob", "an identity before its first_frame_index"),
    (50, "bob", "an identity where bypass applies"),
    (20, "covered", "the cover after the identity showed"),
    (55, "covered", "the cover where the real face is expected"),
    (10, REAL, "the real face where an identity is expected"),
])
def test_a_frame_in_the_wrong_state_fails(where: int, look: str, why: str) -> None:
    looks = _looks(alice_covered=5)
    looks[where] = look
    with pytest.raises(AssertionError, match="wrong state"):
        judge(_sent(looks), COMMANDS, initial=REAL, threads=2)


def test_an_identity_never_shown_fails() -> None:
    with pytest.raises(AssertionError, match="bob was never shown"):
        judge(_sent(_looks(bob_covered=20)), COMMANDS, initial=REAL, threads=2)
