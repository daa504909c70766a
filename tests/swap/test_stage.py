"""The swap stage: identity per face from the runtime state, live switching, missing identities."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import numpy as np
import pytest

from livecam.app import build_swap_stages
from livecam.config import load_config
from livecam.config.identity import IdentityConfig
from livecam.config.swap import SwapConfig
from livecam.core.errors import IdentityError
from livecam.core.types import Faces, Frame, Packet, RuntimeState, Unswappable, WithheldFaces
from livecam.identity import Identity, IdentityCollection, IdentityPhoto
from livecam.identity.photo import prepare_face
from livecam.swap.stage import ClassicSwapStage
from tests.helpers.swap_eval import RealFace


def _identity(name: str, *faces: RealFace) -> Identity:
    photos = []
    for face in faces:
        # no turn limit: the pose choice below needs t1-4 (34°), which identity add refuses
        prep = prepare_face(face.image_bgr, face.label.encode(), face.landmarks_xy,
                            face.landmarks_z, IdentityConfig(max_turn_deg=90.0),
                            label=face.label)
        photos.append(IdentityPhoto(sha256=prep.sha256, texture_bgr=prep.texture_bgr,
                                    landmarks_xy=prep.landmarks_xy,
                                    landmarks_z=prep.landmarks_z))
    return Identity(name=name, photos=tuple(photos))


@pytest.fixture(scope="module")
def library(by_label: dict[str, RealFace]) -> IdentityCollection:
    return IdentityCollection({
        "astro": _identity("astro", by_label["astronaut"]),
        "chandler": _identity("chandler", by_label["t1-3"]),
        "multi": _identity("multi", by_label["t1-4"], by_label["t1-5"]),
    })


def _packet(by_label: dict[str, RealFace], state: RuntimeState,
            labels: tuple[str, ...] = ("t1-0", "t1-2"), track_ids: tuple[int, ...] = (7, 9),
            index: int = 0) -> Packet:
    image = by_label[labels[0]].image_bgr  # all t1 faces share one photo
    xy = np.stack([by_label[k].landmarks_xy for k in labels])
    z = np.stack([by_label[k].landmarks_z for k in labels])
    boxes = np.concatenate([xy.min(axis=1), xy.max(axis=1)], axis=1).astype(np.float32)
    faces = Faces(boxes_xyxy=boxes, scores=np.ones(len(labels), np.float32),
                  landmarks_xy=xy, landmarks_z=z, track_ids=np.asarray(track_ids, np.int64))
    return Packet(frame=Frame(index, 0, image), image_bgr=image, faces=faces, state=state)


def _face_diff(packet: Packet, out: Packet, face: RealFace) -> float:
    x1, y1 = face.landmarks_xy.min(axis=0).astype(int)
    x2, y2 = face.landmarks_xy.max(axis=0).astype(int)
    a = out.image_bgr[y1:y2, x1:x2].astype(int)
    b = packet.image_bgr[y1:y2, x1:x2].astype(int)
    return float(np.abs(a - b).mean())


def test_factory_builds_the_classic_stage_lazily(library: IdentityCollection) -> None:
    stages = build_swap_stages(load_config(None), library)
    assert [type(s) for s in stages] == [ClassicSwapStage]


def test_active_identity_swaps_every_face_and_switches_live(
        by_label: dict[str, RealFace], library: IdentityCollection) -> None:
    with ClassicSwapStage(SwapConfig(), library) as stage:
        none = stage.process(_packet(by_label, RuntimeState()))
        assert none.image_bgr is none.frame.image_bgr  # nothing active: untouched
        p = _packet(by_label, RuntimeState(active_identity="astro"))
        astro = stage.process(p)
        assert len(stage.last_infos) == 2 and all(i.swapped for i in stage.last_infos)
        assert _face_diff(p, astro, by_label["t1-0"]) > 5
        assert _face_diff(p, astro, by_label["t1-2"]) > 5
        assert (p.image_bgr == by_label["t1-0"].image_bgr).all()  # input not written
        # switching is just a new state on the next packet
        chandler = stage.process(_packet(by_label, RuntimeState(active_identity="chandler")))
        assert _face_diff(astro, chandler, by_label["t1-2"]) > 3
        bypass = stage.process(_packet(by_label, RuntimeState(active_identity="astro",
                                                              bypass=True)))
        assert bypass.image_bgr is bypass.frame.image_bgr


def test_per_track_identities_and_assign_by_appearance(
        by_label: dict[str, RealFace], library: IdentityCollection) -> None:
    config = SwapConfig(assign=("chandler",))
    with ClassicSwapStage(config, library) as stage:
        state = RuntimeState(active_identity="astro")
        stage.process(_packet(by_label, state))
        # first track seen (7) gets assign[0]; the second falls back to the active identity
        shas = [i.source_sha256 for i in stage.last_infos]
        chandler_sha = library.load("chandler").photos[0].sha256
        astro_sha = library.load("astro").photos[0].sha256
        assert shas == [chandler_sha, astro_sha]
        # a runtime per-track choice wins over the config
        state = dataclasses.replace(state, track_identities=((7, "astro"), (9, "chandler")))
        stage.process(_packet(by_label, state))
        assert [i.source_sha256 for i in stage.last_infos] == [astro_sha, chandler_sha]


def test_multi_photo_identity_uses_the_nearest_pose(
        by_label: dict[str, RealFace], library: IdentityCollection) -> None:
    photos = library.load("multi").photos  # t1-4 turned ~34 deg, t1-5 ~15 deg
    with ClassicSwapStage(SwapConfig(), library) as stage:
        stage.process(_packet(by_label, RuntimeState(active_identity="multi"),
                              labels=("t1-1", "t1-2"), track_ids=(1, 2)))
        # t1-1 is turned ~29 deg: nearest is t1-4; t1-2 is near frontal: nearest is t1-5
        assert [i.source_sha256 for i in stage.last_infos] == [photos[0].sha256,
                                                                photos[1].sha256]


class _Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class _Flaky:
    """An identity source that fails until ``fixed`` (the file reappears)."""

    def __init__(self, good: Identity) -> None:
        self.good = good
        self.fixed = False
        self.calls = 0

    def load(self, name: str) -> Identity:
        self.calls += 1
        if not self.fixed:
            raise IdentityError(f"identity {name!r}: cached files are missing")
        return self.good


def _covered(packet: Packet, out: Packet, by_label: dict[str, RealFace],
             labels: tuple[str, ...] = ("t1-0", "t1-2")) -> bool:
    """Every face of ``labels`` changed (swapped or covered), the picture far from them not."""
    faces_changed = all(_face_diff(packet, out, by_label[k]) > 5 for k in labels)
    far = np.abs(out.image_bgr[-60:, -60:].astype(int) - packet.image_bgr[-60:, -60:]).max()
    return faces_changed and far == 0


def test_missing_identity_covers_the_faces_and_says_why_rate_limited(
        by_label: dict[str, RealFace], library: IdentityCollection,
        caplog: pytest.LogCaptureFixture) -> None:
    """Fail closed: before, a missing identity sent the faces out as they are (a leak)."""
    clock = _Clock()
    flaky = _Flaky(library.load("astro"))
    state = RuntimeState(active_identity="ghost")
    with ClassicSwapStage(SwapConfig(missing_log_interval_s=5.0), flaky, clock=clock) as stage:
        caplog.set_level(logging.WARNING, logger="livecam.swap.stage")
        for _ in range(10):
            packet = _packet(by_label, state)
            out = stage.process(packet)
            assert _covered(packet, out, by_label)  # streams on, faces covered
            assert not any(i.swapped for i in stage.last_infos)
            assert stage.last_withheld.reasons.tolist() == [Unswappable.IDENTITY_MISSING] * 2
            clock.t += 0.1
        lines = [r.getMessage() for r in caplog.records]
        assert len(lines) == 1 and "'ghost'" in lines[0] and "covered" in lines[0]
        assert flaky.calls == 1  # not retried on every frame
        clock.t += 5.0
        flaky.fixed = True
        # tried again on the identity thread: this frame is not held up for it
        packet = _packet(by_label, state)
        out = stage.process(packet)
        if stage.last_withheld.reasons.tolist() == [Unswappable.IDENTITY_LOADING] * 2:
            assert _covered(packet, out, by_label)
        else:  # the worker was quicker than this frame
            assert [i.swapped for i in stage.last_infos] == [True, True]
        assert stage._prepared.wait("ghost", 60)
        out = stage.process(_packet(by_label, state))
        assert [i.swapped for i in stage.last_infos] == [True, True]  # recovered, no restart
    with ClassicSwapStage(SwapConfig(unswappable="real"), _Flaky(library.load("astro")),
                          clock=clock) as stage:
        out = stage.process(_packet(by_label, state))
        assert out.image_bgr is out.frame.image_bgr  # `real`: the old behaviour, if asked


def test_identity_still_loading_is_covered_not_waited_for(
        by_label: dict[str, RealFace], library: IdentityCollection) -> None:
    """A switch to an identity the preload thread is still preparing neither stalls the
    frames nor shows the real face: its faces are covered until it is ready."""
    import threading

    release = threading.Event()

    class _Slow:
        def load(self, name: str) -> Identity:
            if name == "chandler":
                assert release.wait(30)
            return library.load(name)

    state = RuntimeState(active_identity="astro", identities=("astro", "chandler"))
    with ClassicSwapStage(SwapConfig(), _Slow()) as stage:
        stage.process(_packet(by_label, state))  # astro loads; chandler starts preloading
        switched = dataclasses.replace(state, active_identity="chandler")
        packet = _packet(by_label, switched)
        out = stage.process(packet)  # returns although chandler's load is blocked
        assert _covered(packet, out, by_label)
        assert stage.last_withheld.reasons.tolist() == [Unswappable.IDENTITY_LOADING] * 2
        release.set()
        assert stage._prepared.wait("chandler", 30)
        stage.process(_packet(by_label, switched))
        assert [i.swapped for i in stage.last_infos] == [True, True]


def test_the_active_identity_is_prepared_before_the_rest_of_the_library(
        by_label: dict[str, RealFace], library: IdentityCollection) -> None:
    """Identities were prepared ahead in library order, so an active identity tenth in the
    list had its faces covered until the nine before it were ready."""
    order: list[str] = []

    class _Recording:
        def load(self, name: str) -> Identity:
            order.append(name)
            return library.load("astro")

    names = tuple(f"n{k}" for k in range(12))
    state = RuntimeState(active_identity="n9", identities=names, bypass=True)
    with ClassicSwapStage(SwapConfig(), _Recording()) as stage:
        stage.process(_packet(by_label, state))  # no face swapped: all prepared ahead
        assert stage._prepared.wait("n9", 60)
    assert order[0] == "n9"


def test_a_switch_never_holds_the_previous_identitys_swap_while_the_new_one_loads(
        by_label: dict[str, RealFace], library: IdentityCollection) -> None:
    """From the first frame under the new identity, the old one's face is gone: while the new
    identity is still being prepared its faces get the cover, not the last good swap of the
    identity they had before (``hold`` stands in for a face that cannot be swapped, not for
    the identity the user switched away from). The preload is held on an event, so the
    switch lands while it loads, whatever the host's speed."""
    import threading

    from livecam.swap.cover import FaceCover

    release = threading.Event()

    class _Held:
        def load(self, name: str) -> Identity:
            if name == "chandler":
                assert release.wait(30)
            return library.load(name)

    state = RuntimeState(active_identity="astro", identities=("astro", "chandler"))
    switched = dataclasses.replace(state, active_identity="chandler")
    try:
        with ClassicSwapStage(SwapConfig(unswappable="hold"), _Held()) as stage:
            astro = stage.process(_packet(by_label, state, index=10))
            assert [i.swapped for i in stage.last_infos] == [True, True]
            packet = _packet(by_label, switched, index=11)  # within hold_frames of astro's
            out = stage.process(packet)
            assert stage.last_withheld.reasons.tolist() == [Unswappable.IDENTITY_LOADING] * 2
            covered = FaceCover(mode="cover").cover(packet.image_bgr, stage.last_withheld, 11)
            for label in ("t1-0", "t1-2"):
                assert _face_diff(astro, out, by_label[label]) > 5  # astro's face is gone
            assert (out.image_bgr == covered).all()  # the cover, exactly
            release.set()
            assert stage._prepared.wait("chandler", 30)
            chandler = stage.process(_packet(by_label, switched, index=12))
            assert [i.swapped for i in stage.last_infos] == [True, True]
            # a face lost for a frame gets the cover, neither identity's held swap (a held
            # swap would be painted on whatever hides the face: issue 39 item 7)
            full = _packet(by_label, switched, index=13)
            lost = full.with_fields(faces=full.faces[[1]], withheld=WithheldFaces.from_faces(
                full.faces[[0]], Unswappable.LOST))
            held = stage.process(lost)
            cover = FaceCover(mode="cover").cover(lost.image_bgr, stage.last_withheld, 13)
            x1, y1 = by_label["t1-0"].landmarks_xy.min(axis=0).astype(int)
            x2, y2 = by_label["t1-0"].landmarks_xy.max(axis=0).astype(int)
            assert (held.image_bgr[y1:y2, x1:x2] == cover[y1:y2, x1:x2]).all()
            assert _face_diff(chandler, held, by_label["t1-0"]) > 5
            assert _face_diff(astro, held, by_label["t1-0"]) > 5
    finally:
        release.set()


def test_withheld_faces_are_covered_and_turned_faces_fade_into_the_cover(
        by_label: dict[str, RealFace], library: IdentityCollection) -> None:
    """Faces analysis withheld (here: one not yet confirmed) are covered; a face turned past
    ``fade_end_deg`` is covered, never shown as it is (before: the fade went to the real
    face)."""
    state = RuntimeState(active_identity="astro")
    full = _packet(by_label, state)
    pending = WithheldFaces.from_faces(full.faces[[1]], Unswappable.PENDING)
    packet = full.with_fields(faces=full.faces[[0]], withheld=pending)
    with ClassicSwapStage(SwapConfig(), library) as stage:
        out = stage.process(packet)
        assert _covered(packet, out, by_label)
        assert [i.swapped for i in stage.last_infos] == [True]
        # every face counts as turned too far: nothing can be swapped, all is covered
        turned = SwapConfig(fade_start_deg=0.0, fade_end_deg=0.0)
    with ClassicSwapStage(turned, library) as stage:
        out = stage.process(full)
        assert [i.fade for i in stage.last_infos] == [0.0, 0.0]
        assert _covered(full, out, by_label)
        assert stage.last_withheld.reasons.tolist() == [Unswappable.TURNED] * 2
    real = dataclasses.replace(turned, unswappable="real")
    with ClassicSwapStage(real, library) as stage:
        out = stage.process(full)
        assert (out.image_bgr == full.image_bgr).all()  # `real`: the old fade to the real face


def test_identity_whose_files_vanish_keeps_streaming(
        by_label: dict[str, RealFace], tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    """The real library on disk: the identity's cached mesh is deleted while livecam runs."""
    import cv2

    from livecam.identity import IdentityLibrary

    photo = tmp_path / "astro.png"
    big = cv2.resize(by_label["astronaut"].image_bgr, None, fx=2, fy=2,
                     interpolation=cv2.INTER_CUBIC)
    cv2.imwrite(str(photo), big)
    library = IdentityLibrary(tmp_path / "lib")
    library.add("astro", [photo])
    sha = library.get("astro").photos[0]["sha256"]
    (tmp_path / "lib" / "photos" / sha / "mesh.npz").unlink()
    caplog.set_level(logging.WARNING, logger="livecam.swap.stage")
    with ClassicSwapStage(SwapConfig(), library) as stage:
        packet = _packet(by_label, RuntimeState(active_identity="astro"))
        out = stage.process(packet)
    assert _covered(packet, out, by_label)  # streams on with the faces covered
    assert any("'astro' is unavailable" in r.getMessage() and "re-add" in r.getMessage()
               for r in caplog.records)


def test_the_swap_builders_take_the_swap_section_not_the_whole_config() -> None:
    """Issue 43: app.py picks classic or neural and hands the builder its sections; a whole
    config (which it used to read the choice from) is refused."""
    from livecam.swap import build_classic_swap_stage, build_neural_swap_stage, hands_stages

    config = load_config(None)
    identities = IdentityCollection({})
    refused = r"config's swap section \(config.swap\), not Config"
    with pytest.raises(TypeError, match=refused):
        build_classic_swap_stage(config, identities)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=refused):
        build_neural_swap_stage(config, identities, models=config.models,  # type: ignore[arg-type]
                                engine=config.engine, max_faces=1)
    with pytest.raises(TypeError, match=refused):
        hands_stages(config)  # type: ignore[arg-type]
    assert isinstance(build_classic_swap_stage(config.swap, identities), ClassicSwapStage)
