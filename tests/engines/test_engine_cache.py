"""The TensorRT engine cache's key rule, tested without TensorRT (bytes stand in for engines)."""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from livecam.engines.engine_cache import CompiledKey, EngineCache, EngineKey, Profile

KEY = EngineKey(
    model_sha256="ab" * 32, gpu_name="NVIDIA H200", compute_capability="9.0",
    tensorrt_version="10.9.0", precision="fp16",
    profiles=(Profile.for_batch({"target": (3, 128, 128), "source": (512,)}, 1, 4, 16),),
)


def test_round_trip_loads_only_the_same_key(tmp_path: Path) -> None:
    cache = EngineCache(tmp_path)
    cache.save("inswapper_128", KEY, b"engine-bytes")
    assert cache.load("inswapper_128", KEY) == b"engine-bytes"
    assert EngineKey.from_dict(KEY.to_dict()) == KEY
    for changed in (replace(KEY, gpu_name="NVIDIA RTX 4090"),
                    replace(KEY, compute_capability="8.9"),
                    replace(KEY, tensorrt_version="10.10.0"),
                    replace(KEY, precision="fp32"),
                    replace(KEY, model_sha256="cd" * 32),
                    replace(KEY, profiles=(Profile.for_batch({"target": (3, 128, 128)},
                                                             1, 1, 8),))):
        assert changed.digest() != KEY.digest()
        assert cache.load("inswapper_128", changed) is None


def test_an_entry_for_another_key_under_this_name_is_not_loaded(tmp_path: Path) -> None:
    cache = EngineCache(tmp_path)
    other = replace(KEY, tensorrt_version="8.6.1")
    built = cache.save("inswapper_128", other, b"old-engine")
    # someone copies the old engine and its sidecar to the path the new key would use
    wanted = cache.engine_path("inswapper_128", KEY)
    wanted.write_bytes(built.read_bytes())
    wanted.with_suffix(".json").write_text(built.with_suffix(".json").read_text())
    assert cache.load("inswapper_128", KEY) is None


def test_a_modified_engine_file_is_not_loaded(tmp_path: Path) -> None:
    cache = EngineCache(tmp_path)
    path = cache.save("inswapper_128", KEY, b"engine-bytes")
    path.write_bytes(b"engine-bytez")
    assert cache.load("inswapper_128", KEY) is None
    path.with_suffix(".json").write_text("{not json")
    assert cache.load("inswapper_128", KEY) is None


def test_entries_and_clear(tmp_path: Path) -> None:
    cache = EngineCache(tmp_path)
    cache.save("inswapper_128", KEY, b"a")
    cache.save("w600k_r50", replace(KEY, model_sha256="ef" * 32), b"bb")
    assert sorted(e.model_name for e in cache.entries()) == ["inswapper_128", "w600k_r50"]
    assert cache.clear("w600k_r50") == 1
    assert [e.model_name for e in cache.entries()] == ["inswapper_128"]
    assert cache.clear() == 1
    assert cache.entries() == []


def test_timing_cache_merges_are_serialised(tmp_path: Path) -> None:
    cache = EngineCache(tmp_path)

    def add(tag: str) -> None:
        def merge(current: bytes | None) -> bytes:
            entries = json.loads(current) if current else []
            return json.dumps([*entries, tag]).encode()

        cache.merge_timing_cache(merge)

    threads = [threading.Thread(target=add, args=(f"build{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # no build's entries were lost to another's write
    assert sorted(json.loads(cache.timing_cache_path.read_bytes())) == \
        sorted(f"build{i}" for i in range(8))


def test_profile_rejects_bad_batches() -> None:
    with pytest.raises(ValueError, match="min <= opt <= max"):
        Profile.for_batch({"x": (3,)}, 4, 2, 8)


COMPILED = CompiledKey(model_sha256="ab" * 32, device="NVIDIA H200 sm9.0",
                       torch_version="2.11.0+cu130", triton_version="3.6.0", precision="fp16",
                       batch=4, channels_last=True, max_autotune=True, executor_sha256="ef" * 32)


def test_compiled_keys_load_only_themselves(tmp_path: Path) -> None:
    cache = EngineCache(tmp_path)
    path = cache.save("inswapper_128", COMPILED, b"entry")
    assert path.suffix == ".compiled"
    assert cache.load_path("inswapper_128", COMPILED) == path
    assert CompiledKey.from_dict(COMPILED.to_dict()) == COMPILED
    for field_name, value in (("device", "NVIDIA RTX 4090 sm8.9"), ("torch_version", "2.13.0"),
                              ("triton_version", "3.7.0"), ("precision", "fp32"), ("batch", 8),
                              ("channels_last", False), ("max_autotune", False),
                              ("executor_sha256", "00" * 32)):
        other = replace(COMPILED, **{field_name: value})
        assert cache.load_path("inswapper_128", other) is None
        assert COMPILED.differences(other) == [field_name]


def test_a_tensorrt_sidecar_never_loads_as_a_compiled_entry(tmp_path: Path) -> None:
    cache = EngineCache(tmp_path)
    built = cache.save("inswapper_128", KEY, b"engine")
    wanted = cache.engine_path("inswapper_128", COMPILED)
    wanted.write_bytes(built.read_bytes())
    wanted.with_suffix(".json").write_text(built.with_suffix(".json").read_text())
    assert cache.load_path("inswapper_128", COMPILED) is None


def test_entries_and_clear_cover_both_kinds(tmp_path: Path) -> None:
    cache = EngineCache(tmp_path)
    cache.save("inswapper_128", KEY, b"engine")
    cache.save("inswapper_128", COMPILED, b"entry")
    (tmp_path / "inductor" / "fx").mkdir(parents=True)  # the compiled code, Inductor's cache
    (tmp_path / "inductor" / "fx" / "code.py").write_text("# compiled")
    assert sorted(e.key.kind for e in cache.entries()) == ["tensorrt", "torch-compiled"]
    assert "batch 4" in next(e.key.describe() for e in cache.entries()
                             if e.key.kind == "torch-compiled")
    assert cache.clear("inswapper_128") == 2
    assert list(tmp_path.glob("*.compiled")) == [] and list(tmp_path.glob("*.engine")) == []
    assert (tmp_path / "inductor").is_dir()  # other models' code may live there
    assert cache.clear() == 0 and not (tmp_path / "inductor").exists()


def test_sidecars_written_before_kinds_existed_are_tensorrt(tmp_path: Path) -> None:
    cache = EngineCache(tmp_path)
    path = cache.save("inswapper_128", KEY, b"engine")
    meta = json.loads(path.with_suffix(".json").read_text())
    del meta["kind"]
    path.with_suffix(".json").write_text(json.dumps(meta))
    assert cache.load("inswapper_128", KEY) == b"engine"
