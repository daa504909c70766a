"""The ``control`` config section: hotkeys, the local control API and panel, the daemon."""

from __future__ import annotations

from dataclasses import dataclass

from livecam.config.fields import knob


@dataclass(frozen=True)
class ControlConfig:
    hotkeys: bool = knob(
        True, "Global hotkeys (pynput) where a display exists; `livecam daemon` never uses "
        "them. They fire whatever program has the focus, so the defaults hold Ctrl+Alt: typing "
        "text never fires them. A plain key (`b`, `1`) works too, with a warning at start: it "
        "fires while you type in any program. In the preview window (`--output window`) each "
        "binding works as its last key alone (`<ctrl>+<alt>+1` is `1` there), `q`/Esc quit.")
    keys_select: tuple[str, ...] = knob(
        tuple(f"<ctrl>+<alt>+{i}" for i in range(1, 10)),
        "Keys selecting identity 1, 2, ... in `livecam identity list` order (pynput syntax: "
        "`<ctrl>+<alt>+1`, `<f1>`, `a`).")
    key_next: str = knob("<ctrl>+<alt>+n", "Key for the next identity.")
    key_previous: str = knob("<ctrl>+<alt>+p", "Key for the previous identity.")
    key_bypass: str = knob("<ctrl>+<alt>+b",
                           "Key that turns bypass (show the real face) on and off.")
    key_snapshot: str = knob("", "Key that saves a snapshot of the output; empty = none.")
    api: bool = knob(True, "Serve the control API and panel (`livecam ctl`, OBS dock).")
    api_address: str = knob(
        "127.0.0.1:8765", "HOST:PORT the control API listens on. Keep 127.0.0.1 (this machine "
        "only) unless you need remote control: every request needs the token either way.")
    token_file: str = knob(
        "", "File holding the API token (created with mode 0600 on first start); empty = "
        "`api-token` in the user config dir (~/.config/livecam on Linux).")
    apply_wait_s: float = knob(
        2.0, "How long a command's API reply (and so `livecam ctl`) waits for the pipeline to "
        "take it; past this it answers `applied: false` and the command is still taken at "
        "the next frame. Raise it for scripts on a slow machine.", range=(0.05, 600.0))
    status_push_interval_s: float = knob(
        0.5, "Seconds between status pushes to the panel (server-sent events); state changes "
        "are pushed at once.", range=(0.05, 60.0))
    preview_width_px: int = knob(
        320, "Width of the panel's live preview, px (JPEG; height follows the aspect ratio). "
        "0 = no preview.", range=(0, 1920))
    preview_fps: float = knob(5.0, "Preview refreshes per second in the panel.",
                              range=(0.2, 30.0))
    snapshot_dir: str = knob(
        "", "Folder for snapshots; empty = `snapshots` in the user data dir.")
    lock_dir: str = knob(
        "", "Folder for the lock files that keep two livecams (daemon or run) off one camera, "
        "virtual camera or output file; empty = the user runtime dir ($XDG_RUNTIME_DIR/livecam "
        "on Linux).")
