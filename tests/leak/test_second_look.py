"""The second look's verdict on a place is kept while the place holds still
(livecam.analysis.second_look.Verdicts): a steady false hit at the bottom edge costs its
pictures once, and a face moving in is looked at again."""

from __future__ import annotations

import numpy as np

from livecam.analysis.edges import StripSearch
from livecam.analysis.networks import CpuFaceNetworks
from livecam.analysis.second_look import SECOND_LOOK_PX, VERDICT_FRAMES, Verdicts
from livecam.core.boxes import box_iou
from livecam.core.types import Faces
from tests.helpers.leak_clips import LeakClip

BOX = [560.0, 560.0, 680.0, 700.0]
#: the glasses' hit in the bottom strip with its last row repeated (frame px)
GLASSES = [1076.0, 636.0, 1156.0, 716.0]


def _frame(seed: int) -> np.ndarray:
    """A 720p table top with sensor noise (sigma 2): the same place, a new frame."""
    rng = np.random.default_rng(seed)
    image = np.full((720, 1280, 3), (70, 100, 140), np.float32)
    return np.clip(image + rng.normal(0, 2, image.shape), 0, 255).astype(np.uint8)


def test_a_verdict_holds_while_the_place_does_and_not_longer() -> None:
    verdicts = Verdicts()
    looks: list[int] = []

    def judge() -> bool:
        looks.append(1)
        return False

    for t in range(VERDICT_FRAMES):
        verdicts.next_frame()
        assert verdicts.seen_again(_frame(t), BOX, judge) is False
    assert len(looks) == 1  # a still place: looked at once, new noise on every frame
    verdicts.next_frame()
    verdicts.seen_again(_frame(99), BOX, judge)
    assert len(looks) == 2  # the verdict is VERDICT_FRAMES frames old: looked at again


def test_a_face_moving_into_the_place_is_looked_at_again() -> None:
    verdicts = Verdicts()
    verdicts.next_frame()
    assert verdicts.seen_again(_frame(0), BOX, lambda: False) is False
    moved_in = _frame(1)
    moved_in[600:720, 590:650] = (60, 110, 200)  # a forehead rising from the bottom edge
    verdicts.next_frame()
    assert verdicts.seen_again(moved_in, BOX, lambda: True) is True
    # another place is another verdict
    verdicts.next_frame()
    assert verdicts.seen_again(_frame(2), [100.0, 560.0, 220.0, 700.0], lambda: True) is True


class _Counting:
    """The CPU networks, counting the second look's pictures (SECOND_LOOK_PX squares)."""

    def __init__(self) -> None:
        self.networks = CpuFaceNetworks()
        self.second_looks = 0

    def detect(self, image_bgr: np.ndarray) -> Faces:
        if image_bgr.shape[:2] == (SECOND_LOOK_PX, SECOND_LOOK_PX):
            self.second_looks += 1
        return self.networks.detect(image_bgr)


def test_the_glasses_on_the_table_cost_one_second_look(clips: dict[str, LeakClip]) -> None:
    """t1's glasses at the bottom of ``still_6`` are a hit in the repeated-rows picture on
    every frame. Before, the second look ran its pictures on every frame (4 of 5 pictures a
    frame: 24 over these 6 frames); now once, and the hit is still left out."""
    counting = _Counting()
    counting.networks.open()
    try:
        search = StripSearch(counting)
        for t, (image, _) in enumerate(clips["still_6"].frames()):
            if t >= 6:
                break
            found = search.find(image)
            hits = [[float(v) for v in b + np.r_[off, off]] for f, off in found
                    for b in f.boxes_xyxy]
            assert not [b for b in hits if box_iou(b, GLASSES) >= 0.3], t
        assert 0 < counting.second_looks <= 5
    finally:
        counting.networks.close()


def _one(box_xyxy: np.ndarray, score: float) -> Faces:
    return Faces(boxes_xyxy=np.asarray(box_xyxy, np.float32)[None],
                 scores=np.array([score], np.float32), track_ids=np.full(1, -1, np.int64))


class _OnDevice:
    """Networks that detect pictures built on the device (``detect_strips``, as the GPU's):
    each picture of a second look finds the hit again with ``scores`` in turn."""

    def __init__(self, scores: list[float]) -> None:
        self.scores = scores
        self.calls: list[int] = []

    def detect(self, image_bgr: np.ndarray) -> Faces:
        raise AssertionError("the pictures are built on the device")

    def detect_strips(self, image_bgr: np.ndarray, places: list) -> list[Faces]:
        from livecam.analysis.second_look import second_look_places

        self.calls.append(len(places))
        looks = second_look_places(BOX, *image_bgr.shape[:2])
        out = []
        for place in places:
            k, scale = next((k, s) for k, (p, s) in enumerate(looks)
                            if np.array_equal(p.rows, place.rows)
                            and np.array_equal(p.cols, place.cols))
            off = place.offset_xy
            box = (np.array(BOX, np.float32) - np.r_[off, off]) / scale  # picture px
            out.append(_one(box, self.scores[k]))
        return out


def test_device_networks_take_a_second_look_in_one_call_with_the_same_verdict() -> None:
    """On networks that build the pictures on the device a second look's pictures are
    detected in one call (each call was a round trip of the streams' batches and a wait for
    the GPU: 4 or 5 a look); the verdict is the one the picture-by-picture look gives."""
    from functools import partial

    from livecam.analysis.second_look import SECOND_LOOK_SPANS, seen_again

    frame = _frame(0)
    for scores, verdict in (([0.6, 0.6, 0.6, 0.0, 0.0], True), ([0.0] * 5, False),
                            ([0.0, 0.0, 0.5, 0.5, 0.5], True), ([0.9, 0.0, 0.0, 0.0, 0.2], False)):
        nets = _OnDevice(scores)
        search = StripSearch(nets)
        assert search._seen_again(frame, _one(np.array(BOX), 1.0),
                                  np.zeros(2, np.float32)).tolist() == [verdict]
        assert nets.calls == [len(SECOND_LOOK_SPANS)]
        one_by_one = _OnDevice(scores)
        assert seen_again(lambda place, nets=one_by_one: nets.detect_strips(frame, [place])[0],
                          BOX, *frame.shape[:2]) is verdict
        assert set(one_by_one.calls) == {1}
        assert seen_again(lambda place: Faces(), BOX, *frame.shape[:2],
                          detect_all=partial(nets.detect_strips, frame)) is verdict


def test_faces_inside_the_frame_get_no_second_look() -> None:
    """Two of t1's people in the middle of a 720p frame, moving a little each frame, their
    faces and shoulders in the bottom strip: hits in its repeated-rows picture that do not
    reach the bottom edge once taken down to it are faces inside the frame, which the edge
    hits leave out. Before, each was looked at again on every frame it moved (5 pictures a
    look: 50 pictures over these 10 frames)."""
    import insightface.data

    from livecam.subcommands.demo import compose_clip
    from tests.helpers.clips import face_sprites

    w, h, n = 1280, 720, 10
    s = np.linspace(0.0, 1.0, n)
    sprites = face_sprites(insightface.data.get_image("t1"))[:2]
    paths = [(x * w + 0.03 * w * np.sin(2 * np.pi * s + k), 0.5 * h + 0.05 * h * s,
              np.full(n, 0.11 * w), 4 * np.sin(2 * np.pi * s + k))
             for k, x in enumerate((0.15, 0.85))]
    counting = _Counting()
    counting.networks.open()
    try:
        search = StripSearch(counting)
        for image in compose_clip(sprites, paths, (w, h)):
            search.find(image)
    finally:
        counting.networks.close()
    assert counting.second_looks == 0
