"""Face analysis: detection, face mesh landmarks, tracking, smoothing and face selection.

Entry points: :func:`livecam.analysis.photo.analyze_photo` for still photos and
:func:`build_stages` for the live pipeline. Importing this package loads no model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from livecam.analysis.select import FaceSelector
    from livecam.config.analysis import AnalysisConfig
    from livecam.core.stage import Stage


def build_stages(config: Any, *, fps: float | None = None,
                 realtime: bool = False) -> list[Stage]:
    """The analysis stages for the pipeline (today one :class:`AnalysisStage`), not yet opened.

    ``config`` is the whole :class:`livecam.config.Config` or its ``analysis`` section; the
    One Euro filter's time step comes from ``fps`` (default: ``config.capture.fps``, else 30).
    ``realtime`` (pass ``config.pipeline.realtime``): detections run on a worker thread, off
    the frame's path, and are merged a frame or two later; False keeps them in ``process``
    (files, tests: results do not depend on timing).
    Reference photos for ``select: reference`` are read here; a missing dlib raises
    :class:`livecam.core.errors.DependencyError` naming the ``livecam[identity]`` extra.
    """
    from livecam.analysis.stage import AnalysisStage
    from livecam.track.settings import load_bytetrack_settings

    analysis: AnalysisConfig = getattr(config, "analysis", config)
    if fps is None:
        capture = getattr(config, "capture", None)
        fps = float(capture.fps) if capture is not None else 30.0
    return [AnalysisStage(analysis, fps=fps,
                          tracker_settings=load_bytetrack_settings(analysis.tracker_file),
                          selector=build_selector(analysis), detect_in_background=realtime)]


def build_selector(analysis: AnalysisConfig) -> FaceSelector:
    """The :class:`FaceSelector` for ``analysis.select`` (the GPU stage uses it too), not yet
    opened. Reference photos for ``select: reference`` are read here."""
    from livecam.analysis.select import FaceSelector, reference_embeddings_from_photos

    references = None
    if analysis.select == "reference":
        references = reference_embeddings_from_photos(analysis.reference_photos) \
            if analysis.reference_photos else None
    return FaceSelector(analysis.select, reference_embeddings=references,
                        max_distance=analysis.reference_max_distance,
                        recheck_frames=analysis.reference_recheck_frames)
