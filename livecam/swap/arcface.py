"""ArcFace identity embeddings for the neural swap (w600k_r50 and same-shaped recognizers).

Preprocessing follows insightface 2.1's ``ArcFaceONNX.get``: 5-point similarity alignment to the
112x112 template, RGB, ``(x - 127.5) / 127.5``. Embeddings of identities are cached in memory by
the photos' sha256 and the recognizer, and optionally on disk (``cache_dir``), so switching
identities during a run costs nothing after the first time. The disk cache is only a cache:
each entry is written whole or not at all (:func:`~livecam.core.files.atomic_write`), an empty
or damaged entry is computed again and replaced, and a folder that cannot be written (no
permission, a full disk) is said once and the run goes on from memory.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt

from livecam.core.errors import IdentityError
from livecam.core.files import atomic_write
from livecam.core.types import ImageBGR
from livecam.engines.protocol import Engine
from livecam.swap.align import align_matrix, warp_crop
from livecam.swap.inswapper import crops_to_blob

log = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float32]

#: name -> an identity's (512,) embedding, None (or :class:`IdentityError`) when it has none:
#: what the neural stages and the GPU hub are given (:class:`IdentityEmbeddings` in the product)
EmbeddingFn = Callable[[str], "np.ndarray | None"]


def embedding_of(source_embedding: EmbeddingFn, name: str) -> FloatArray:
    """``source_embedding(name)`` as float32; :class:`IdentityError` when there is none."""
    embedding = source_embedding(name)
    if embedding is None:
        raise IdentityError(f"identity {name!r} has no usable photo")
    return np.asarray(embedding, np.float32)


class ArcFaceEmbedder:
    """Raw (unnormalised) 512-d embeddings of faces given their 5 keypoints.

    ``engine`` runs the recognizer (input (N, 3, S, S), output (N, 512)); ``size_px`` is its
    input size. Any one thread at a time.
    """

    def __init__(self, engine: Engine, *, size_px: int = 112, mean: float = 127.5,
                 std: float = 127.5) -> None:
        self.engine = engine
        self.size_px = size_px
        self.mean, self.std = mean, std

    def open(self) -> None:
        self.engine.open()

    def close(self) -> None:
        self.engine.close()

    def aligned(self, image_bgr: ImageBGR, kps_xy: np.ndarray) -> npt.NDArray[np.uint8]:
        """(N, S, S, 3) uint8 BGR crops for keypoints (N, 5, 2) px (ArcFace order)."""
        return np.stack([warp_crop(image_bgr, align_matrix(k, self.size_px), self.size_px)
                         for k in np.asarray(kps_xy, dtype=np.float32).reshape(-1, 5, 2)])

    def embed(self, image_bgr: ImageBGR, kps_xy: np.ndarray) -> FloatArray:
        """(N, 512) float32 embeddings of the faces at keypoints (N, 5, 2) in ``image_bgr``."""
        crops = self.aligned(image_bgr, kps_xy)
        blob = crops_to_blob(crops, self.mean, self.std)
        name = self.engine.inputs[0].name
        rows = [self.engine.run({name: blob[i:i + 1]})[self.engine.outputs[0].name]
                for i in range(len(blob))]
        return np.concatenate(rows).astype(np.float32)


def normed(v: np.ndarray) -> FloatArray:
    return (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(np.float32)


class IdentityEmbeddings:
    """name -> (512,) normalised mean embedding of an identity's photos, cached.

    ``load_identity(name)`` returns a :class:`livecam.identity.model.Identity` (photos with
    ``texture_bgr`` and 468/478 ``landmarks_xy``); ``five_point`` maps landmarks (N, K, 2) to
    ArcFace keypoints (N, 5, 2). ``recognizer_id`` (e.g. the model's sha256) keys the disk
    cache so embeddings from another recognizer are never reused. One thread at a time (the
    stages call it on their identity worker thread).
    """

    def __init__(self, embedder: ArcFaceEmbedder, load_identity: Callable[[str], object],
                 five_point: Callable[[np.ndarray], np.ndarray], *, recognizer_id: str,
                 cache_dir: str | Path | None = None) -> None:
        self.embedder = embedder
        self.load_identity = load_identity
        self.five_point = five_point
        self.recognizer_id = recognizer_id
        self.cache_dir = Path(cache_dir) / recognizer_id[:16] if cache_dir else None
        self._memory: dict[tuple[str, ...], FloatArray] = {}

    def __call__(self, name: str) -> FloatArray | None:
        identity = self.load_identity(name)
        photos = getattr(identity, "photos", ())
        if not photos:
            return None
        key = tuple(sorted(p.sha256 for p in photos))
        cached = self._memory.get(key)
        if cached is not None:
            return cached
        vectors = [self._photo_embedding(p) for p in photos]
        mean = normed(np.mean([normed(v) for v in vectors], axis=0))
        self._memory[key] = mean
        return mean

    def _photo_embedding(self, photo: object) -> FloatArray:
        sha = str(getattr(photo, "sha256"))  # noqa: B009 -- duck-typed IdentityPhoto
        path = self.cache_dir / f"{sha}.npy" if self.cache_dir else None
        cached = _read_entry(path) if path is not None else None
        if cached is not None:
            return cached
        landmarks = np.asarray(getattr(photo, "landmarks_xy"), dtype=np.float32)  # noqa: B009
        kps = self.five_point(landmarks[None])
        vector = self.embedder.embed(getattr(photo, "texture_bgr"), kps)[0]  # noqa: B009
        if path is not None:
            self._write_entry(path, vector)
        return vector

    def _write_entry(self, path: Path, vector: FloatArray) -> None:
        buffer = io.BytesIO()
        np.save(buffer, np.asarray(vector, np.float32), allow_pickle=False)
        try:
            atomic_write(path, buffer.getvalue())
        except OSError as exc:
            log.warning("cannot write the embedding cache %s (%s): this run keeps embeddings "
                        "in memory only; free space or fix the folder's permissions",
                        path.parent, exc.strerror or exc)
            self.cache_dir = None  # said once: no further tries this run


def _read_entry(path: Path) -> FloatArray | None:
    """The cached embedding at ``path``; None when there is none, or when it is empty or
    damaged (then it is computed again, and the new entry replaces it)."""
    if not path.is_file():
        return None
    try:
        vector = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        log.warning("embedding cache entry %s is damaged (%s): computing it again", path, exc)
        return None
    if (not isinstance(vector, np.ndarray) or vector.ndim != 1 or not 0 < vector.size <= 8192
            or vector.dtype.kind != "f" or not np.isfinite(vector).all()
            or not np.any(vector)):
        log.warning("embedding cache entry %s is damaged (shape %s): computing it again", path,
                    getattr(vector, "shape", "?"))
        return None
    return vector.astype(np.float32)
