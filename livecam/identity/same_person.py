"""One identity, one person: photos whose face embeddings disagree are refused.

dlib's 128-d face ResNet (``face-recognition-models``, the ``identity`` extra) embeds each
photo's face; two faces farther apart than ``_SAME_PERSON_MAX`` are different people (dlib's
own threshold: same person about 0.2-0.5, different people 0.6-0.95). Without dlib the check is
skipped with a warning, since the classic swap itself does not need it. Any thread.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from livecam.core.errors import DependencyError, IdentityError
from livecam.identity.model import IdentityPhoto
from livecam.identity.photo import PreparedPhoto

log = logging.getLogger(__name__)

#: Largest embedding distance between two photos still taken as one person (dlib's 0.6).
_SAME_PERSON_MAX = 0.6


def check_same_person(prepared: Sequence[tuple[Path, PreparedPhoto]],
                      kept: Sequence[IdentityPhoto] = ()) -> None:
    """Raise :class:`IdentityError` naming the photo being added whose face is not the same
    person as the others, ``kept`` (the identity's photos already in the library) included
    (with two new photos and none kept: the second). ``--force`` does not override this: a
    mixed identity switches person as the head turns."""
    if len(prepared) + len(kept) < 2 or not prepared:
        return
    try:
        from livecam.identity.face_judge import FaceJudge, dlib_box_from_mesh

        judge = FaceJudge()
    except (ImportError, DependencyError) as exc:
        log.warning("cannot check that the photos show one person (%s)", exc)
        return
    faces = [(p.texture_bgr, p.landmarks_xy) for _, p in prepared]
    faces += [(k.texture_bgr, k.landmarks_xy) for k in kept]
    embeddings = np.stack([judge.embed(texture, dlib_box_from_mesh(xy))
                           for texture, xy in faces])
    dist = np.linalg.norm(embeddings[:, None, :] - embeddings[None, :, :], axis=2)
    n = len(prepared)
    if float(dist[:n].max()) <= _SAME_PERSON_MAX:  # new with new and new with kept
        return
    # the odd one of the new photos: farthest from the others (median), the later on a tie
    median = [float(np.median(np.delete(dist[i], i))) for i in range(n)]
    odd = max(range(n), key=lambda i: (median[i], i))
    others = "the other photos" + (" and the identity's photos" if kept else "")
    raise IdentityError(
        f"{prepared[odd][0]}: not the same person as {others} (face distance "
        f"{median[odd]:.2f}, over {_SAME_PERSON_MAX}); nothing was added: give one person's "
        "photos per identity (--force does not override this)")
