"""The one place that builds and wires the objects of a run.

``build_app`` turns a config and ``--input``/``--output`` specs into an :class:`App` (see
:mod:`livecam.pipeline.runtime`): capture thread → mailbox → pipeline thread(s) (stages) →
mailbox → output thread → sink, plus a status reporter and the control sources.
``build_streams`` does the same for several input → output pairs in one process
(:class:`~livecam.pipeline.streams.StreamSet`, what ``livecam run`` and ``livecam daemon``
run, one pair or many). ``build_stages`` picks the per-frame stages (the classic or neural
swap on the CPU, with Triton requests in flight, or the GPU pipeline: ``build_swap_stages``,
``gpu_pipeline_wanted``), ``build_remote_streams`` the thin client's (``run --remote``).
Nothing else in the package picks implementations: the builders called here receive only their
config sections (and explicit values such as ``fps``), never the whole config.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from livecam.capture import make_source, parse_input
from livecam.capture.base import FrameSource
from livecam.config import Config
from livecam.control.live import LiveView
from livecam.core.commands import Command, CommandFanOut, CommandQueue, Commands, Ticket
from livecam.core.stage import AnyStage
from livecam.core.types import ImageBGR, Packet, RuntimeState
from livecam.output import FrameSink, make_sink, parse_output
from livecam.pipeline import runtime
from livecam.pipeline.passthrough import PassThrough
from livecam.pipeline.reload import StageFactory
from livecam.pipeline.running import ControlSource
from livecam.pipeline.streams import Endpoints, StreamLimitError, StreamSet

if TYPE_CHECKING:
    from livecam.gpupipe.sections import GpuSections
    from livecam.identity import IdentitySource

__all__ = ["App", "RemoteSwap", "StreamSet", "build_app", "build_remote_streams", "build_stages",
           "build_streams", "build_swap_stages", "gpu_pipeline_wanted", "gpu_sections"]

log = logging.getLogger(__name__)


class App(runtime.App):
    """The runtime (:class:`livecam.pipeline.runtime.App`) handed what it must not pick
    itself: the fail-closed cover of ``config.swap`` (:class:`~livecam.swap.cover.FaceCover`)
    and the :class:`~livecam.control.live.LiveView` that the control API reads. ``parts``
    are the runtime's keyword arguments; ``error_cover`` and ``live`` may be given to replace
    these two."""

    live: LiveView

    def __init__(self, config: Config, **parts: Any) -> None:
        from livecam.swap.cover import FaceCover

        parts.setdefault("error_cover", FaceCover.from_config(config.swap))
        parts.setdefault("live", LiveView())
        super().__init__(config, **parts)


def build_stages(config: Config, state: RuntimeState,
                 identities: IdentitySource | None = None, *,
                 shared: SharedStages | None = None, stream: int = 0) -> list[AnyStage]:
    """The per-frame stages: analysis then swap (or the all-GPU stage for neural swaps on a
    CUDA GPU, see ``advanced.gpu.pipeline``), or one no-op stage when there is no identity at all
    (none in the library, none given with ``--source``).

    ``identities`` loads identities by name (default: the library from ``config.identity``).
    Nothing is opened here; the swap stage reads the active identity from each packet's state,
    so identities switch live without rebuilding stages. ``shared`` holds what the stages of
    several streams share (the GPU pipeline); ``stream`` is this chain's stream.
    """
    if not state.identities and state.active_identity is None:
        return [PassThrough()]
    from livecam.analysis import build_stages as build_analysis_stages
    from livecam.identity import IdentityLibrary

    if identities is None:
        identities = IdentityLibrary.from_config(config.identity)
    if gpu_pipeline_wanted(config):
        from livecam.gpupipe.factory import build_gpu_stages

        # the same analysis, then the swap on the GPU (shared by the streams of the process;
        # pixel boost, the enhancer and hands in front run there too)
        return build_gpu_stages(gpu_sections(config), identities,
                                shared=shared or SharedStages(), stream=stream)
    # live runs take detection off the frame's path (a worker thread); offline stays synchronous
    analysis = build_analysis_stages(config.analysis, fps=config.capture.fps,
                                     realtime=config.pipeline.realtime)
    return [*analysis, *build_swap_stages(config, identities)]


def build_swap_stages(config: Config, identities: IdentitySource) -> list[AnyStage]:
    """The swap stages of the CPU chain for ``config.swap.mode``, constructed but not opened:
    the classic swap, or the neural swap (with ``engine.backend: triton``, up to
    ``advanced.engine.triton_in_flight`` frames in flight:
    :class:`~livecam.swap.neural_remote.RemoteSwapStage`, an asynchronous last stage), then
    the hands stage for ``swap.hands_in_front``. ``identities`` loads identities by name."""
    from livecam.swap import (
        build_classic_swap_stage,
        build_neural_swap_stage,
        hands_stages,
    )

    swap: AnyStage
    if config.swap.mode != "neural":
        swap = build_classic_swap_stage(config.swap, identities)
    else:
        swap = build_neural_swap_stage(config.swap, identities, models=config.models,
                                       engine=config.engine,
                                       max_faces=config.analysis.max_faces)
        in_flight = config.engine.triton_in_flight
        if config.engine.backend == "triton" and in_flight > 1:
            if config.swap.hands_in_front:
                # only the last stage can finish frames later, and the hands stage is after
                log.info("swap.hands_in_front: the Triton swap keeps one request in flight "
                         "(the hands stage runs after it)")
            else:
                from livecam.swap.neural_remote import RemoteSwapStage

                swap = RemoteSwapStage(swap, capacity=in_flight)
    return [swap, *hands_stages(config.swap)]


def gpu_pipeline_wanted(config: Config) -> bool:
    """Whether the stages are the GPU pipeline's (:func:`gpu_sections`): ``swap.mode: neural``
    and ``advanced.gpu.pipeline`` always, or auto with a CUDA GPU visible to torch and
    ``engine.backend`` auto or torch (the pipeline runs the generator with torch; a backend
    named in the config is not swapped for another). auto imports torch to ask."""
    if config.swap.mode != "neural" or config.gpu.pipeline == "never":
        return False
    if config.gpu.pipeline == "always":
        return True
    if config.engine.device == "cpu" or config.engine.backend not in ("auto", "torch"):
        return False
    from livecam.gpupipe.factory import torch_sees_cuda

    return torch_sees_cuda()


def gpu_sections(config: Config) -> GpuSections:
    """The sections of ``config`` that the GPU pipeline reads."""
    from livecam.gpupipe.sections import GpuSections

    return GpuSections(swap=config.swap, engine=config.engine, models=config.models,
                       gpu=config.gpu, analysis=config.analysis, pipeline=config.pipeline,
                       fps=config.capture.fps)


def build_app(config: Config, *, input_spec: str, output_spec: str,
              max_frames: int | None = None, state: RuntimeState | None = None,
              stages: Sequence[AnyStage] | None = None, controls: bool = False,
              hotkeys: bool = True, api_required: bool = False, wait_for_source: bool = False,
              config_loader: Callable[[], Config] | None = None,
              identities: IdentitySource | None = None,
              on_sent: Callable[[Packet | None, ImageBGR], None] | None = None) -> App:
    """Parse the specs and wire an :class:`App` for one stream (nothing is opened yet).

    With ``controls`` the app also gets what :func:`build_streams` gives a set (the identity
    names from the library, key bindings in the preview window, global hotkeys when
    ``hotkeys`` and ``control.hotkeys``, the control API when ``control.api``, reloads through
    ``config_loader``), attached to the app itself. ``stages`` replaces the built stages (no
    reloads then); ``identities`` replaces the library as the source of identities.
    ``on_sent(packet, image)`` is called on the output thread for each image sent (``packet``
    None for a repeat); ``livecam demo`` keeps a before/after pair with it.
    """
    if not controls:
        source = make_source(parse_input(input_spec), config.capture)
        sink = make_sink(parse_output(output_spec), config.output,
                         live=config.pipeline.realtime)
        state = state or RuntimeState()
        if stages is None:
            stages = build_stages(config, state, identities)
        return App(config, source=source, sink=sink, stages=stages, state=state,
                   max_frames=max_frames, commands=CommandQueue(),
                   wait_for_source=wait_for_source, input_label=input_spec,
                   output_label=output_spec, on_sent=on_sent)
    if on_sent is not None:
        raise ValueError("on_sent is for a run without controls")
    streams = build_streams(config, pairs=[(input_spec, output_spec)], max_frames=max_frames,
                            state=state, stages=stages, hotkeys=hotkeys,
                            api_required=api_required, wait_for_source=wait_for_source,
                            config_loader=config_loader, identities=identities)
    app = streams.apps[0]
    app.controls.extend(streams.controls)
    return app


def build_streams(config: Config, *, pairs: Sequence[tuple[str, str]],
                  max_frames: int | None = None, state: RuntimeState | None = None,
                  stages: Sequence[AnyStage] | None = None, hotkeys: bool = True,
                  api_required: bool = False, wait_for_source: bool = False,
                  config_loader: Callable[[], Config] | None = None,
                  identities: IdentitySource | None = None, hold_open: bool = False,
                  gpu_streams: int | None = None, sink_i420: bool = False) -> StreamSet[App]:
    """One :class:`App` per ``(input_spec, output_spec)`` pair, with the controls of the set
    (nothing is opened yet). Every spec is parsed before anything is built. With
    ``hold_open`` (``livecam serve``) ``pairs`` may be empty and the set runs until stopped;
    ``gpu_streams`` sizes the shared GPU pipeline for that many streams (default: the pairs).

    Each stream has its own capture, stage chain, output, metrics, runtime state and command
    queue; on a CUDA GPU the streams' GPU stages share one GPU pipeline (the faces of every
    stream in one generator call). Controls: the identity names from the library, key
    bindings in a preview window, global hotkeys (``hotkeys`` and ``control.hotkeys``; the
    daemon passes False), the control API (``control.api``; a taken address fails the start
    only with ``api_required``) serving every stream, reloads that re-read the config through
    ``config_loader``. A command from the keys, or from the API without a stream, goes to
    every stream. ``stages`` (tests) replaces the built stages of a single stream.
    ``sink_i420``: the stages' pictures arrive as I420 (the thin client), so a virtual camera
    whose backend takes I420 is opened in it (:class:`~livecam.output.sinks.VirtualCamSink`).
    Streams added while the set runs (:meth:`StreamSet.add_stream`) are built the same way,
    from the start's state and config, with their own command queue (never a preview
    window; on the GPU path only within the streams the GPU pipeline was built for).
    """
    from livecam.control.catalog import LibraryCatalog
    from livecam.control.keymap import PressLedger, WindowKeys, bindings
    from livecam.control.paths import new_snapshot_path, snapshot_dir
    from livecam.core.commands import SaveSnapshot

    if not pairs and not hold_open:
        raise ValueError("build_streams needs at least one input/output pair")
    if stages is not None and len(pairs) != 1:
        raise ValueError("stages can only be given for a single stream")
    for i, o in pairs:  # every spec checked before anything is built
        parse_input(i), parse_output(o)
    catalog = LibraryCatalog(config.identity)
    state = state or RuntimeState()
    if not state.identities:
        state = dataclasses.replace(state, identities=catalog.names())
    queues = [CommandQueue() for _ in pairs]
    # the preview window's keys reach every stream running at the press, added ones too
    commands = _SetCommandsLater(CommandFanOut(queues) if queues else CommandQueue())
    snapshots = snapshot_dir(config.control.snapshot_dir)
    keymap = bindings(config.control,
                      snapshot=lambda: SaveSnapshot(str(new_snapshot_path(snapshots))))
    presses = PressLedger()  # a press in the focused preview reaches both key sources
    shared = SharedStages(max(len(pairs), gpu_streams or 0, 1))
    several = len(pairs) > 1

    def make_app(k: int, input_spec: str, output_spec: str, *, added: bool,
                 endpoints: Endpoints | None = None) -> App:
        sink: FrameSink
        source: FrameSource
        if endpoints is not None:
            source, sink = endpoints
        else:
            in_parsed, out_parsed = parse_input(input_spec), parse_output(output_spec)
            source = make_source(in_parsed, config.capture)
        if endpoints is not None:
            pass
        elif out_parsed.kind == "window" and not added:
            from livecam.output.window import WindowSink

            sink = WindowSink(on_key=WindowKeys(keymap, commands, presses=presses).on_key)
        else:
            sink = make_sink(out_parsed, config.output, live=config.pipeline.realtime,
                             i420=sink_i420)
        factory: StageFactory | None = None
        app_stages = stages
        if app_stages is None:
            if added and k >= shared.n_streams and gpu_pipeline_wanted(config):
                raise StreamLimitError(
                    f"the GPU pipeline was built for {shared.n_streams} stream(s) at start "
                    "and cannot take more while it runs: start livecam with every stream")
            factory = _stage_factory(identities, shared, k)
            app_stages = factory(config, state)
        return App(config, source=source, sink=sink,
                   stages=app_stages, state=state, max_frames=max_frames,
                   commands=queues[k] if not added else CommandQueue(),
                   stage_factory=factory, config_loader=config_loader,
                   identity_names=catalog.names, wait_for_source=wait_for_source,
                   input_label=input_spec, output_label=output_spec,
                   stream=k if several or added else None)

    apps = [make_app(k, i, o, added=False) for k, (i, o) in enumerate(pairs)]

    def add(k: int, input_spec: str, output_spec: str, endpoints: Endpoints | None) -> App:
        if stages is not None:
            raise StreamLimitError("this run was given its stages: it cannot add streams")
        return make_app(k, input_spec, output_spec, added=True, endpoints=endpoints)

    streams = StreamSet(apps, factory=add, max_streams=config.pipeline.max_streams,
                        hold_open=hold_open)
    commands.target = streams.commands
    streams.controls.extend(_controls(config, streams, keymap, presses, catalog, snapshots,
                                      hotkeys=hotkeys, api_required=api_required))
    return streams


@dataclasses.dataclass(frozen=True)
class RemoteSwap:
    """A swap server for the thin client (``livecam run --remote URL``): its WHIP ``url`` and
    ``token``, the server identity to show first (``identity``) or a ``photo`` (bytes,
    content type) uploaded to each session as its identity, named ``photo_alias`` here."""

    url: str
    token: str
    identity: str | None = None
    photo: tuple[bytes, str] | None = None
    photo_alias: str = "source"


def build_remote_streams(config: Config, *, pairs: Sequence[tuple[str, str]],
                         remote: RemoteSwap, max_frames: int | None = None,
                         config_loader: Callable[[], Config] | None = None) -> StreamSet[App]:
    """The thin client's one stream: its only stage swaps on ``remote``
    (:class:`~livecam.remote.thin.RemoteSwapStage`), and the local hotkeys, preview keys and
    control API act on the server's session through it (this machine's library is not
    read). Raises :class:`ValueError` for more than one pair.

    The stage runs on the scheduler's own thread whatever ``advanced.pipeline.threads`` says:
    it only hands the frame to the session's thread, so a second pipeline thread would do
    nothing but pass each frame on (one more thread woken a frame, and a hop of latency)."""
    from livecam.remote.thin import RemoteSwapStage

    if len(pairs) != 1:
        raise ValueError("a remote swap takes one input/output pair")
    config = dataclasses.replace(
        config, pipeline=dataclasses.replace(config.pipeline, threads=1))
    stage = RemoteSwapStage(remote.url, remote.token, fps=config.capture.fps,
                            identity=remote.identity, photo=remote.photo,
                            photo_alias=remote.photo_alias)
    active = remote.photo_alias if remote.photo is not None else remote.identity
    state = RuntimeState(active_identity=active, identities=(active,) if active else ())
    streams = build_streams(config, pairs=pairs, stages=[stage], max_frames=max_frames,
                            state=state, config_loader=config_loader, sink_i420=True)
    stage.bind(streams.commands)
    streams.identities_elsewhere = True
    return streams


class _SetCommandsLater:
    """Commands for sources built before their :class:`StreamSet` (the preview window's
    keys): ``target`` until the set exists, then the set's commands."""

    def __init__(self, target: Commands) -> None:
        self.target = target

    def put(self, command: Command, *, timeout_s: float = 1.0) -> Ticket:
        return self.target.put(command, timeout_s=timeout_s)


class SharedStages:
    """What the stage chains of several streams share, built once per config: the GPU
    pipeline (one generator call for the faces of every stream). Pipeline threads and the
    reload thread may ask at once."""

    def __init__(self, n_streams: int = 1) -> None:
        import threading

        self.n_streams = n_streams
        self._lock = threading.Lock()
        self._made: list[tuple[object, Any]] = []

    def get(self, key: object, make: Callable[[], Any]) -> Any:
        """The object ``make()`` built for an equal ``key`` (the config sections it depends
        on: a reload that changed nothing there keeps it), else a new one."""
        with self._lock:
            for made_for, obj in self._made:
                if made_for == key:
                    return obj
            obj = make()
            self._made.append((key, obj))
            return obj


def _stage_factory(identities: IdentitySource | None, shared: SharedStages,
                   stream: int) -> StageFactory:
    def factory(cfg: Config, st: RuntimeState) -> list[AnyStage]:
        return build_stages(cfg, st, identities, shared=shared, stream=stream)

    return factory


def _controls(config: Config, streams: StreamSet, keymap: Any, presses: Any, catalog: Any,
              snapshots: Any, *, hotkeys: bool, api_required: bool) -> list[ControlSource]:
    from livecam.control.api import ControlServer
    from livecam.control.auth import token_path
    from livecam.control.hotkeys import HotkeySource

    out: list[ControlSource] = []
    if hotkeys and config.control.hotkeys:
        out.append(HotkeySource(keymap, streams.commands, presses=presses))
    if config.control.api:
        out.append(ControlServer(streams=streams, catalog=catalog,
                                 token_file=token_path(config.control.token_file),
                                 config=config.control, snapshot_dir=snapshots,
                                 required=api_required))
    return out
