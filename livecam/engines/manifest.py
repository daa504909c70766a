"""Model manifests: one YAML file per model in ``engines/`` at the repository root.

A manifest says what file a model is, where to fetch it, which sha256 values are accepted
(only those a public source documents; none means the first verified copy's hash is recorded
and held to), its inputs/outputs, normalisation, alignment template, the recognizer it needs and
its TensorRT profiles. See ``engines/inswapper_128.yaml`` for a commented example.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from livecam.config.safe_yaml import YamlRefused, read_yaml_file
from livecam.core.errors import ConfigError
from livecam.engines.engine_cache import Profile
from livecam.engines.protocol import TensorSpec

KINDS = ("swapper", "recognizer", "enhancer")


@dataclass(frozen=True)
class Source:
    """One download location and the sha256 its publisher (or a public source) documents."""

    url: str
    sha256: str | None = None
    size_bytes: int | None = None


@dataclass(frozen=True)
class ModelManifest:
    """What ``engines/<name>.yaml`` says about one model."""

    name: str
    kind: str
    file: str
    sources: tuple[Source, ...]
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    licence: str = ""
    sha256_note: str = ""
    colour: str = "rgb"
    mean: float = 0.0
    std: float = 1.0
    template: str = ""
    crop_size_px: int = 0
    recognizer: str = ""
    trt_precision: str = "fp16"
    trt_fp32_layers: tuple[str, ...] = ()
    trt_batches: tuple[tuple[int, int, int], ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def accepted_sha256(self) -> frozenset[str]:
        """Every documented sha256 (lower case); empty when no public source documents one."""
        return frozenset(s.sha256.lower() for s in self.sources if s.sha256)

    def trt_profiles(self) -> tuple[Profile, ...]:
        """One TensorRT profile per ``tensorrt.profiles`` entry, over every input's batch."""
        dims = {s.name: tuple(int(d) for d in s.shape[1:] if isinstance(d, int))
                for s in self.inputs}
        return tuple(Profile.for_batch(dims, lo, opt, hi) for lo, opt, hi in self.trt_batches)


def _specs(path: Path, items: Any, what: str) -> tuple[TensorSpec, ...]:
    if not isinstance(items, list) or not items:
        raise ConfigError(f"{path}: {what} must be a non-empty list")
    out = []
    for item in items:
        try:
            shape = tuple(d if isinstance(d, int) else str(d) for d in item["shape"])
            out.append(TensorSpec(str(item["name"]), shape, str(item.get("dtype", "float32"))))
        except (KeyError, TypeError) as exc:
            raise ConfigError(f"{path}: each of {what} needs name and shape ({exc})") from None
    return tuple(out)


def load_manifest(path: str | Path) -> ModelManifest:
    """Parse and check one manifest file; raises :class:`ConfigError` naming the file."""
    path = Path(path)
    try:
        data = read_yaml_file(path)
    except OSError as exc:
        raise ConfigError(f"model manifest {path} cannot be read: {exc.strerror}") from None
    except YamlRefused as exc:
        raise ConfigError(f"model manifest {path} {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"model manifest {path}: expected a mapping")
    for key in ("name", "kind", "file", "sources", "inputs", "outputs"):
        if key not in data:
            raise ConfigError(f"model manifest {path}: missing key {key!r}")
    if data["kind"] not in KINDS:
        raise ConfigError(f"model manifest {path}: kind must be one of {', '.join(KINDS)}")
    sources = []
    for src in data["sources"] or []:
        sha = src.get("sha256")
        if sha is not None and (len(str(sha)) != 64 or not all(c in "0123456789abcdefABCDEF"
                                                              for c in str(sha))):
            raise ConfigError(f"model manifest {path}: {sha!r} is not a sha256 hex digest")
        sources.append(Source(str(src["url"]), str(sha).lower() if sha else None,
                              src.get("size_bytes")))
    pre = data.get("preprocess") or {}
    align = data.get("alignment") or {}
    trt = data.get("tensorrt") or {}
    batches = tuple((int(p["min_batch"]), int(p["opt_batch"]), int(p["max_batch"]))
                    for p in trt.get("profiles") or [])
    known = {"name", "kind", "file", "sources", "inputs", "outputs", "licence", "sha256_note",
             "preprocess", "alignment", "recognizer", "tensorrt"}
    return ModelManifest(
        name=str(data["name"]), kind=str(data["kind"]), file=str(data["file"]),
        sources=tuple(sources), inputs=_specs(path, data["inputs"], "inputs"),
        outputs=_specs(path, data["outputs"], "outputs"), licence=str(data.get("licence", "")),
        sha256_note=str(data.get("sha256_note", "")), colour=str(pre.get("colour", "rgb")),
        mean=float(pre.get("mean", 0.0)), std=float(pre.get("std", 1.0)),
        template=str(align.get("template", "")), crop_size_px=int(align.get("size", 0)),
        recognizer=str(data.get("recognizer", "")),
        trt_precision=str(trt.get("precision", "fp16")),
        trt_fp32_layers=tuple(trt.get("fp32_layers") or ()), trt_batches=batches,
        extra={k: v for k, v in data.items() if k not in known},
    )


def default_manifests_dir() -> Path:
    """The manifests that come with livecam: the copy a wheel installs in the package
    (``livecam/data/engines``, mapped from ``engines/`` by pyproject.toml), else ``engines/``
    at the top of a source checkout (an editable install, or PYTHONPATH)."""
    package = Path(__file__).resolve().parents[1]
    shipped = package / "data" / "engines"
    return shipped if shipped.is_dir() else package.parent / "engines"


def load_manifests(directory: str | Path | None = None) -> dict[str, ModelManifest]:
    """Every ``*.yaml`` manifest in ``directory`` (default: :func:`default_manifests_dir`)."""
    root = Path(directory) if directory else default_manifests_dir()
    if not root.is_dir():
        raise ConfigError(f"model manifests directory {root} does not exist "
                          "(set advanced.models.manifests_dir)")
    manifests = {}
    for path in sorted(root.glob("*.yaml")):
        manifest = load_manifest(path)
        if manifest.name in manifests:
            raise ConfigError(f"model manifest {path}: name {manifest.name!r} is used twice")
        manifests[manifest.name] = manifest
    return manifests
