"""Building the GPU stages for ``livecam run`` (see :mod:`.stage`, :mod:`.hub`) from the
config's sections (:class:`~livecam.gpupipe.sections.GpuSections`); :mod:`livecam.app` picks
this path."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from livecam.engines.lazy import LazyTorchEngine
from livecam.gpupipe.sections import GpuSections, GpuSettings, require_sections

if TYPE_CHECKING:
    from livecam.core.stage import AnyStage
    from livecam.engines.torch_engine import TorchEngine
    from livecam.gpupipe.hub import GpuSwapHub
    from livecam.identity.model import IdentitySource
    from livecam.swap.neural_models import NeuralModels

log = logging.getLogger(__name__)


def torch_sees_cuda() -> bool:
    """Whether torch is installed and sees a CUDA GPU (imports torch to ask)."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


def neural_models(sections: GpuSections) -> NeuralModels:
    """The swapper and recognizer of ``sections`` (``swap.model``)."""
    from livecam.swap.neural_models import NeuralModels

    return NeuralModels.from_sections(sections.models, sections.engine, model=sections.swap.model,
                                      max_faces=sections.analysis.max_faces)


def build_gpu_stages(sections: GpuSections, identities: IdentitySource, *, shared: Any = None,
                     stream: int = 0) -> list[AnyStage]:
    """The stages of one stream for ``swap.mode: neural`` on the GPU (cheap; nothing opened),
    from the config's ``sections`` (:class:`~livecam.gpupipe.sections.GpuSections`; a whole
    config raises :class:`TypeError`: :mod:`livecam.app` picks this path and hands it them):
    the analysis stage (the face follower of ``analysis``) and a
    :class:`~livecam.gpupipe.stage.GpuSwapStage` on the GPU swap that ``shared``
    (:class:`livecam.app.SharedStages`) holds for every stream of the process (None: a GPU
    swap of its own, for one stream).

    The generator (``swap.model``) runs with the torch engine that
    :meth:`NeuralModels.gpu_generator` makes (``advanced.engine.device``,
    ``advanced.engine.torch_mode``: the packages ``livecam engines build`` compiled, else CUDA
    graphs; fp32 on a CPU); ArcFace (the model's recognizer) runs on the configured engine backend,
    once per identity photo, cached on disk as the CPU neural stage does. Both files are verified
    when the first stream opens: a missing or corrupt one raises :class:`ModelError` naming
    ``livecam models fetch``. ``identities`` loads identities by name (the library, or an
    ``IdentityCollection``).

    ``advanced.swap.pixel_boost`` and ``swap.enhancer`` run inside the GPU swap (see
    :func:`build_hub`); ``swap.hands_in_front`` finds the hands on the host when a frame is
    submitted (MediaPipe, the CPU path's :class:`~livecam.swap.occlusion.HandsInFront`) and the
    paste-back keeps them in front; ``advanced.swap.keep_eyes``/``swap.keep_mouth`` keep the
    streamer's own eyes and mouth (their mesh loops travel with each face; the paste-back draws them
    on the device).
    """
    from livecam.analysis import build_stages as build_analysis_stages
    from livecam.gpupipe.stage import GpuSwapStage
    from livecam.swap.cover import FaceCover
    from livecam.swap.occlusion import HandsInFront

    config = require_sections(sections, "build_gpu_stages")
    key = ("gpu-swap", config.swap, config.engine, config.models, config.gpu,
           config.analysis.max_faces, config.pipeline.max_streams, identities)
    if shared is None:
        hub = build_hub(config, identities, n_streams=1)
    else:
        hub = shared.get(key, lambda: build_hub(config, identities,
                                                n_streams=shared.n_streams))
    device = neural_models(config).gpu_device()
    networks, search = follower_networks(config, device, shared=shared, stream=stream)
    analysis = build_analysis_stages(config.analysis, fps=config.fps,
                                     realtime=config.pipeline.realtime,
                                     networks=networks, search=search)
    hands = HandsInFront.from_config(config.swap) if config.swap.hands_in_front else None
    return [*analysis, GpuSwapStage(hub, stream=stream, assign=config.swap.assign,
                                    device_frame=getattr(networks, "device_frame", None),
                                    cover=FaceCover.from_config(config.swap), hands=hands,
                                    keep_eyes=config.swap.keep_eyes == "always",
                                    keep_mouth=config.swap.keep_mouth,
                                    mouth_size=config.swap.mouth_size)]


def colour_blur_px(config: GpuSettings, template: str) -> float:
    """The GPU swap's colour blur, px on its aligned crop (``advanced.swap.pixel_boost`` px):
    ``advanced.swap.colour_blur`` face widths with ``advanced.swap.colour: lowfreq`` (the one
    transfer it has), else 0: the generator's colours, as insightface."""
    if config.swap.colour != "lowfreq":
        return 0.0
    from livecam.swap.align import face_width_on_crop_px

    return config.swap.colour_blur * face_width_on_crop_px(template, config.swap.pixel_boost)


def networks_compile_dir(config: GpuSettings) -> Path | None:
    """Where the compiled face networks' code is cached (the engine cache's Inductor folder,
    shared with the compiled generator), or None with ``advanced.gpu.compile_networks`` off."""
    return _inductor_dir(config) if config.gpu.compile_networks else None


def swap_compile_dir(config: GpuSettings, device: str) -> Path | None:
    """Where the swap program's compiled parts are cached (the same folder), or None with
    ``advanced.gpu.compile_paste`` off or off CUDA (the CPU runs of the GPU swap are checks: they
    would spend minutes compiling for no gain)."""
    if not (config.gpu.compile_paste and device.startswith("cuda")):
        return None
    return _inductor_dir(config)


def compile_cache_dir(config: GpuSettings) -> Path:
    """The engine cache's Inductor folder: the compiled code of the GPU pipeline and the
    record of what ``livecam engines build`` prepared (:mod:`livecam.gpupipe.prepared`)."""
    return _inductor_dir(config)


def _inductor_dir(config: GpuSettings) -> Path:
    from livecam.engines.registry import engine_cache_dir
    from livecam.engines.torch_compiled import INDUCTOR_DIR

    return engine_cache_dir(config.engine) / INDUCTOR_DIR


def follower_networks(config: GpuSettings, device: str, *, shared: Any = None,
                      stream: int = 0) -> tuple[Any, Any]:
    """The face follower's networks and tile search for the GPU pipeline on ``device``:
    BlazeFace and the face mesh as torch ports on a CUDA device, keeping the uploaded frames
    for the swap, and every tile searched in one batch on the same uploaded frame
    (:class:`GpuTileSearch`); or (None, None): the CPU's MediaPipe networks, faster there.

    Stream ``stream`` gets its place in :class:`SharedFaceNetworks` (one for every stream of
    ``shared``, :class:`livecam.app.SharedStages`; None: one of its own), which batches the
    detector and mesh calls of every stream (the streams' networks at batch 1 were about half
    of a 1080p frame's GPU time). One stream runs the same networks, at the same compiled
    shapes, in batches of one (:mod:`livecam.gpupipe.shapes`)."""
    if not device.startswith("cuda"):
        return None, None
    return torch_follower_networks(config, device, shared=shared, stream=stream)


def torch_follower_networks(config: GpuSettings, device: str, *, shared: Any = None,
                            stream: int = 0) -> tuple[Any, Any]:
    """What :func:`follower_networks` gives on CUDA, on any ``device`` (the tests' seam: a
    CPU runs the same torch ports, slowly)."""
    from livecam.gpupipe.networks.shared import SharedFaceNetworks
    from livecam.gpupipe.networks.tiles import GpuTileSearch
    from livecam.gpupipe.shapes import call_sizes
    from livecam.track.settings import load_bytetrack_settings

    analysis = config.analysis
    floor = load_bytetrack_settings(analysis.tracker_file).low_score_threshold
    sizes = call_sizes(config)

    def make(n: int) -> SharedFaceNetworks:
        return SharedFaceNetworks(
            device=device, n_streams=n, detector_model=analysis.detector_model,
            min_score=floor, precision=config.engine.precision,
            max_rois=max(1, analysis.max_faces), use_graphs=config.gpu.cuda_graphs,
            compile_dir=networks_compile_dir(config), stack_frames=sizes.stack_frames,
            frames_per_call=sizes.frames_per_call,
            refine_landmarks=analysis.refine_landmarks,
            dynamic_batches=config.gpu.compile_dynamic_batches)

    hub = make(1) if shared is None else shared.get(
        ("gpu-follower", device, analysis, config.gpu, config.pipeline.max_streams),
        lambda: make(shared.n_streams))
    networks = hub.slot_for(stream, detect_ahead=analysis.detect_each_frame,
                            keep_frames=config.gpu.slots + 2,
                            pinned_capture=config.gpu.pinned_capture)
    search = GpuTileSearch(networks, tile_size_px=analysis.tile_size_px,
                           whole_frame=not analysis.detect_each_frame)
    return networks, search


def build_hub(sections: GpuSections, identities: IdentitySource, *,
              n_streams: int) -> GpuSwapHub:
    """The GPU swap for ``n_streams`` streams of ``config`` (not opened): the generator
    (``swap.model``, at ``advanced.swap.pixel_boost``), the face enhancer (``swap.enhancer``, a
    torch engine on the same device, inside the pipeline's CUDA graphs) and hand masks
    (``swap.hands_in_front``). Raises :class:`ConfigError` for an enhancer name that is no
    enhancer manifest."""
    from livecam.gpupipe.hub import GpuSwapHub
    from livecam.gpupipe.shapes import call_sizes
    from livecam.swap.inswapper import read_emap

    config = require_sections(sections, "build_hub")
    models = neural_models(config)
    # the pipeline's own CUDA graphs hold the generator (graphs do not nest); that is the
    # fastest mode on the H200 (438 against 418 fps)
    generator = LazyTorchEngine("torch", lambda: models.gpu_generator(
        pipeline_graphs=config.gpu.cuda_graphs), label="GPU pipeline generator")
    enhancer, enhancer_options = _enhancer(config, models)
    manifest = models.swapper

    def require() -> None:
        models.require()
        if enhancer is not None:
            models.store.require(config.swap.enhancer)

    log.info("GPU swap: %s (torch, %s, advanced.engine.torch_mode %s) with %s, %d stream(s)%s%s%s",
             manifest.name, models.gpu_device(), config.engine.torch_mode,
             models.recognizer.name, n_streams,
             f", pixel boost {config.swap.pixel_boost}" if config.swap.pixel_boost != (
                 manifest.crop_size_px or 128) else "",
             f", enhancer {config.swap.enhancer} (blend {config.swap.enhancer_blend:.2f})"
             if enhancer is not None else "",
             ", hands in front" if config.swap.hands_in_front else "")
    return GpuSwapHub(
        generator, emap=lambda: read_emap(models.swapper_path),
        source_embedding=models.embeddings(identities.load), n_streams=n_streams,
        max_faces=config.analysis.max_faces, slots=config.gpu.slots,
        use_graphs=config.gpu.cuda_graphs, window_px=config.gpu.paste_window_px,
        window_large_px=config.gpu.paste_window_large_px,
        colour_blur_px=colour_blur_px(config, manifest.template or "arcface_128"),
        model_options={"crop_px": manifest.crop_size_px or 128,
                       "template": manifest.template or "arcface_128",
                       "mean": manifest.mean, "std": manifest.std,
                       "pixel_boost_px": config.swap.pixel_boost,
                       "dynamic_faces": config.gpu.compile_dynamic_batches},
        require_models=require,
        missing_log_interval_s=config.swap.missing_log_interval_s,
        enhancer=enhancer, enhancer_options=enhancer_options,
        hands=config.swap.hands_in_front,
        compile_dir=swap_compile_dir(config, models.gpu_device()),
        # sized by the config, not by n_streams: the same shapes for any number of streams
        frames_per_call=call_sizes(config).frames_per_call,
        faces_per_call=call_sizes(config).faces_per_call,
        fit_check=start_check(config, n_streams=n_streams, device=models.gpu_device(),
                              model_path=models.swapper_path))


def start_check(config: GpuSettings, *, n_streams: int, device: str,
                model_path: Path) -> Callable[[int, int], None]:
    """``check(width, height)``, run before any stage prepares that frame size: the GPU
    memory plan of ``n_streams`` streams of ``config`` (:mod:`livecam.gpupipe.memory`),
    refused with one line when it exceeds ``advanced.gpu.memory_limit_gb`` (or the card's memory
    less ``advanced.gpu.memory_headroom_gb``); then what this start will compile that ``livecam
    engines build`` did not prepare, and for about how long (:mod:`livecam.gpupipe.prepared`)."""
    from livecam.engines import compile_progress
    from livecam.gpupipe import memory, prepared
    from livecam.gpupipe.shapes import plan_start

    gpu = config.gpu

    def check(width_px: int, height_px: int) -> None:
        plan = plan_start(config, width_px=width_px, height_px=height_px, device=device)
        need = memory.estimate(plan, n_streams=n_streams,
                               keep_frames=gpu.slots + 2 if device.startswith("cuda") else 0,
                               hands=config.swap.hands_in_front,
                               model_bytes=memory.model_file_bytes(model_path))
        source = ("advanced.gpu.memory_limit_gb" if gpu.memory_limit_gb > 0
                  else "the card less advanced.gpu.memory_headroom_gb "
                       f"({gpu.memory_headroom_gb:g})")
        memory.check_fits(need, memory.limit_bytes(gpu.memory_limit_gb,
                                                   gpu.memory_headroom_gb, device),
                          n_streams=n_streams, plan=plan, limit_source=source)
        shapes = plan.compiled_shapes()
        if shapes:
            folder, key = _inductor_dir(config), prepared.environment_key(device)
            todo = prepared.missing(folder, key, shapes)
            compile_progress.keep_recording((folder, key), prepared.StartRecorder(folder, key))
            prepared.say_what_compiles(todo, n_streams=n_streams,
                                       size=f"{width_px}x{height_px}", model=config.swap.model)

    return check


def _enhancer(config: GpuSettings, models: NeuralModels) -> tuple[LazyTorchEngine | None, Any]:
    """The GPU pipeline's face enhancer for ``swap.enhancer`` (None for ``none`` or a blend
    of 0): a torch engine of its manifest on the generator's device, in the generator's
    precision (fp32 on a CPU), without CUDA graphs of its own (the pipeline captures it inside
    its graphs; graphs do not nest, and one engine graph shared by the slots' concurrent ticks
    would race on its buffers)."""
    from livecam.engines.registry import create_torch_engine
    from livecam.gpupipe.build import EnhancerOptions
    from livecam.swap.enhance import enhancer_manifest

    name = config.swap.enhancer
    if name == "none" or config.swap.enhancer_blend <= 0.0:
        return None, None
    store = models.store
    manifest = enhancer_manifest(store, name)
    device = models.gpu_device()
    precision = config.engine.precision if device.startswith("cuda") else "fp32"

    def make() -> TorchEngine:
        return create_torch_engine(manifest, store.path(name), store.verify(name),
                                   config.engine, device=device, precision=precision,
                                   cuda_graphs=False)

    options = EnhancerOptions(size_px=manifest.crop_size_px or 512,
                              template=manifest.template or "ffhq_512",
                              blend=config.swap.enhancer_blend,
                              fidelity=config.swap.enhancer_fidelity)
    return LazyTorchEngine("torch", make, label=f"GPU pipeline enhancer {name}"), options
