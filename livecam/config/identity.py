"""The ``identity`` config section: where the identity library lives and what photos pass."""

from __future__ import annotations

from dataclasses import dataclass

from livecam.config.fields import derived, knob


@dataclass(frozen=True)
class IdentityConfig:
    library_dir: str = knob("", "Folder of the identity library; empty = the user data dir "
                            "(platformdirs: ~/.local/share/livecam/identities on Linux).")
    min_face_px: int = knob(48, "Smallest face accepted in a source photo (cheek to cheek, px); "
                            "smaller faces are refused, even with --force: below 48 px the "
                            "swapped face looks less like the person (measured with an "
                            "independent face recognizer).", range=(16, 4096))
    warn_face_px: int = knob(160, "Faces narrower than this (px) get a warning (`identity add` "
                             "then needs --force): the swap stretches the photo's face over the "
                             "live one, so a small photo looks soft on a larger live face (a "
                             "720p webcam face is ~200 px wide).", range=(16, 4096))
    warn_turn_deg: float = knob(20.0, "A source photo whose head is turned (yaw or pitch) more "
                                "than this many degrees gets a warning (a 3/4 view leaves parts "
                                "of the face uncovered).", range=(0.0, 90.0))
    max_turn_deg: float = knob(30.0, "A source photo whose head is turned sideways (yaw) more "
                               "than this many degrees is refused, even with --force: the "
                               "far side of the face is hidden or foreshortened, and the "
                               "swap would paste it stretched (a broken nose, blotches).",
                               range=(0.0, 90.0))
    #: The largest photo read: advanced.capture.max_image_megapixels.
    max_photo_megapixels: float = derived(100.0, "advanced.capture.max_image_megapixels")
    analysis_max_side_px: int = knob(2048, "Photos are scaled down to at most this side before "
                                     "face detection.", range=(256, 16384))
    texture_face_px: int = knob(384, "Face width the stored source texture is scaled to (at "
                                "most); larger keeps detail for big live faces, costs memory.",
                                range=(64, 2048))
