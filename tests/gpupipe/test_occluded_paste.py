"""The GPU swap paints nothing on what hides part of a face (issue 39's ghosts, GPU path).

On the H100's leak table (docs/performance.md, "The leak table on the GPU path") the GPU path
painted 32 ghost frames on ``half_hidden``: while a board covers the first 7-27 % of the face,
the face is still swapped (its detection stays strong), and the paste-back laid insightface's
whole aligned square over the board. The classic swap pastes inside the face's outline and
showed none. Here the same frames go through the product's stages in this process: the CPU
face follower (offline, every frame) and the GPU swap stage on torch's CPU device with the
stand-in generator (random weights: it repaints every pixel of its square, which is what makes
a ghost visible to the judge).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from livecam.analysis import build_stages
from livecam.config import load_config
from livecam.core.types import Frame, Packet, RuntimeState
from livecam.gpupipe.stage import GpuSwapStage
from tests.gpupipe.test_stage import embedding_table, make_hub
from tests.helpers.leak_clips import leak_clips
from tests.helpers.leak_judge import judge

#: The board comes over the face (input frames 15-20) and goes (58-64): the ghosts' frames.
BOARD_MOVING = (*range(15, 21), *range(58, 65))


def test_a_board_over_part_of_a_face_gets_no_swap_painted_on_it(
        inswapper_dyn_path: Path) -> None:
    clip = leak_clips()["half_hidden"]
    config = load_config(None, ["advanced.pipeline.realtime=false"])
    state = RuntimeState(active_identity="alice", identities=("alice",))
    hub = make_hub(inswapper_dyn_path, embedding_table(("alice",), []),
                   window_px=384)
    analysis = build_stages(config.analysis, fps=config.capture.fps)[0]
    inputs, truths, outputs = [], [], []
    analysis.open()
    try:
        with GpuSwapStage(hub, keep_eyes=True, keep_mouth=True) as swap:
            for t, (image, truth) in enumerate(clip.frames()):
                if t > BOARD_MOVING[-1]:
                    break
                inputs.append(image)
                truths.append(truth)
                packet = analysis.process(Packet.from_frame(Frame(t, 0, image), state))
                if t not in BOARD_MOVING:
                    continue
                swap.submit(packet)
                done = swap.collect(60.0)
                assert done is not None, f"frame {t} did not come back"
                outputs.append(done.image_bgr)
    finally:
        analysis.close()
    report = judge(inputs, truths, outputs)
    assert report.faces_judged == len(BOARD_MOVING)
    assert report.leaks_counted == 0
    # the face is swapped on these frames (the square painted the board on 13 of them)
    assert report.covered < len(BOARD_MOVING) // 2, report.covered
    assert len(report.ghosts_judged) >= len(BOARD_MOVING) // 2  # its hidden part is judged
    assert report.ghost_frames == 0, [(g.input_frame, g.levels) for g in report.ghosts]
    assert np.isfinite([g.levels for g in report.ghosts_judged]).all()
