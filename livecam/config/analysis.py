"""The ``analysis`` config section: face detection, landmarks, tracking, smoothing, selection."""

from __future__ import annotations

from dataclasses import dataclass

from livecam.config.fields import derived, knob


@dataclass(frozen=True)
class AnalysisConfig:
    detector_model: str = knob(
        "full",
        "MediaPipe BlazeFace model: `short` (faces within ~2 m, fastest), `full` (faces up to "
        "~5 m), `auto` (both on the whole frame, merged: slowest, finds the most).",
        choices=("short", "full", "auto"),
    )
    max_faces: int = knob(
        6, "Most faces followed (face mesh each frame) and swapped. Faces beyond it are covered "
        "(see advanced.swap.unswappable); the faces followed stay the same while they are in view, "
        "a new one takes a free place. Each face followed costs a face mesh and a swap per "
        "frame (figures: docs/performance.md).", range=(1, 64))
    tile_size_px: int = knob(
        384, "Square tile size for finding small faces: frames longer than this are also "
        "searched in overlapping tiles of this size (the full-range model sees ~1/8 of its "
        "input as its smallest face, so 384 finds faces down to ~50 px). 0 = no tiling.",
        range=(0, 4096))
    tiles_per_detection: int = knob(
        2, "Tiles searched per detection run, taken in turn, so a wide frame is covered every "
        "few runs at a bounded cost. 0 = all tiles every run (slow; photos use all).",
        range=(0, 256))
    detect_each_frame: bool = knob(
        True, "Run the whole-frame face detector on every frame, so a face is found, and "
        "swapped or covered, on the frame it appears in; faces already followed are followed "
        "from their own landmarks either way. false = only every detect_every_n_frames frames "
        "(cheaper, but a face appearing between two runs is shown as it is until found: not "
        "fail-closed).")
    edge_search: bool = knob(
        True, "Also run the whole-frame detector on strips along the frame's edges, mirrored "
        "outward, and cover every face whose box crosses the frame's edge (weak detections "
        "too) until it is followed and swapped: a face cut by the edge, or entering, is "
        "covered from its first frame. Costs eight more detector runs per 720p frame (small "
        "pictures); false = faces cut by the edge show until the detector finds them whole "
        "(not fail-closed).")
    cover_people: bool = knob(
        True, "On a frame where no face is swapped or covered, look for people (MediaPipe's "
        "selfie segmentation, about 3 ms on a 2-core CPU; nothing while a face is in view) "
        "and cover each one: a face only ever seen as a sliver (a stream that starts with the "
        "face mostly behind something) is covered, not shown. The price: with no face found, "
        "a person turned away is covered whole. false = such a sliver shows (not "
        "fail-closed).")
    detect_every_n_frames: int = knob(
        5, "Search the frame's tiles (faces too small for the whole-frame detector) every N "
        "frames, tiles_per_detection tiles at a time (live: on a worker thread); with "
        "detect_each_frame off, the whole frame too. The first frame is searched whole. (The "
        "GPU pipeline's search runs every N - 1 frames and is used one frame later, so it "
        "finds a small face by the same frame.)", range=(1, 300))
    lost_cover_frames: int = knob(
        30, "Frames a followed face that is no longer seen (hidden, turned away, detector "
        "miss) is still covered where the tracker predicts it, so it is not shown when it "
        "reappears before it is found again. Faces the detector cannot follow (beyond "
        "max_faces, no mesh) are covered as long as the tracker keeps them. Longer = safer, "
        "a blurred patch lingers longer where someone left.", range=(0, 100000))
    refine_landmarks: bool = knob(
        False, "478 landmarks with irises (face mesh with attention) instead of 468; slower.")
    smoothing: bool = knob(True, "Smooth landmarks over time per track (One Euro filter).")
    smooth_min_cutoff_hz: float = knob(
        0.3, "One Euro cutoff for a still face, Hz. Lower = steadier still face, more lag "
        "when motion starts.", range=(0.001, 100.0))
    smooth_beta: float = knob(
        0.1, "One Euro speed coefficient: cutoff rise in Hz per px/s of face speed. Higher = "
        "less lag in fast motion, more jitter in it.", range=(0.0, 100.0))
    smooth_derivative_cutoff_hz: float = knob(
        1.0, "Cutoff of the speed estimate that drives the One Euro filter, Hz.",
        range=(0.001, 100.0))
    select: str = knob(
        "all", "Which faces go on to the swap: `all`, `largest`, `center` (nearest the "
        "frame centre), `reference` (only faces matching `reference_photos`; needs the "
        "livecam[identity] extra). The detector's own score floor is the tracker's "
        "low_score_threshold (trackers/bytetrack.yaml).",
        choices=("all", "largest", "center", "reference"))
    reference_photos: tuple[str, ...] = knob(
        (), "Photos of the person to keep when `select: reference` (one face each).")
    reference_max_distance: float = knob(
        0.6, "Largest dlib embedding distance still counted as the reference person (same "
        "person ~0.2-0.5, different people 0.6-0.9).", range=(0.0, 2.0))
    #: The largest reference photo read: advanced.capture.max_image_megapixels.
    reference_max_megapixels: float = derived(100.0, "advanced.capture.max_image_megapixels")
    reference_recheck_frames: int = knob(
        30, "A track that did not match the reference is checked again after this many "
        "frames (each check costs ~60 ms per face on a laptop CPU).", range=(1, 100000))
    tracker_file: str = knob(
        "", "ByteTrack settings YAML (see trackers/bytetrack.yaml for every key); empty = "
        "the built-in defaults, which equal trackers/bytetrack.yaml.")
