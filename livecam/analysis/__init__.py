"""Face analysis: detection, face mesh landmarks, tracking, smoothing and face selection.

Entry points: :func:`livecam.analysis.photo.analyze_photo` for still photos and
:func:`build_stages` for the live pipeline (one face follower, ``follower.py``, on the
networks of ``networks.py``). Importing this package loads no model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from livecam.analysis.follower import FaceFollower
    from livecam.analysis.networks import FaceNetworks, TileSearch
    from livecam.analysis.select import FaceSelector
    from livecam.config.analysis import AnalysisConfig
    from livecam.core.stage import Stage


def build_stages(analysis: AnalysisConfig, *, fps: float = 30.0, realtime: bool = False,
                 networks: FaceNetworks | None = None,
                 search: TileSearch | None = None) -> list[Stage]:
    """The analysis stages for the pipeline (today one :class:`AnalysisStage`), not yet opened.

    ``analysis`` is the config's ``analysis`` section (never the whole config); the One Euro
    filter's time step comes from ``fps`` (pass ``config.capture.fps``).
    ``realtime`` (pass ``config.pipeline.realtime``): the CPU tile search for small faces runs
    on a worker thread, off the frame's path, and is merged a frame or two later (the GPU's,
    one batched call, stays on the follower's thread); False keeps it
    in ``process`` (files, tests: results do not depend on timing). Either way every frame
    gets its own whole-frame detection (``advanced.analysis.detect_each_frame``).
    ``networks`` / ``search`` replace the CPU networks and tile search (the GPU pipeline's
    :class:`~livecam.gpupipe.networks.client.StreamFaceNetworks`); the follower is the same.
    Reference photos for ``select: reference`` are read here; a missing dlib raises
    :class:`livecam.core.errors.DependencyError` naming the ``livecam[identity]`` extra.
    """
    from livecam.analysis.stage import AnalysisStage
    from livecam.config.analysis import AnalysisConfig

    if not isinstance(analysis, AnalysisConfig):
        raise TypeError(f"build_stages takes the config's analysis section (config.analysis), "
                        f"not {type(analysis).__name__}")
    return [AnalysisStage(build_follower(analysis, fps=fps, realtime=realtime,
                                         networks=networks, search=search))]


def build_follower(analysis: AnalysisConfig, *, fps: float = 30.0, realtime: bool = False,
                   selector: FaceSelector | None = None, networks: FaceNetworks | None = None,
                   search: TileSearch | None = None) -> FaceFollower:
    """The CPU :class:`~livecam.analysis.follower.FaceFollower` for ``analysis`` (not opened):
    BlazeFace and MediaPipe's face mesh (:class:`~livecam.analysis.networks.CpuFaceNetworks`)
    and a BlazeFace tile search. ``selector`` defaults to :func:`build_selector`'s."""
    from livecam.analysis.follower import FaceFollower
    from livecam.analysis.networks import CpuFaceNetworks, cpu_tile_search
    from livecam.track.settings import load_bytetrack_settings

    tracker = load_bytetrack_settings(analysis.tracker_file)
    if networks is None:
        networks = CpuFaceNetworks(detector_model=analysis.detector_model,
                                   min_score=tracker.low_score_threshold,
                                   refine_landmarks=analysis.refine_landmarks)
    if search is None:
        search = cpu_tile_search(min_score=tracker.low_score_threshold,
                                 tile_size_px=analysis.tile_size_px,
                                 tiles_per_call=analysis.tiles_per_detection,
                                 whole_frame=not analysis.detect_each_frame)
    return FaceFollower(analysis, networks, search, fps=fps, tracker_settings=tracker,
                        selector=selector or build_selector(analysis),
                        search_in_background=realtime)


def build_selector(analysis: AnalysisConfig) -> FaceSelector:
    """The :class:`FaceSelector` for ``analysis.select`` (the GPU stage uses it too), not yet
    opened. Reference photos for ``select: reference`` are read here."""
    from livecam.analysis.select import FaceSelector, reference_embeddings_from_photos

    references = None
    if analysis.select == "reference":
        references = reference_embeddings_from_photos(
            analysis.reference_photos, max_megapixels=analysis.reference_max_megapixels) \
            if analysis.reference_photos else None
    return FaceSelector(analysis.select, reference_embeddings=references,
                        max_distance=analysis.reference_max_distance,
                        recheck_frames=analysis.reference_recheck_frames)
