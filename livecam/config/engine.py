"""Config sections ``engine`` (the backend running neural models) and ``models`` (their files)."""

from __future__ import annotations

from dataclasses import dataclass

from livecam.config.fields import derived, knob


@dataclass(frozen=True)
class EngineConfig:
    backend: str = knob("auto", "Engine for neural models. auto = tensorrt if installed, else "
                        "torch on a CUDA GPU, else onnxruntime; the choice and why are logged "
                        "at start and shown by `livecam doctor`. Naming a backend that is not "
                        "installed is an error, never a silent fallback. triton = the swap "
                        "models run on NVIDIA Triton Inference Server at "
                        "advanced.engine.triton_urls (capture, analysis and paste-back stay here; "
                        "see docs/triton.md); auto never picks it.",
                        choices=("auto", "tensorrt", "torch", "onnxruntime", "triton"))
    device: str = knob("auto", "Where models run: auto (a CUDA GPU when present), cuda, cpu.",
                       choices=("auto", "cuda", "cpu"))
    precision: str = knob("fp16", "Compute precision on GPUs, of the neural swap's models and "
                          "of the GPU pipeline's face detector and face mesh: fp16 is ~2x "
                          "faster than fp32 and within 1e-2 of it; CPUs always compute fp32.",
                          choices=("fp16", "fp32"))
    torch_mode: str = knob("auto", "How the torch backend runs the swap generator: compiled "
                           "(what `livecam engines build` compiled for this model, device, "
                           "torch and precision, taken from the engine cache in seconds; an "
                           "error naming that command when it is missing), cuda_graphs (our "
                           "ONNX executor, one captured CUDA graph per batch size; eager on "
                           "a CPU), eager (the executor op by op), or auto (compiled when "
                           "built, else cuda_graphs; the choice is logged). Nothing "
                           "compiles at start unless advanced.engine.build_if_missing is set. "
                           "Speeds: docs/performance.md.",
                           choices=("auto", "compiled", "cuda_graphs", "eager"))
    build_if_missing: bool = knob(False, "Build a missing compiled engine at start, the same "
                                  "for every backend: a TensorRT engine (engine.backend "
                                  "tensorrt) or the compiled torch generator (torch_mode auto "
                                  "or compiled); minutes on a GPU, progress logged, later "
                                  "starts load it. Off: a start never builds; `livecam engines "
                                  "build NAME` does it ahead, and without it TensorRT and "
                                  "torch_mode compiled stop naming that command while "
                                  "torch_mode auto runs CUDA graphs.")
    compile_max_autotune: bool = knob(False, "GPU builds benchmark kernel choices "
                                      "(Inductor max-autotune): a somewhat faster generator "
                                      "for a build about 10 times longer (on an H100, about "
                                      "100 s per batch size against 6-13 s). Ignored on the "
                                      "CPU. Measured: docs/performance.md.")
    compiled_batch_sizes: tuple[int, ...] = knob((), "Batch sizes compiled by `livecam engines "
                                                 "build` (one compiled graph each; other "
                                                 "batches run padded to the next). Empty = "
                                                 "1, 2, 4, ... up to analysis.max_faces on "
                                                 "the GPU swap, max_batch on the CPU path.")
    cache_dir: str = knob("", "Built TensorRT engines, compiled torch generators and the "
                          "timing cache; empty = the user cache dir (e.g. "
                          "~/.cache/livecam/engines).")
    tensorrt_workspace_mb: int = knob(4096, "TensorRT builder workspace, MiB. More lets the "
                                      "builder try more tactics.", range=(64, 65536))
    max_batch: int = knob(8, "Most faces sent through the swapper in one call.", range=(1, 64))
    triton_urls: tuple[str, ...] = knob(("localhost:8001",), "engine.backend triton: gRPC "
                                        "addresses (host:port) of Triton servers. Each livecam "
                                        "process starts on one of them (picked at random, so "
                                        "many streams spread out) and moves to the next when it "
                                        "fails; one load-balanced address works too.")
    triton_timeout_ms: int = knob(500, "engine.backend triton: deadline of one swap request. "
                                  "Longer rides out a slow network; shorter covers the faces "
                                  "sooner when a server hangs (a late answer counts as down).",
                                  range=(10, 60000))
    triton_in_flight: int = knob(3, "engine.backend triton: most frames of one stream whose "
                                 "swap requests are in flight at once, so the network round "
                                 "trip overlaps the next frames' analysis and requests. Higher "
                                 "keeps a slow link busy but lets that many frames queue up "
                                 "(latency); 1 = one request at a time (no overlap).",
                                 range=(1, 16))
    triton_connect_timeout_s: float = knob(10.0, "engine.backend triton: how long the start "
                                           "waits for a server and its model to be ready.",
                                           range=(0.1, 600.0))
    #: The waits between probes of a failed Triton server: advanced.capture.reconnect_*.
    triton_reconnect_initial_s: float = derived(0.5, "advanced.capture.reconnect_initial_s")
    triton_reconnect_max_s: float = derived(5.0, "advanced.capture.reconnect_max_s")


@dataclass(frozen=True)
class ModelsConfig:
    dir: str = knob("", "Directory of downloaded model files; empty = the user data dir (e.g. "
                    "~/.local/share/livecam/models).")
    manifests_dir: str = knob("", "Directory of model manifests (*.yaml); empty = the ones "
                              "livecam ships (engines/ in a source checkout).")
    fetch_timeout_s: float = knob(30.0, "Network timeout of one download request, s.",
                                  range=(1.0, 600.0))
    fetch_retries: int = knob(3, "Attempts per download source (each resumes the last).",
                              range=(1, 20))
    lock_wait_s: float = knob(300.0, "How long a command that writes or checks a model "
                              "(models import, fetch, verify; a start that re-hashes one) "
                              "waits while another livecam process writes or checks the same "
                              "model, s; then it stops with one line saying what to do.",
                              range=(1.0, 86400.0))
