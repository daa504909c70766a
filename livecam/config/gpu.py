"""Config section ``gpu``: the all-GPU frame pipeline (``livecam.gpupipe``).

Read by :meth:`livecam.gpupipe.build.ProgramOptions.from_config` and the scheduler that
the app builds when the pipeline runs on a CUDA GPU; the generator's own engine settings stay
in ``engine``.
"""

from __future__ import annotations

from dataclasses import dataclass

from livecam.config.fields import knob


@dataclass(frozen=True)
class GpuConfig:
    """All-GPU pipeline: slots, CUDA graphs, analysis on the GPU, paste-back window."""

    pipeline: str = knob("auto", "When `livecam run` uses the all-GPU pipeline (face detection, "
                         "face mesh, neural swap and paste-back as one torch program, ByteTrack "
                         "on the host) instead of the CPU analysis and swap stages: auto = when "
                         "swap.mode is neural and torch sees a CUDA GPU; always = whenever "
                         "swap.mode is neural, on the CPU too (slow: for CI and checks); never "
                         "= the CPU stages.", choices=("auto", "always", "never"))
    slots: int = knob(3, "Frames in flight on the GPU (each slot has its own CUDA stream and "
                      "buffers). 3 lets one frame's mesh overlap the previous frame's "
                      "generator and paste-back while a third uploads (438 fps against 376 "
                      "with 2 on the H200); more adds memory, not speed.", range=(2, 8))
    max_faces: int = knob(4, "Faces per frame the GPU buffers and CUDA graphs are sized for; "
                          "more faces than this are left unswapped.", range=(1, 64))
    cuda_graphs: bool = knob(True, "Capture the per-frame work as CUDA graphs (one per slot, "
                             "face-count bucket and detection flag), so a frame costs a few "
                             "graph launches instead of ~1000 kernel launches from Python.")
    precision: str = knob("fp16", "Precision of the face detector and face mesh on the GPU.",
                          choices=("fp16", "fp32"))
    detector_range: str = knob("full", "BlazeFace model on the GPU: full (~5 m, 192 px input; "
                               "as the CPU analysis) or short (faces within ~2 m, 128 px: "
                               "cheaper, but a 210 px face in a 720p frame scored 0.57, under "
                               "the tracker's 0.7 to start a track).",
                               choices=("short", "full"))
    paste_window_px: int = knob(640, "Side of the frame square around each face that the "
                                "paste-back works in, px. It must exceed the face's crop "
                                "footprint (about 1.8x the face width, more when the head is "
                                "rolled); larger costs more per face.", range=(64, 4096))
    colour_blur_px: float = knob(0.0, "Low-frequency colour match of the swapped face to the "
                                 "live one on the 128 px crop: blur size, px; 0 = off (as "
                                 "insightface).", range=(0.0, 128.0))
