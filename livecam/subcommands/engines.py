"""``livecam engines list | build NAME | clear [NAME] | serve``: built engines, the backend
choice, and serving the models on NVIDIA Triton Inference Server (``serve``, docs/triton.md).

``build`` makes a TensorRT engine when the backend resolves to tensorrt, else compiles the
swap generator for the torch backend (:func:`_build_compiled`): exactly the compiled graphs
``livecam run`` with the same config will look for. Where ``livecam run`` takes the GPU
pipeline, it then opens that pipeline once on a blank input of the camera's size
(:func:`_prepare_pipeline`), so the face networks and the swap's parts are compiled and saved
too: the first stream after it loads them instead of compiling minutes long.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from livecam.subcommands.common import accept_after_verb, add_config_options, config_from_args


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("engines", help="show the engine backend; build or clear TensorRT "
                            "engines", description="Built TensorRT engines are cached in "
                            "advanced.engine.cache_dir, keyed by model sha256, GPU, TensorRT "
                            "version, precision and profiles.")
    add_config_options(parser)
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    verbs.add_parser("list", help="backends available here and cached engines")
    build = verbs.add_parser("build", help="build a TensorRT engine, or compile the torch "
                             "generator (engine.backend torch), now (takes minutes); with the "
                             "GPU pipeline, also compile its face networks and swap parts for "
                             "any number of streams (up to advanced.pipeline.max_streams) of "
                             "--size frames")
    build.add_argument("name")
    build.add_argument("--size", metavar="WxH", help="with the GPU pipeline: the frame size to "
                       "prepare it for (default: capture.width x capture.height, what a "
                       "camera is asked for; each size compiles once)")
    clear = verbs.add_parser("clear", help="delete cached engines (of one model, or all)")
    clear.add_argument("name", nargs="?")
    _add_serve_parser(verbs)
    accept_after_verb(parser, verbs)
    parser.set_defaults(func=run)


def _add_serve_parser(verbs: Any) -> None:
    serve = verbs.add_parser(
        "serve", help="serve the swap models on NVIDIA Triton Inference Server",
        description="Write a Triton model repository from the verified models (sha256 checked), "
        "start Triton, print its addresses once it is ready, stop on SIGTERM or Ctrl-C. "
        "Clients use --set engine.backend=triton --set advanced.engine.triton_urls=[HOST:PORT]. "
        "See docs/triton.md.")
    serve.add_argument("--models", nargs="+", metavar="NAME",
                       help="models to serve (default: swap.model and its recognizer)")
    serve.add_argument("--address", default="127.0.0.1",
                       help="address to listen on (default 127.0.0.1; 0.0.0.0 for a network: "
                       "Triton has no authentication, keep it behind a firewall)")
    serve.add_argument("--grpc-port", type=int, default=8001)
    serve.add_argument("--http-port", type=int, default=8000)
    serve.add_argument("--metrics-port", type=int, default=8002)
    serve.add_argument("--instances", type=int, default=1,
                       help="model instances per GPU (or on the CPU)")
    serve.add_argument("--max-batch", type=int, default=16,
                       help="most faces one model call holds (Triton merges requests up to it)")
    serve.add_argument("--max-queue-delay-us", type=int, default=500,
                       help="how long Triton may hold a request to fill a batch")
    serve.add_argument("--gpus", help="CUDA devices to serve on, e.g. 0,1 (default: all)")
    serve.add_argument("--repository", help="where to write the model repository (default: "
                       "the user cache dir)")
    serve.add_argument("--tritonserver", default="",
                       help="a tritonserver binary (an NGC install) instead of the bundled one")
    serve.add_argument("--no-warm-up", action="store_true",
                       help="skip running every batch size once at load")
    # the config options after the verb too (`engines serve --set ...`); SUPPRESS keeps those
    # given before it (`engines --set ... serve`) when none follow
    serve.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS,
                       help="YAML config file")
    serve.add_argument("--set", dest="overrides", metavar="KEY=VALUE", action="append",
                       default=argparse.SUPPRESS, help="override one config key (repeatable)")


def _serve(config: Any, args: argparse.Namespace) -> int:
    import signal
    import threading

    from livecam.core.errors import UsageError
    from livecam.engines.triton_serve import Served, ServeOptions, serve
    from livecam.engines.triton_server import ServerAddress

    try:
        gpus = tuple(int(g) for g in args.gpus.split(",")) if args.gpus else None
    except ValueError as exc:
        raise UsageError(f"--gpus takes device numbers like 0,1, got {args.gpus!r}") from exc
    options = ServeOptions(
        models=tuple(args.models or ()),
        address=ServerAddress(args.address, args.grpc_port, args.http_port, args.metrics_port),
        instances=args.instances, max_batch=args.max_batch,
        max_queue_delay_us=args.max_queue_delay_us, gpus=gpus,
        repository=args.repository or "", tritonserver=args.tritonserver,
        warm_up=not args.no_warm_up)
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)

    def ready(served: Served) -> None:
        plan, address = served.plan, served.address
        where = f"GPUs {','.join(map(str, plan.gpus))}" if plan.gpus else "the CPU"
        print(f"serving {', '.join(served.models)} with {plan.backend} on {where} "
              f"({plan.instances} instance(s) each, batches up to {plan.max_batch}; "
              f"{served.reason})", flush=True)
        print(f"ready: grpc {address.grpc_url}  http {address.http_url}  metrics "
              f"http://{address.grpc_url.rsplit(':', 1)[0]}:{address.metrics_port}/metrics",
              flush=True)
        print(f"clients: --set engine.backend=triton --set "
              f"advanced.engine.triton_urls=[{address.grpc_url}]", flush=True)

    serve(config, options, stop, ready)
    print("stopped", flush=True)
    return 0


def _progress(phase: str, step: int, total: int) -> None:
    if step == 0:
        print(f"  {phase} ({total} steps)", file=sys.stderr, flush=True)
    elif step < 0:
        print(f"  {phase}: done", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    from livecam.engines.engine_cache import EngineCache
    from livecam.engines.registry import (
        choose_backend,
        engine_cache_dir,
        model_store,
        probe_backends,
    )

    config = config_from_args(args)
    if args.verb == "serve":
        return _serve(config, args)
    cache = EngineCache(engine_cache_dir(config.engine))
    cache.tidy()  # what builds killed mid-write left
    if args.verb == "list":
        for name, (ok, why) in probe_backends(config.engine.device).items():
            print(f"  {name:12s} {'available' if ok else 'unavailable':12s} {why}")
        choice = choose_backend(config.engine.backend, config.engine.device)
        print(f"engine.backend {config.engine.backend} -> {choice.name}: {choice.reason}")
        print(f"engine cache: {cache.root}")
        for entry in cache.entries():
            print(f"  {entry.model_name:20s} {entry.key.describe()} "
                  f"{entry.size_bytes / 2**20:.0f} MiB")
        return 0
    if args.verb == "clear":
        removed = cache.clear(args.name)
        print(f"removed {removed} engine(s) from {cache.root}")
        return 0
    if choose_backend(config.engine.backend, config.engine.device).name != "tensorrt":
        return _build_compiled(config, args.name, args.size)
    from livecam.engines.tensorrt_engine import build_engine, make_key

    store = model_store(config.models)
    manifest = store.manifest(args.name)
    digest = store.verify(args.name)
    precision = "fp32" if config.engine.precision == "fp32" else manifest.trt_precision
    key = make_key(digest, precision, manifest.trt_profiles(), manifest.trt_fp32_layers)
    if cache.load(args.name, key) is not None:
        print(f"{args.name}: an engine for this GPU and TensorRT is already cached")
        return 0
    build_engine(store.path(args.name), cache=cache, model_name=args.name, key=key,
                 workspace_mb=config.engine.tensorrt_workspace_mb, progress=_progress)
    print(f"{args.name}: engine built into {cache.root}")
    return 0


def _build_compiled(config: Any, name: str, size: str | None = None) -> int:
    """Compile ``name`` (a swapper) for the torch engine as ``livecam run`` will run it, and
    prepare the GPU pipeline where ``livecam run`` takes it (:func:`_prepare_pipeline`)."""
    from dataclasses import replace

    from livecam.app import gpu_pipeline_wanted
    from livecam.core.errors import UsageError
    from livecam.engines.registry import choose_backend, model_store

    kind = model_store(config.models).manifest(name).kind
    if kind != "swapper":
        raise UsageError(f"{name} is a {kind}: the torch engine compiles swap generators only "
                         "(the others run on the executor)")
    # the path `livecam run` takes for this config in neural mode
    neural = replace(config, swap=replace(config.swap, mode="neural", model=name))
    gpu = gpu_pipeline_wanted(neural)
    blank = _blank_input(config, size)  # a bad --size is refused before any compiling
    if not gpu and choose_backend(config.engine.backend, config.engine.device).name != "torch":
        raise UsageError(f"engine.backend resolves to onnxruntime here, which needs no build; "
                         f"to compile {name} for the torch engine, add --set "
                         "engine.backend=torch")
    if config.engine.torch_mode in ("eager", "cuda_graphs") and not gpu:
        raise UsageError(f"advanced.engine.torch_mode is {config.engine.torch_mode}: nothing to "
                         "compile (use --set advanced.engine.torch_mode=compiled)")
    from livecam.engines import compile_progress
    from livecam.gpupipe.prepared import BuildProgress

    progress = BuildProgress(_planned(neural, blank) if gpu else (), sys.stderr)
    with compile_progress.listening(progress):
        if config.engine.torch_mode in ("eager", "cuda_graphs"):
            print(f"{name}: advanced.engine.torch_mode is {config.engine.torch_mode}: the "
                  "generator is not compiled", file=sys.stderr, flush=True)
        else:
            _compile_generator(config, name, gpu)
        code = _prepare_pipeline(neural, blank) if gpu else 0
    print(progress.summary(), file=sys.stderr, flush=True)
    return code


def _planned(config: Any, blank: str) -> list[Any]:
    """The compiled shapes ``livecam engines build`` prepares for ``config`` at the
    ``blank`` input's frame size: the plan of a start (:mod:`livecam.gpupipe.shapes`: the
    same for any number of streams), with the generator's batches the build compiles."""
    from dataclasses import replace

    from livecam.app import gpu_sections
    from livecam.capture import make_source, parse_input
    from livecam.gpupipe.factory import neural_models
    from livecam.gpupipe.shapes import plan_start

    width, height = make_source(parse_input(blank), config.capture).size_px
    forced = config
    if config.engine.torch_mode not in ("eager", "cuda_graphs"):
        forced = replace(config, engine=replace(config.engine, torch_mode="compiled",
                                                build_if_missing=True))
    device = neural_models(gpu_sections(config)).gpu_device()
    return list(plan_start(forced, width_px=width, height_px=height,
                           device=device).compiled_shapes())


def _blank_input(config: Any, size: str | None) -> str:
    """The ``synthetic`` input of ``--size WxH`` (checked as ``livecam run`` checks it), or
    of the camera size the config asks for."""
    from livecam.capture import make_source, parse_input
    from livecam.core.errors import UsageError

    spec = "synthetic" if size is None else f"synthetic:{size}"
    try:
        make_source(parse_input(spec), config.capture)  # nothing opened
    except UsageError:
        raise UsageError(f"--size {size!r}: give the frame size as WxH, e.g. 1920x1080 "
                         "(16 to 8192 px each)") from None
    return spec


def _compile_generator(config: Any, name: str, gpu: bool) -> None:
    import time
    from dataclasses import replace

    from livecam.engines.registry import engine_cache_dir
    from livecam.swap.neural_models import NeuralModels

    models = NeuralModels.from_sections(config.models, config.engine, model=name,
                                        max_faces=config.analysis.max_faces)
    forced = replace(models, engine=replace(models.engine, torch_mode="compiled",
                                            build_if_missing=True))
    engine = forced.generator_engine(gpu_pipeline=gpu)
    batches = forced.generator_batch_sizes(gpu_pipeline=gpu)
    print(f"{name}: compiling for batch {', '.join(map(str, batches))} "
          f"({'GPU pipeline' if gpu else 'CPU path'}; built batches are kept)",
          file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    engine.open()
    engine.close()
    print(f"{name}: compiled generator ready in {engine_cache_dir(config.engine)} "
          f"({time.perf_counter() - t0:.0f} s)")


def _prepare_pipeline(config: Any, blank: str) -> int:
    """Open the GPU pipeline as ``livecam run`` opens it, on the ``blank`` input into a null
    output, and close it: its face networks and swap parts compile into the engine cache (or
    load from it). What is compiled is the same for any number of streams
    (:mod:`livecam.gpupipe.shapes`), so every start up to ``advanced.pipeline.max_streams`` finds it
    prepared. Records the shapes (:mod:`livecam.gpupipe.prepared`) and says what was saved
    whole and what a start traces."""
    import time

    from livecam.app import SharedStages, build_app, gpu_sections
    from livecam.gpupipe import prepared
    from livecam.gpupipe.factory import build_gpu_stages, networks_compile_dir, neural_models
    from livecam.gpupipe.shapes import plan_start
    from livecam.identity import IdentityLibrary

    folder = networks_compile_dir(config)
    t0 = time.perf_counter()
    # the stages `livecam run` builds, also with no identity in the library yet (where it
    # would pass frames through until one is added)
    stages = build_gpu_stages(gpu_sections(config), IdentityLibrary.from_config(config.identity),
                              shared=SharedStages(1))
    app = build_app(config, input_spec=blank, output_spec="null", stages=stages)
    width, height = app.source.size_px
    print(f"preparing the GPU pipeline for {width}x{height} frames, 1 to "
          f"{config.pipeline.max_streams} streams (the face networks and the swap's parts; "
          "the first time takes minutes on a GPU) ...", file=sys.stderr, flush=True)
    try:
        app.open()
    finally:
        app.stop()
    device = neural_models(gpu_sections(config)).gpu_device()
    shapes = plan_start(config, width_px=width, height_px=height,
                        device=device).compiled_shapes()
    if shapes:
        from livecam.gpupipe.factory import compile_cache_dir

        held = prepared.record(compile_cache_dir(config), prepared.environment_key(device),
                               shapes)
        print(f"{held} compiled shapes recorded as prepared for starts of 1 to "
              f"{config.pipeline.max_streams} streams at {width}x{height}")
    took = time.perf_counter() - t0
    if folder is None:
        print(f"GPU pipeline opened in {took:.0f} s; advanced.gpu.compile_networks is off: nothing "
              "compiled")
        return 0
    saved = folder / "precompiled"
    whole = sorted(saved.glob("*.bin"))
    cannot = sorted(saved.glob("*.cannot"))
    print(f"GPU pipeline prepared in {took:.0f} s: {len(whole)} compiled calls saved whole "
          f"in {saved}" + (f"; {len(cannot)} a start traces again:" if cannot else ""))
    for note in cannot:
        print(f"  {note.read_text(errors='replace').strip()[:200]}")
    return 0
