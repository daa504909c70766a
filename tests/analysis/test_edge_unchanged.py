"""The edge search skips the detector on a strip whose band along the edge has not changed
since it was last searched (:class:`livecam.analysis.edges.StripSearch`): the same hits, the
detector run on a strip only when its band changes or its turn comes, and a face entering
searched on the frame it appears in. Real networks, real photos."""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np
import pytest

from livecam.analysis import edges
from livecam.analysis.networks import CpuFaceNetworks
from livecam.analysis.second_look import StripPlace
from livecam.core.types import Faces


class CountingNetworks(CpuFaceNetworks):
    """The CPU networks, counting the strip pictures the detector runs on."""

    def __init__(self) -> None:
        super().__init__()
        self.pictures = 0

    def detect_strips(self, image_bgr: np.ndarray,
                      places: Sequence[StripPlace]) -> list[Faces] | None:
        self.pictures += sum(p.kept for p in places)  # not a second look's pictures
        return super().detect_strips(image_bgr, places)


@pytest.fixture(scope="module")
def networks() -> CountingNetworks:
    nets = CountingNetworks()
    nets.open()
    yield nets
    nets.close()


def _hits(found: list[tuple[Faces, np.ndarray]], frame: np.ndarray) -> list[list[float]]:
    return sorted(np.round(box, 1).tolist() for box, _, _ in edges.edge_hits(found, frame, 0.3))


def _scene(t1_bgr: np.ndarray) -> np.ndarray:
    # a room with people in the middle, none at the edges
    frame = np.full((720, 1280, 3), 120, np.uint8)
    frame[:, :, 0] = np.linspace(80, 160, 1280, dtype=np.uint8)[None]
    frame[200:643, 320:960] = cv2.resize(t1_bgr, (640, 443), interpolation=cv2.INTER_AREA)
    return frame


def test_a_still_scene_runs_one_strip_a_frame_with_the_same_hits(
        networks: CountingNetworks, t1_bgr: np.ndarray) -> None:
    frame = _scene(t1_bgr)
    rng = np.random.default_rng(0)
    search = edges.StripSearch(networks)
    first = search.find(frame)
    n_places = len(edges.strip_places(720, 1280))
    assert networks.pictures == n_places
    for _ in range(6):
        # sensor noise (+-3 levels) changes no cell's mean by the threshold
        noisy = np.clip(frame.astype(np.int16) + rng.integers(-3, 4, frame.shape), 0, 255)
        networks.pictures = 0
        again = search.find(noisy.astype(np.uint8))
        assert networks.pictures <= 1  # only the strip whose turn it is
        assert _hits(again, frame) == _hits(first, frame)


def test_a_face_entering_is_searched_on_the_frame_it_appears(
        networks: CountingNetworks, t1_bgr: np.ndarray, astronaut_bgr: np.ndarray) -> None:
    frame = _scene(t1_bgr)
    search = edges.StripSearch(networks)
    search.find(frame)
    search.find(frame)
    # the astronaut's face (about 208 px wide here) 40 % in view at the left edge
    big = cv2.resize(astronaut_bgr, (1024, 1024))
    box = networks.detect(astronaut_bgr).boxes_xyxy[0] * 2
    keep = int((box[2] - box[0]) * 0.4)
    entering = frame.copy()
    entering[100:620, :keep] = big[:520, int(box[2]) - keep:int(box[2])]
    networks.pictures = 0
    found = search.find(entering)
    assert networks.pictures >= 1
    fresh = edges.StripSearch(networks).find(entering)
    assert _hits(found, entering) == _hits(fresh, entering)
    assert _hits(fresh, entering), "the test's face is found at the edge"


def test_networks_with_prepared_batches_skip_unchanged_strips_too(
        networks: CountingNetworks, t1_bgr: np.ndarray) -> None:
    # the GPU's networks (prepare_pictures: a frame's strips in one captured call) searched
    # every strip every frame: each search a round trip through the streams' batcher, the
    # host work that held 16 streams on an H100 to 5-7 frames/s
    class Prepared:
        def __init__(self, inner: CountingNetworks) -> None:
            self.inner = inner

        def prepare_pictures(self, counts: dict[tuple[int, int], int]) -> None:
            return None

        def detect(self, image_bgr: np.ndarray) -> Faces:
            return self.inner.detect(image_bgr)

        def detect_strips(self, image_bgr: np.ndarray,
                          places: Sequence[StripPlace]) -> list[Faces] | None:
            return self.inner.detect_strips(image_bgr, places)

    frame = _scene(t1_bgr)
    search = edges.StripSearch(Prepared(networks))
    first = search.find(frame)
    assert networks.pictures >= len(edges.strip_places(720, 1280))
    networks.pictures = 0
    again = search.find(frame)
    assert networks.pictures <= 1  # only the strip whose turn it is
    assert _hits(again, frame) == _hits(first, frame)
