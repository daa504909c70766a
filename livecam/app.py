"""The one place that builds and wires the objects of a run.

``build_app`` turns a config and ``--input``/``--output`` specs into an :class:`App` (see
:mod:`livecam.pipeline.runtime`): capture thread → mailbox → pipeline thread(s) (stages) →
mailbox → output thread → sink, plus a status reporter and the control sources.
``build_stages`` picks the per-frame stages. Nothing else in the package picks implementations.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from livecam.capture import make_source, parse_input
from livecam.config import Config
from livecam.core.commands import CommandQueue
from livecam.core.stage import Stage
from livecam.core.types import RuntimeState
from livecam.output import FrameSink, make_sink, parse_output
from livecam.pipeline.passthrough import PassThrough
from livecam.pipeline.runtime import App, StageFactory

if TYPE_CHECKING:
    from livecam.identity import IdentitySource

__all__ = ["App", "build_app", "build_stages"]


def build_stages(config: Config, state: RuntimeState,
                 identities: IdentitySource | None = None) -> list[Stage]:
    """The per-frame stages: analysis then swap (or the all-GPU stage for neural swaps on a
    CUDA GPU, see ``gpu.pipeline``), or one no-op stage when there is no identity at all (none
    in the library, none given with ``--source``).

    ``identities`` loads identities by name (default: the library from ``config.identity``).
    Nothing is opened here; the swap stage reads the active identity from each packet's state,
    so identities switch live without rebuilding stages.
    """
    if not state.identities and state.active_identity is None:
        return [PassThrough()]
    from livecam.analysis import build_stages as build_analysis_stages
    from livecam.gpupipe.factory import build_gpu_stages, gpu_pipeline_wanted
    from livecam.identity import IdentityLibrary
    from livecam.swap import build_swap_stages

    if identities is None:
        identities = IdentityLibrary.from_config(config.identity)
    if gpu_pipeline_wanted(config):
        from livecam.swap import hands_stages, warn_unused_neural_options

        warn_unused_neural_options(config, "the GPU pipeline")
        # one stage does detection, mesh, tracking hand-off, swap and paste on the GPU
        return [*build_gpu_stages(config, identities), *hands_stages(config)]
    # live runs take detection off the frame's path (a worker thread); offline stays synchronous
    analysis = build_analysis_stages(config, realtime=config.pipeline.realtime)
    return [*analysis, *build_swap_stages(config, identities)]


def build_app(config: Config, *, input_spec: str, output_spec: str,
              max_frames: int | None = None, state: RuntimeState | None = None,
              stages: Sequence[Stage] | None = None, controls: bool = False,
              hotkeys: bool = True, api_required: bool = False, wait_for_source: bool = False,
              config_loader: Callable[[], Config] | None = None,
              identities: IdentitySource | None = None) -> App:
    """Parse the specs and wire an :class:`App` (nothing is opened yet).

    With ``controls`` (``livecam run``, ``livecam daemon``) the app also gets: the identity
    names from the library, key bindings in the preview window, global hotkeys (when
    ``hotkeys`` and ``control.hotkeys``; the daemon passes ``hotkeys=False``), the control API
    (``control.api``; a taken address fails the start only with ``api_required``), and
    reloads that re-read the config through ``config_loader``. ``identities`` replaces the
    library as the source of identities (``--source PHOTO`` puts a one-off identity in front).
    """
    out_spec = parse_output(output_spec)
    source = make_source(parse_input(input_spec), config.capture)
    state = state or RuntimeState()
    commands = CommandQueue()
    sink: FrameSink
    if not controls:
        sink = make_sink(out_spec, config.output)
        if stages is None:
            stages = build_stages(config, state, identities)
        return App(config, source=source, sink=sink, stages=stages, state=state,
                   max_frames=max_frames, commands=commands, wait_for_source=wait_for_source,
                   input_label=input_spec, output_label=output_spec)

    from livecam.control.api import ControlServer
    from livecam.control.auth import token_path
    from livecam.control.catalog import LibraryCatalog
    from livecam.control.hotkeys import HotkeySource
    from livecam.control.keymap import PressLedger, WindowKeys, bindings
    from livecam.control.paths import new_snapshot_path, snapshot_dir
    from livecam.core.commands import SaveSnapshot

    catalog = LibraryCatalog(config.identity)
    if not state.identities:
        state = dataclasses.replace(state, identities=catalog.names())
    snapshots = snapshot_dir(config.control.snapshot_dir)
    keymap = bindings(config.control,
                      snapshot=lambda: SaveSnapshot(str(new_snapshot_path(snapshots))))
    presses = PressLedger()  # a press in the focused preview reaches both key sources
    if out_spec.kind == "window":
        from livecam.output.window import WindowSink

        sink = WindowSink(on_key=WindowKeys(keymap, commands, presses=presses).on_key)
    else:
        sink = make_sink(out_spec, config.output)
    factory: StageFactory | None = None
    if stages is None:
        def factory(cfg: Config, st: RuntimeState) -> list[Stage]:
            return build_stages(cfg, st, identities)

        stages = factory(config, state)
    app = App(config, source=source, sink=sink, stages=stages, state=state,
              max_frames=max_frames, commands=commands, stage_factory=factory,
              config_loader=config_loader, identity_names=catalog.names,
              wait_for_source=wait_for_source, input_label=input_spec,
              output_label=output_spec)
    if hotkeys and config.control.hotkeys:
        app.controls.append(HotkeySource(keymap, commands, presses=presses))
    if config.control.api:
        app.controls.append(ControlServer(target=app, catalog=catalog,
                                          token_file=token_path(config.control.token_file),
                                          config=config.control, snapshot_dir=snapshots,
                                          required=api_required))
    return app
