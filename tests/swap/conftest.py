"""Fixtures for the classic swap: the mesh topology and real faces from installed packages."""

from __future__ import annotations

import pytest

from livecam.swap.mesh import MeshTopology, build_topology
from livecam.swap.source import SourceFace
from tests.helpers.swap_eval import RealFace, real_faces, source_from


@pytest.fixture(scope="session")
def topology() -> MeshTopology:
    return build_topology()


@pytest.fixture(scope="session")
def faces() -> list[RealFace]:
    """8 real people: astronaut, t1-0..t1-5 (left to right in t1.jpg), hanks."""
    found = real_faces()
    assert [f.label for f in found][:2] == ["astronaut", "t1-0"]
    return found


@pytest.fixture(scope="session")
def by_label(faces: list[RealFace]) -> dict[str, RealFace]:
    return {f.label: f for f in faces}


@pytest.fixture(scope="session")
def astronaut_source(by_label: dict[str, RealFace], topology: MeshTopology) -> SourceFace:
    return source_from(by_label["astronaut"], topology)
