"""Fuzzing the identity record reader (hypothesis): whatever bytes ``identities/<name>.json``
holds, reading it gives an entry or one :class:`IdentityError`; ``list`` still exits 0 and
``remove`` still removes it. Never a traceback, never a hang."""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from livecam.cli import main
from livecam.core.errors import IdentityError
from livecam.identity import IdentityLibrary

FUZZ = settings(max_examples=150, deadline=timedelta(seconds=20), database=None,
                suppress_health_check=[HealthCheck.too_slow])

SHA = "ab" * 32
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
    | st.just(SHA),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.sampled_from(["photos", "sha256", "created", "added", "warnings",
                                       "source", "face_width_px", "name"]) | st.text(max_size=6),
                      inner, max_size=5),
    max_leaves=20)
records = st.fixed_dictionaries(
    {}, optional={"name": st.text(max_size=10), "created": json_values,
                  "photos": st.lists(st.fixed_dictionaries(
                      {}, optional={"sha256": st.just(SHA) | st.text(max_size=70),
                                    "warnings": json_values, "added": json_values,
                                    "source": json_values}), max_size=3) | json_values})


def _as_bytes(value: Any) -> bytes:
    return json.dumps(value, allow_nan=True).encode()


def _check(data: bytes) -> None:
    from livecam.identity.record import parse_record

    try:
        entry = parse_record(data, "x", Path("x.jpg"))
    except IdentityError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 400
        return
    assert all(isinstance(p["sha256"], str) and len(p["sha256"]) == 64 for p in entry.photos)


@FUZZ
@given(st.binary(max_size=300))
def test_any_bytes(data: bytes) -> None:
    _check(data)


@FUZZ
@given(json_values | records)
def test_any_json(value: Any) -> None:
    _check(_as_bytes(value))


@FUZZ
@given(st.binary(max_size=200) | (json_values | records).map(_as_bytes))
def test_list_exits_0_and_remove_removes(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "identities").mkdir()
        (root / "identities" / "x.json").write_bytes(data)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(["identity", "--set", f"identity.library_dir={root}", "list", "--json"])
                code: object = 0
            except SystemExit as exc:
                code = exc.code
        assert code == 0, err.getvalue()
        assert [row["name"] for row in json.loads(out.getvalue())] == ["x"]
        library = IdentityLibrary(root)
        library.remove("x")
        assert library.names() == []
