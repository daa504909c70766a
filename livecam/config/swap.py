"""The ``swap`` config section: which swap runs and how the classic swap looks."""

from __future__ import annotations

from dataclasses import dataclass

from livecam.config.fields import knob


@dataclass(frozen=True)
class SwapConfig:
    mode: str = knob("classic", "Swap method: classic (mesh warp of the source photo; needs no "
                     "download, runs on any CPU) or neural (inswapper-family models, fetched "
                     "once).", choices=("classic", "neural"))
    model: str = knob("inswapper_128", "Neural swap model, used when mode is neural: the name "
                      "of any swapper manifest in advanced.models.manifests_dir (engines/ by "
                      "default; `livecam models list`), checked at start.")
    blend: str = knob("feather", "How the swapped face is laid in: feather (soft alpha edge; "
                      "fast, keeps the source's colours) or seamless (Poisson; tens of ms per "
                      "face, washes the face towards the target's colours).",
                      choices=("feather", "seamless"))
    colour: str = knob("lab", "Colour transfer: lab (the live face's low-frequency colour added "
                       "to the source's in Lab, matched closely near the mask's edge so there "
                       "is no seam or band), lowfreq (per-pixel gain from blurred "
                       "target/source; amplifies the source's contrast on a brighter live "
                       "face), meanstd (one Lab mean/std match; a half-shaded face stays "
                       "half-shaded), none. The neural swap on the GPU pipeline has lowfreq "
                       "only: with any other choice its faces keep the generator's colours "
                       "(as insightface).", choices=("lab", "lowfreq", "meanstd", "none"))
    colour_blur: float = knob(1.0, "Blur size of the colour transfer inside the face, as a "
                              "fraction of the face width, for both swaps (lab also matches "
                              "closely within "
                              "0.15 face widths of the mask's edge, whatever this is). Smaller "
                              "follows local light more closely but lets more of the target's "
                              "own look through (the identity judge: 1.0 scores best, "
                              "docs/classic-swap.md).", range=(0.02, 1.0))
    relight: float = knob(0.0, "Relighting (colour lab): the live face's shading (a lamp to "
                          "one side, a shadowed cheek) replaces the source photo's own, "
                          "following it at this blur size, as a fraction of the face width "
                          "(0.3-0.5); 0: off, the lightness follows colour_blur. Off by "
                          "default: it matches the light better but the identity judge then "
                          "finds the swap nearer the live person (docs/classic-swap.md).",
                          range=(0.0, 1.0))
    colour_smoothing: float = knob(0.75, "Colour lab: how much of a tracked face's colour "
                                   "match carries over from the frames before (a short "
                                   "moving average per face, restarted for another "
                                   "identity): sensor noise and the mesh's jitter then do "
                                   "not make the swapped face's colour flicker. 0 matches "
                                   "every frame afresh; higher is steadier but follows a "
                                   "change of light later (0.75: 90 % of a change after 8 "
                                   "frames).",
                                   range=(0.0, 0.9))
    feather: float = knob(0.03, "Width of the soft mask edge, as a fraction of the face width. "
                          "Wider hides the seam better but shows more of the target around the "
                          "edge.", range=(0.0, 0.5))
    forehead: str = knob("auto", "Swap the forehead: swap, cut (the mask stops just above the "
                         "eyebrows: for a live face with a fringe), or auto (cut when the "
                         "source photo's forehead is covered by hair, which would otherwise "
                         "show as a band across the live forehead).",
                         choices=("auto", "swap", "cut"))
    keep_mouth: bool = knob(True, "Show the streamer's own mouth interior (teeth, tongue, the dark "
                            "of an open mouth) inside the swapped lips, so the mouth opens and "
                            "closes with the streamer's; the source photo's mouth cannot open.")
    mouth_size: float = knob(1.0, "Size of the kept mouth region relative to the inner lips. "
                             "Larger keeps more of the streamer's lips.", range=(0.5, 2.0))
    mouth_open_threshold: float = knob(0.0, "Inner-lip gap / mouth width above which the "
                                       "streamer's mouth interior is kept (0: always, so the "
                                       "opening follows the streamer's at every size without a "
                                       "jump).", range=(0.0, 1.0))
    keep_eyes: str = knob("always", "Show the streamer's own eyes inside the swapped lids (gaze, "
                          "blinks): always, never (the source photo's eyes, warped), or auto "
                          "(only when the source photo's eyes are closed).",
                          choices=("never", "auto", "always"))
    eye_closed_threshold: float = knob(0.12, "Lid gap / eye width below which an eye counts "
                                       "as closed.", range=(0.0, 1.0))
    shape_transfer: float = knob(0.5, "How far the live face's eyes, brows, nose and mouth "
                                 "move toward the source person's proportions: 0 = the "
                                 "streamer's geometry with the source's skin, 1 = the source's "
                                 "proportions (0.5: halfway, the best identity score in "
                                 "docs/classic-swap.md). The outline stays the streamer's and "
                                 "expressions still pass through.", range=(0.0, 1.0))
    mirror_fill: bool = knob(False, "Fill the hidden side of a turned source photo from its "
                             "mirror image (at identity load), instead of stretching the few "
                             "pixels of the far cheek. Off by default: it scored lower with "
                             "the identity judge (docs/classic-swap.md).")
    match_sharpness: bool = knob(True, "Sharpen the swapped face until its fine detail matches "
                                 "the live face's (resampling and a smaller source photo "
                                 "leave it softer than the picture around it).")
    remove_source_accessories: bool = knob(True, "Paint the source photo's dark glasses and "
                                           "facial hair out of its texture with its own skin "
                                           "(at identity load), so they are not pasted onto "
                                           "every streamer (docs/classic-swap.md).")
    keep_live_glasses: bool = knob(True, "Keep the streamer's own dark glasses in front of the "
                                   "swapped face (found each frame in the band across the "
                                   "eyes), as hands are; their dark pixels and a beard's are "
                                   "also left out of the colour statistics.")
    source_skin_only: bool = knob(False, "Paste only the source photo's skin and features: "
                                  "where hair, background or the far side of a turned head "
                                  "lie inside its face, the live face's own skin shows "
                                  "instead, blended in (no dark streaks or smudges from the "
                                  "photo). Off by default: on small faces it shows so much of "
                                  "the live face that the identity judge drops from 0.93 to "
                                  "0.50 of pairs (docs/classic-swap.md).")
    fade_start_deg: float = knob(30.0, "Head turn away from the source photo's pose (yaw and "
                                 "pitch, degrees) at which the swap starts fading into what "
                                 "`unswappable` shows (the real face only with `real`).",
                                 range=(0.0, 90.0))
    fade_end_deg: float = knob(55.0, "Head turn at which the swap has faded out completely "
                               "(the source texture cannot cover the face any more).",
                               range=(0.0, 180.0))
    unswappable: str = knob(
        "hold", "What the viewer sees where a face is in the frame but cannot be swapped in it "
        "(just found and not yet confirmed, lost for a few frames, turned past fade_end_deg, "
        "beyond analysis.max_faces, identity loading or missing, a stage error): hold = its "
        "last good swap moved onto where it is now, for up to hold_frames, then the cover (after "
        "a switch of identity, the cover at once: never the identity switched away from); "
        "cover = the cover at once; real = the real face (an explicit choice, like bypass: "
        "livecam's behaviour before fail-closed).", choices=("hold", "cover", "real"))
    cover: str = knob("blur", "How the cover looks: blur (the face region smoothed down to "
                      "cover_cells across the face) or pixelate (the same cells as blocks).",
                      choices=("blur", "pixelate"))
    cover_cells: int = knob(
        6, "Detail left in the cover: cells across the face. Fewer hide more; more look "
        "softer but start to show who it is (docs/fail-closed.md measures it).", range=(2, 16))
    hold_frames: int = knob(8, "Frames a face's last good swap may stand in for it (moved with "
                            "it) before the cover does; 0 = never hold.", range=(0, 300))
    grid_step_px: int = knob(2, "Smallest spacing of the grid the warp map is computed on, px "
                             "(faces wider than 160 px get a coarser grid, ~80 cells across); "
                             "1 = every pixel (slowest); the map is exact at grid points and "
                             "linear between them.", range=(1, 8))
    assign: tuple[str, ...] = knob((), "Identities for people in order of appearance (first person "
                             "seen gets the first name, ...); people beyond the list get the "
                             "active identity. Empty = everyone gets the active identity.")
    missing_log_interval_s: float = knob(5.0, "A missing or unusable identity is logged at "
                                         "most once per this many seconds (its faces are "
                                         "covered meanwhile, see unswappable).",
                                         range=(0.0, 3600.0))
    enhancer: str = knob("none", "Face enhancer run on each swapped face in the neural swap: none, "
                         "or an enhancer manifest (gfpgan_1.4, gpen_bfr_256, gpen_bfr_512, "
                         "codeformer; fetched once with `livecam models fetch NAME`). Sharper "
                         "skin, eyes and teeth; costs one more network run per face "
                         "(docs/enhance.md).")
    enhancer_blend: float = knob(0.8, "How much of the enhanced face replaces the swapped one "
                                 "(0 = none, 1 = the enhancer's output only). Lower keeps more "
                                 "of the swap's own look and the live skin texture.",
                                 range=(0.0, 1.0))
    enhancer_fidelity: float = knob(0.5, "CodeFormer only: 0 = strongest restoration (may "
                                    "drift from the face it is given), 1 = closest to it.",
                                    range=(0.0, 1.0))
    pixel_boost: int = knob(128, "Neural swap resolution, px: 128 (the model's own), 256 or 512 "
                            "(the face aligned at that size and swapped as 4 or 16 interleaved "
                            "128 px tiles: more detail in large faces, 4x or 16x the generator "
                            "work).", choices=(128, 256, 512))
    hands_in_front: bool = knob(False, "Keep hands that pass in front of a face in front of "
                                "the swapped (or covered) face: MediaPipe's hand landmarks on "
                                "every frame, the hand's own pixels kept where it overlaps a "
                                "face. Costs CPU time per frame (docs/enhance.md).")
    hand_search_every_n_frames: int = knob(2, "While no hand is followed, look for one on every "
                                           "Nth swapped frame only (hands_in_front): higher "
                                           "costs less CPU, but a hand that comes up is painted "
                                           "over for up to N-1 frames first.", range=(1, 30))
    hand_max_hands: int = knob(2, "Most hands followed at once (hands_in_front).", range=(1, 4))
    hand_min_score: float = knob(0.6, "Palm detection and hand presence score a hand needs to be "
                                 "kept in front (hands_in_front). Lower finds more hands, but a "
                                 "false hand over a face shows that part of the real face.",
                                 range=(0.0, 1.0))
