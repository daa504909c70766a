"""Config section ``gpu``: the GPU swap (``livecam.gpupipe``).

Read by :func:`livecam.gpupipe.factory.build_hub` when the neural swap runs on a CUDA GPU; the
generator's own engine settings stay in ``engine``, and which faces are followed and swapped
(``max_faces``, the detector, smoothing, selection) in ``analysis``, for both paths.
"""

from __future__ import annotations

from dataclasses import dataclass

from livecam.config.fields import knob


@dataclass(frozen=True)
class GpuConfig:
    """GPU swap: when it runs, frames in flight, CUDA graphs, paste-back window."""

    pipeline: str = knob("auto", "When `livecam run` swaps on the GPU (alignment, the "
                         "generator and paste-back as one torch program for the faces of every "
                         "stream, several frames in flight; face detection and the face mesh "
                         "on the GPU too) instead of the CPU swap stage: auto = when swap.mode "
                         "is neural and torch sees a CUDA GPU; always = whenever swap.mode is "
                         "neural, on the CPU too (slow: for CI and checks); never = the CPU "
                         "stages.", choices=("auto", "always", "never"))
    slots: int = knob(3, "Frames in flight on the GPU, per stream and in all (each slot has "
                      "its own CUDA stream and buffers), so the GPU computes one while others "
                      "move to or from it. More adds memory and, when "
                      "the GPU cannot keep up, latency.", range=(2, 8))
    cuda_graphs: bool = knob(True, "Capture the per-frame GPU work as CUDA graphs (one per "
                             "slot and face-count bucket, before the output starts), so a "
                             "frame costs a few graph launches instead of hundreds of kernel "
                             "launches from Python.")
    compile_networks: bool = knob(True, "Compile the face detector, face mesh and tile "
                                  "search on the GPU with torch.compile: fused kernels, "
                                  "several times faster. The first start "
                                  "on a machine (and after a torch update) compiles them for "
                                  "minutes, each network and shape logged; later starts take "
                                  "the code from the engine cache (advanced.engine.cache_dir). "
                                  "Where torch cannot compile (no Triton) they run uncompiled, "
                                  "with a warning. false = uncompiled, no compiling.")
    compile_paste: bool = knob(True, "Compile the swap's work around the generator on the "
                               "GPU (alignment and crops; the output's conversion, colour "
                               "match and paste-back) with torch.compile: fused kernels "
                               "instead of a few hundred small ones a frame. "
                               "Compiled at the first start for each "
                               "face count and paste window, logged, cached with the face "
                               "networks' code. false = as written, no compiling.")
    compile_dynamic_batches: bool = knob(True, "Compile the swap's alignment (with "
                                         "compile_paste, per paste window), the face mesh "
                                         "and the face detector (with compile_networks) "
                                         "once for a batch of one (face, region, frame) and "
                                         "once for any batch from two up (a dynamic size), "
                                         "instead of once per batch bucket: fewer compiles "
                                         "for `livecam engines build` and a first start "
                                         "(the paste-back still compiles per bucket). "
                                         "false = one compile per bucket.")
    paste_window_px: int = knob(640, "Side of the frame square around each face that the "
                                "paste-back works in, px. It must exceed the face's crop "
                                "footprint (about 1.8x the face width, more when the head is "
                                "rolled); larger costs more per face.", range=(64, 4096))
    paste_window_large_px: int = knob(1088, "A second, larger paste window for faces "
                                      "whose crop footprint exceeds paste_window_px (a face "
                                      "close to the camera: about 400 px wide and more at "
                                      "1080p), px, cut to the frame's smaller side. A frame "
                                      "uses it only when one of its faces needs it, and costs "
                                      "more then; its CUDA graphs are captured at start too "
                                      "(a longer start). 0, or not larger than "
                                      "paste_window_px: none, such faces are covered.",
                                      range=(0, 4096))
    pinned_capture: bool = knob(True, "The capture thread copies each frame into "
                                "page-locked memory as it reads it, so the face networks "
                                "upload it to the GPU at once, without a copy of their own on "
                                "the thread every frame waits for (+9 % frames/s for one "
                                "stream offline). The frames a stream holds "
                                "at once (in flight, queued, being sent) are page-locked, and "
                                "that memory is kept for reuse until livecam exits. false = "
                                "the networks copy each frame into their own page-locked "
                                "buffer.")
    max_frames_per_call: int = knob(16, "The most frames one GPU call takes: a swap tick (one "
                                    "frame per stream) and a batch of the streams' face "
                                    "detector. Calls run at 1, 2, 4, ... frames up to this, "
                                    "padded up, so what is compiled and captured does not "
                                    "grow with the number of streams (more streams than this "
                                    "take several calls). Larger batches more streams per "
                                    "call and costs more memory per slot.", range=(1, 256))
    max_faces_per_call: int = knob(16, "The most faces one swap tick carries (at least "
                                   "analysis.max_faces): the generator and paste-back run at "
                                   "1, 2, 4, ... faces up to this, padded up. More faces "
                                   "wait for the next tick. Larger batches more faces per "
                                   "generator call and costs memory in every captured graph.",
                                   range=(1, 1024))
    memory_limit_gb: float = knob(0.0, "GPU memory livecam may plan for, GB; 0 = what the "
                                  "card has less memory_headroom_gb. At start livecam "
                                  "estimates what the configured streams need (frame "
                                  "buffers, slots, captured graphs, models) and refuses a "
                                  "start that would not fit, before anything is compiled.",
                                  range=(0.0, 4096.0))
    memory_headroom_gb: float = knob(4.0, "With memory_limit_gb 0: memory left to the "
                                     "driver, other processes and the allocator's "
                                     "fragmentation, GB.", range=(0.0, 1024.0))
