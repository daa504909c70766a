"""The photos ``livecam serve`` keeps for reconnecting clients
(:class:`livecam.remote.photos.RecentPhotos`): per user, the newest two, for ``keep_s`` after
their last use, none with ``keep_s`` 0. The clock is the test's (no sleeping)."""

from __future__ import annotations

import numpy as np

from livecam.identity.model import Identity, IdentityPhoto
from livecam.remote.photos import RecentPhotos


def _identity(name: str) -> Identity:
    photo = IdentityPhoto(sha256=name, texture_bgr=np.zeros((4, 4, 3), np.uint8),
                          landmarks_xy=np.zeros((468, 2), np.float32),
                          landmarks_z=np.zeros(468, np.float32))
    return Identity(name=name, photos=(photo,))


def test_a_photo_is_kept_for_its_user_only_for_keep_s_after_its_last_use() -> None:
    now = [0.0]
    recent = RecentPhotos(60.0, clock=lambda: now[0])
    recent.put("alice", "a" * 64, _identity("one"), ["blurry"])
    assert recent.take("bob", "a" * 64) is None  # another user cannot learn it was sent
    now[0] = 50.0
    kept = recent.take("alice", "a" * 64)
    assert kept is not None and kept.identity.name == "one" and kept.warnings == ["blurry"]
    now[0] = 100.0  # 50 s after its last use: still kept
    assert recent.take("alice", "a" * 64) is not None
    now[0] = 161.0
    assert recent.take("alice", "a" * 64) is None


def test_the_two_newest_per_user_are_kept_and_keep_s_0_keeps_none() -> None:
    recent = RecentPhotos(60.0, clock=lambda: 0.0)
    for k in "abc":
        recent.put("alice", k * 64, _identity(k), [])
    recent.put("bob", "d" * 64, _identity("d"), [])
    assert recent.take("alice", "a" * 64) is None
    assert recent.take("alice", "b" * 64) is not None
    assert recent.take("alice", "c" * 64) is not None
    assert recent.take("bob", "d" * 64) is not None
    none = RecentPhotos(0.0)
    none.put("alice", "a" * 64, _identity("a"), [])
    assert none.take("alice", "a" * 64) is None
