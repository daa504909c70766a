"""Write a Triton model repository from the registry's verified models.

One directory per model, in Triton's layout::

    <repository>/<name>/config.pbtxt      python backend, fp16 tensors, dynamic batching,
                                          instance groups, livecam_* parameters, sha256
    <repository>/<name>/1/model.py        imports TritonPythonModel from this livecam
    <repository>/<name>/1/model.onnx      the verified file (hard link, or a copy)
    <repository>/<name>/1/model.sha256    its sha256, checked again before writing
    <repository>/<name>/1/manifest.yaml   the model's manifest (inputs, TensorRT profiles)

Triton's Python backend runs the model with the fastest engine livecam has on the serving
machine (see :mod:`livecam.engines.triton_model`). Tensors cross the wire as float16, batch
first; ``max_batch_size`` makes Triton's dynamic batcher merge requests from many clients.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from livecam.core.errors import ModelError
from livecam.engines.manifest import ModelManifest, load_manifest
from livecam.engines.protocol import TensorSpec
from livecam.engines.store import ModelStore, sha256_file

# The stub's embedded Python ignores PYTHONPATH (and so pip --target dirs): the model puts the
# serving process's import path in front, so it imports the same livecam and engines.
MODEL_PY = '''"""Written by `livecam engines serve`: livecam's model for Triton's Python backend."""
import sys

sys.path[:0] = [p for p in {paths!r} if p not in sys.path]
from livecam.engines.triton_model import TritonPythonModel  # noqa: E402, F401
'''


@dataclass(frozen=True)
class ServingPlan:
    """How every model of a repository is served.

    - ``backend``: the livecam engine inside Triton (tensorrt, torch, onnxruntime).
    - ``gpus``: CUDA device ids for ``KIND_GPU`` instances; empty = ``KIND_CPU``.
    - ``instances``: model instances per GPU (or on the CPU); more overlap one instance's
      host work with another's compute, each costs its own weights in memory.
    - ``max_batch``: most rows (faces) one model call holds; the dynamic batcher merges
      requests up to it.
    - ``max_queue_delay_us``: how long the batcher may hold a request to fill a batch; longer
      gives bigger batches under load and adds that much to each request's latency.
    """

    backend: str
    precision: str = "fp16"
    gpus: tuple[int, ...] = ()
    instances: int = 1
    max_batch: int = 16
    max_queue_delay_us: int = 500
    torch_mode: str = "auto"
    cache_dir: str = ""
    warm_up: bool = True


def _dims(spec: TensorSpec) -> str:
    """Triton dims without the batch axis; a dynamic size is -1."""
    dims = [d if isinstance(d, int) and d > 0 else -1 for d in spec.shape[1:]]
    return ", ".join(str(d) for d in dims)


def _tensors(kind: str, specs: Sequence[TensorSpec]) -> str:
    items = ",\n".join(f'  {{ name: "{s.name}" data_type: TYPE_FP16 dims: [ {_dims(s)} ] }}'
                       for s in specs)
    return f"{kind} [\n{items}\n]\n"


def model_config_text(manifest: ModelManifest, sha256: str, plan: ServingPlan) -> str:
    """The ``config.pbtxt`` of one model (protobuf text format)."""
    if plan.gpus:
        gpus = ", ".join(str(g) for g in plan.gpus)
        group = f"instance_group [ {{ count: {plan.instances} kind: KIND_GPU gpus: [ {gpus} ] }} ]"
    else:
        group = f"instance_group [ {{ count: {plan.instances} kind: KIND_CPU }} ]"
    preferred = [b for b in (2, 4, 8, 16, 32, 64) if b <= plan.max_batch]
    params = {"livecam_backend": plan.backend, "livecam_precision": plan.precision,
              "livecam_torch_mode": plan.torch_mode, "livecam_cache_dir": plan.cache_dir,
              "livecam_warm_up": str(plan.warm_up).lower(), "sha256": sha256}
    param_text = "".join(f'parameters {{ key: "{k}" value {{ string_value: "{v}" }} }}\n'
                         for k, v in params.items())
    return (f'name: "{manifest.name}"\nbackend: "python"\nmax_batch_size: {plan.max_batch}\n'
            + _tensors("input", manifest.inputs) + _tensors("output", manifest.outputs)
            + f"dynamic_batching {{ preferred_batch_size: [ {', '.join(map(str, preferred))} ]"
            f" max_queue_delay_microseconds: {plan.max_queue_delay_us} }}\n"
            + group + "\n" + param_text)


def manifest_file(manifests_dir: Path, name: str) -> Path:
    """The YAML file in ``manifests_dir`` that describes model ``name``."""
    direct = manifests_dir / f"{name}.yaml"
    if direct.is_file():
        return direct
    for path in sorted(manifests_dir.glob("*.yaml")):
        if load_manifest(path).name == name:
            return path
    raise ModelError(f"no manifest for model {name} in {manifests_dir}")


def _link_or_copy(src: Path, dst: Path) -> None:
    tmp = dst.with_name(dst.name + ".part")
    tmp.unlink(missing_ok=True)
    try:
        os.link(src, tmp)
    except OSError:  # another filesystem, or links not allowed: a copy serves as well
        shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


def write_repository(root: Path, store: ModelStore, manifests_dir: Path,
                     names: Sequence[str], plan: ServingPlan) -> dict[str, str]:
    """Write (or refresh) the repository at ``root`` for ``names``; returns name -> sha256.

    Every model is verified first (its sha256 recomputed, not taken from the stamp); a missing
    or mismatching file raises :class:`ModelError` naming ``livecam models fetch`` and nothing
    of that model is written. Files already there are replaced atomically.
    """
    import livecam

    livecam_root = str(Path(livecam.__file__).resolve().parent.parent)
    paths = [livecam_root, *(p for p in sys.path if p and p != livecam_root)]
    digests = {name: store.verify(name, force=True) for name in names}
    for name in names:
        manifest = store.manifest(name)
        version_dir = root / name / "1"
        version_dir.mkdir(parents=True, exist_ok=True)
        _link_or_copy(store.path(name), version_dir / "model.onnx")
        if sha256_file(version_dir / "model.onnx") != digests[name]:
            raise ModelError(f"model {name}: the copy in {version_dir} does not match its "
                             "sha256; the models dir changed while serving started, try again")
        shutil.copyfile(manifest_file(manifests_dir, name), version_dir / "manifest.yaml")
        (version_dir / "model.sha256").write_text(digests[name] + "\n")
        (version_dir / "model.py").write_text(MODEL_PY.format(paths=paths))
        (root / name / "config.pbtxt").write_text(model_config_text(manifest, digests[name],
                                                                    plan))
    return digests
