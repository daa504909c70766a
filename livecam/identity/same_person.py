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
from livecam.identity.photo import PreparedPhoto

log = logging.getLogger(__name__)

#: Largest embedding distance between two photos still taken as one person (dlib's 0.6).
_SAME_PERSON_MAX = 0.6


def check_same_person(prepared: Sequence[tuple[Path, PreparedPhoto]]) -> None:
    """Raise :class:`IdentityError` naming the photo whose face is not the same person as the
    others (with two photos: the second). ``--force`` does not override this: a mixed identity
    switches person as the head turns."""
    if len(prepared) < 2:
        return
    try:
        from livecam.identity.face_judge import FaceJudge, dlib_box_from_mesh

        judge = FaceJudge()
    except (ImportError, DependencyError) as exc:
        log.warning("cannot check that the photos show one person (%s)", exc)
        return
    embeddings = np.stack([judge.embed(p.texture_bgr, dlib_box_from_mesh(p.landmarks_xy))
                           for _, p in prepared])
    dist = np.linalg.norm(embeddings[:, None, :] - embeddings[None, :, :], axis=2)
    if float(dist.max()) <= _SAME_PERSON_MAX:
        return
    n = len(prepared)
    # the odd one: farthest from the others (median), the later photo on a tie
    median = [float(np.median(np.delete(dist[i], i))) for i in range(n)]
    odd = max(range(n), key=lambda i: (median[i], i))
    raise IdentityError(
        f"{prepared[odd][0]}: not the same person as the other photos (face distance "
        f"{median[odd]:.2f}, over {_SAME_PERSON_MAX}); nothing was added: give one person's "
        "photos per identity (--force does not override this)")
