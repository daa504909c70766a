"""Stand-in ONNX models with the real models' input/output names and shapes, random weights.

The neural swap's real weights (inswapper_128, ArcFace w600k_r50) are downloads that tests must
never make. These builders write ONNX files with the same interface so the whole path (our
preprocessing, every engine backend, insightface's reference code) runs on them:

- :func:`build_inswapper` -- inputs ``target`` (1,3,128,128) float32 RGB in [0,1] and ``source``
  (1,512) float32; output ``output`` (1,3,128,128) in [0,1]; a (512,512) ``emap`` initializer
  stored **last** (insightface reads ``graph.initializer[-1]``). The architecture follows public
  descriptions of inswapper_128: reflect-padded 7x7 conv, two stride-2 convs down to 32x32, AdaIN
  residual blocks driven by ``source`` through Gemm, bilinear 2x Resize twice, 7x7 conv, tanh.
  ``size="full"`` gives the real widths (128/256/512/1024 channels, 6 blocks: ~138 M parameters,
  ~550 MB) for the GPU benchmark; ``size="small"`` gives a few-MB model for tests.
- :func:`build_blurring_inswapper` -- the same interface; its output is the target crop
  blurred (a generator that keeps the pose but not the eyes' and mouth's detail).
- :func:`build_enhancer` -- a face restorer (GFPGAN, GPEN-BFR, CodeFormer): ``input``
  (1,3,S,S) in [-1,1] (and ``weight`` (1,) float64 for CodeFormer) -> ``output``.
- :func:`build_arcface` -- input ``input.1`` (N,3,112,112), output ``683`` (N,512), an
  iresnet-like stack (Conv, BatchNormalization, PRelu, Add, Flatten, Gemm).

The graphs deliberately use the ops real exported graphs use (Pad with a computed pads tensor,
Shape/Gather/Unsqueeze/Concat/Reshape, ReduceMean, Sqrt, Div, Resize, ...), so the torch executor
is exercised on them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

INSWAPPER_OPSET = 11


@dataclass(frozen=True)
class InswapperSize:
    """Channel widths and block count of an inswapper-shaped generator."""

    enc_channels: tuple[int, int, int, int]
    n_blocks: int
    dec_channels: tuple[int, int, int]


SIZES = {
    # the real inswapper_128 layout: 138.3 M parameters
    "full": InswapperSize((128, 256, 512, 1024), 6, (512, 256, 128)),
    "small": InswapperSize((8, 16, 16, 32), 2, (16, 16, 8)),
}


class _GraphBuilder:
    """Accumulates nodes and initializers; names values uniquely."""

    def __init__(self, seed: int) -> None:
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.rng = np.random.default_rng(seed)
        self._count = 0

    def name(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}_{self._count}"

    def init(self, prefix: str, array: np.ndarray) -> str:
        from onnx import numpy_helper

        name = self.name(prefix)
        self.inits.append(numpy_helper.from_array(array, name))
        return name

    def node(self, op: str, inputs: list[str], n_out: int = 1, **attrs: Any) -> list[str]:
        from onnx import helper

        outs = [self.name(op) for _ in range(n_out)]
        # node names follow torch's export style (Conv_12); insightface looks at node names
        self.nodes.append(helper.make_node(op, inputs, outs, name=self.name(op), **attrs))
        return outs

    def one(self, op: str, inputs: list[str], **attrs: Any) -> str:
        return self.node(op, inputs, **attrs)[0]

    def conv(self, x: str, c_in: int, c_out: int, k: int, stride: int = 1, pad: int = 0,
             reflect: int = 0) -> str:
        if reflect:
            x = self.reflect_pad(x, reflect)
        fan_in = c_in * k * k
        w = (self.rng.standard_normal((c_out, c_in, k, k)) / np.sqrt(fan_in)).astype(np.float32)
        b = (self.rng.standard_normal(c_out) * 0.05).astype(np.float32)
        return self.one("Conv", [x, self.init("w", w), self.init("b", b)],
                        kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4)

    def reflect_pad(self, x: str, p: int) -> str:
        # torch's opset-11 export computes the pads tensor at run time; so do we, in small
        pads = self.init("pads_hw", np.array([p, p, p, p], dtype=np.int64))
        zeros = self.one("ConstantOfShape", [self.init("four", np.array([4], dtype=np.int64))],
                         value=_int_tensor(0))
        head = self.one("Slice", [zeros, self.init("s0", np.array([0], np.int64)),
                                  self.init("e2", np.array([2], np.int64)),
                                  self.init("ax", np.array([0], np.int64))])
        tail = self.one("Slice", [pads, self.init("s0", np.array([0], np.int64)),
                                  self.init("e2", np.array([2], np.int64)),
                                  self.init("ax", np.array([0], np.int64))])
        tail2 = self.one("Slice", [pads, self.init("s2", np.array([2], np.int64)),
                                   self.init("e4", np.array([4], np.int64)),
                                   self.init("ax", np.array([0], np.int64))])
        all_pads = self.one("Concat", [head, tail, head, tail2], axis=0)
        return self.one("Pad", [x, all_pads], mode="reflect")

    def adain(self, x: str, source: str, channels: int, latent: int) -> str:
        mean = self.one("ReduceMean", [x], axes=[2, 3], keepdims=1)
        centred = self.one("Sub", [x, mean])
        sq = self.one("Pow", [centred, self.init("two", np.array(2.0, np.float32))])
        var = self.one("ReduceMean", [sq], axes=[2, 3], keepdims=1)
        std = self.one("Sqrt", [self.one("Add", [var, self.init("eps",
                                                               np.array(1e-8, np.float32))])])
        normed = self.one("Div", [centred, std])
        w = (self.rng.standard_normal((2 * channels, latent)) / np.sqrt(latent)).astype(np.float32)
        b = np.concatenate([np.ones(channels), np.zeros(channels)]).astype(np.float32)
        style = self.one("Gemm", [source, self.init("gw", w), self.init("gb", b)],
                         alpha=1.0, beta=1.0, transB=1)
        # (B, 2C) -> (B, 2, C, 1, 1) with the batch taken from Shape, as exported graphs do
        batch = self.one("Unsqueeze", [self.one("Gather", [
            self.one("Shape", [style]), self.init("i0", np.array(0, np.int64))], axis=0)],
            axes=[0])
        shape = self.one("Concat", [batch, self.init("tail", np.array([2, channels, 1, 1],
                                                                       np.int64))], axis=0)
        style5 = self.one("Reshape", [style, shape])
        scale = self.one("Squeeze", [self.slice1(style5, 0, 1, axis=1)], axes=[1])
        shift = self.one("Squeeze", [self.slice1(style5, 1, 2, axis=1)], axes=[1])
        return self.one("Add", [self.one("Mul", [normed, scale]), shift])

    def slice1(self, x: str, start: int, end: int, axis: int) -> str:
        return self.one("Slice", [x, self.init("s", np.array([start], np.int64)),
                                  self.init("e", np.array([end], np.int64)),
                                  self.init("a", np.array([axis], np.int64))])

    def upsample2x(self, x: str) -> str:
        roi = self.init("roi", np.zeros(0, np.float32))
        scales = self.init("scales", np.array([1, 1, 2, 2], np.float32))
        return self.one("Resize", [x, roi, scales], mode="linear",
                        coordinate_transformation_mode="pytorch_half_pixel")


def _int_tensor(value: int) -> Any:
    from onnx import TensorProto, helper

    return helper.make_tensor("value", TensorProto.INT64, [1], [value])


def build_inswapper(path: str | Path, *, size: str = "small", seed: int = 0,
                    batch: int | str = 1) -> Path:
    """Write an inswapper_128-shaped ONNX model to ``path`` and return the path.

    ``batch`` is the declared batch dimension of both inputs: 1 like the released model, or a
    name (``"N"``) for a dynamic batch. ``size`` is ``"small"`` (tests) or ``"full"`` (~138 M
    parameters, the benchmark). Deterministic for a given ``seed``.
    """
    import onnx
    from onnx import TensorProto, helper

    spec = SIZES[size]
    g = _GraphBuilder(seed)
    e0, e1, e2, e3 = spec.enc_channels
    x = g.one("LeakyRelu", [g.conv("target", 3, e0, 7, reflect=3)], alpha=0.2)
    x = g.one("LeakyRelu", [g.conv(x, e0, e1, 3, pad=1)], alpha=0.2)
    x = g.one("LeakyRelu", [g.conv(x, e1, e2, 3, stride=2, pad=1)], alpha=0.2)
    x = g.one("LeakyRelu", [g.conv(x, e2, e3, 3, stride=2, pad=1)], alpha=0.2)
    for _ in range(spec.n_blocks):
        y = g.adain(g.conv(x, e3, e3, 3, reflect=1), "source", e3, 512)
        y = g.one("Relu", [y])
        y = g.adain(g.conv(y, e3, e3, 3, reflect=1), "source", e3, 512)
        x = g.one("Add", [x, y])
    d0, d1, d2 = spec.dec_channels
    x = g.one("LeakyRelu", [g.conv(g.upsample2x(x), e3, d0, 3, pad=1)], alpha=0.2)
    x = g.one("LeakyRelu", [g.conv(g.upsample2x(x), d0, d1, 3, pad=1)], alpha=0.2)
    x = g.one("LeakyRelu", [g.conv(x, d1, d2, 3, pad=1)], alpha=0.2)
    x = g.one("Tanh", [g.conv(x, d2, 3, 7, reflect=3)])
    x = g.one("Add", [x, g.init("one", np.array(1.0, np.float32))])
    g.nodes.append(helper.make_node("Div", [x, g.init("two", np.array(2.0, np.float32))],
                                    ["output"], name="Div_out"))
    # emap: a random orthogonal-ish 512x512 map; must be the last initializer
    emap = (g.rng.standard_normal((512, 512)) / np.sqrt(512)).astype(np.float32)
    g.inits.append(onnx.numpy_helper.from_array(emap, "emap"))
    graph = helper.make_graph(
        g.nodes, "inswapper_standin",
        [helper.make_tensor_value_info("target", TensorProto.FLOAT, [batch, 3, 128, 128]),
         helper.make_tensor_value_info("source", TensorProto.FLOAT, [batch, 512])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [batch, 3, 128, 128])],
        g.inits,
    )
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", INSWAPPER_OPSET)]),
                 path)


def build_blurring_inswapper(path: str | Path, *, sigma_px: float = 5.0) -> Path:
    """Write an inswapper_128-shaped model whose output is the *target* crop blurred (a
    Gaussian of ``sigma_px`` on the 128 px crop), slightly greyed, whatever the ``source``.

    A generator that keeps the face's pose and light but not the eyes' or the mouth's detail
    (a glance or a blink becomes a smudge): the stand-in for checking that the streamer's eyes
    and mouth survive the neural swap (``tests/swap/test_expressions.py``). Same interface as
    :func:`build_inswapper`, emap last.
    """
    import onnx
    from onnx import TensorProto, helper

    radius = max(1, round(3 * sigma_px))
    axis = np.arange(-radius, radius + 1, dtype=np.float64)
    g1 = np.exp(-axis**2 / (2 * sigma_px**2))
    kernel = np.outer(g1, g1)
    kernel /= kernel.sum()
    weights = np.repeat(kernel[None, None], 3, axis=0).astype(np.float32)  # (3, 1, k, k)
    g = _GraphBuilder(0)
    blurred = g.one("Conv", ["target", g.init("gauss", weights)], group=3,
                    kernel_shape=[2 * radius + 1] * 2, pads=[radius] * 4)
    # the source is read (a real swapper's output depends on it) but weighs nothing here
    src = g.one("Mul", [g.one("ReduceMean", ["source"], axes=[1], keepdims=1),
                        g.init("zero", np.array(0.0, np.float32))])
    src = g.one("Unsqueeze", [src], axes=[2, 3])
    greyed = g.one("Add", [g.one("Mul", [blurred, g.init("k", np.array(0.9, np.float32))]),
                           g.init("c", np.array(0.05, np.float32))])
    g.nodes.append(helper.make_node("Add", [greyed, src], ["output"], name="Add_out"))
    emap = np.eye(512, dtype=np.float32)
    g.inits.append(onnx.numpy_helper.from_array(emap, "emap"))
    graph = helper.make_graph(
        g.nodes, "inswapper_blur_standin",
        [helper.make_tensor_value_info("target", TensorProto.FLOAT, [1, 3, 128, 128]),
         helper.make_tensor_value_info("source", TensorProto.FLOAT, [1, 512])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, 128, 128])],
        g.inits,
    )
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", INSWAPPER_OPSET)]),
                 path)


def build_arcface(path: str | Path, *, seed: int = 1, width: int = 16) -> Path:
    """Write a w600k_r50-shaped recognizer: ``input.1`` (N,3,112,112) -> ``683`` (N,512)."""
    from onnx import TensorProto, helper

    g = _GraphBuilder(seed)

    def bn(x: str, c: int) -> str:
        return g.one("BatchNormalization", [
            x, g.init("bn_s", (1 + 0.1 * g.rng.standard_normal(c)).astype(np.float32)),
            g.init("bn_b", (0.1 * g.rng.standard_normal(c)).astype(np.float32)),
            g.init("bn_m", (0.1 * g.rng.standard_normal(c)).astype(np.float32)),
            g.init("bn_v", (1 + 0.1 * g.rng.random(c)).astype(np.float32))], epsilon=1e-5)

    def prelu(x: str, c: int) -> str:
        return g.one("PRelu", [x, g.init("slope", np.full((c, 1, 1), 0.25, np.float32))])

    x = prelu(bn(g.conv("input.1", 3, width, 3, pad=1), width), width)
    c = width
    for c_out in (width, 2 * width, 2 * width):  # downsampling residual stages: 112->56->28->14
        y = g.conv(prelu(bn(g.conv(bn(x, c), c, c_out, 3, pad=1), c_out), c_out),
                   c_out, c_out, 3, stride=2, pad=1)
        shortcut = bn(g.conv(x, c, c_out, 1, stride=2), c_out)
        x, c = g.one("Add", [bn(y, c_out), shortcut]), c_out
    x = g.one("Flatten", [bn(x, c)], axis=1)
    feat = c * 14 * 14
    w = (g.rng.standard_normal((512, feat)) / np.sqrt(feat)).astype(np.float32)
    x = g.one("Gemm", [x, g.init("fc_w", w), g.init("fc_b", np.zeros(512, np.float32))],
              transB=1)
    g.nodes.append(helper.make_node("BatchNormalization", [
        x, g.init("f_s", np.ones(512, np.float32)), g.init("f_b", np.zeros(512, np.float32)),
        g.init("f_m", np.zeros(512, np.float32)), g.init("f_v", np.ones(512, np.float32))],
        ["683"], name="BatchNormalization_out", epsilon=1e-5))
    graph = helper.make_graph(
        g.nodes, "arcface_standin",
        [helper.make_tensor_value_info("input.1", TensorProto.FLOAT, ["None", 3, 112, 112])],
        [helper.make_tensor_value_info("683", TensorProto.FLOAT, ["None", 512])],
        g.inits,
    )
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)]), path)


def _save(model: Any, path: str | Path) -> Path:
    import onnx

    model.ir_version = 7  # readable by every onnxruntime we support
    onnx.checker.check_model(model, full_check=False)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(out))
    return out


def count_parameters(path: str | Path) -> int:
    """Number of float weights in an ONNX file (the emap counted), for the benchmark's report."""
    import onnx

    model = onnx.load(str(path))
    total = 0
    for init in model.graph.initializer:
        if init.data_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16):
            total += int(np.prod(init.dims)) if len(init.dims) else 1
    return total


def build_enhancer(path: str | Path, *, size_px: int = 512, weight_input: bool = False,
                   seed: int = 2) -> Path:
    """Write a face-restorer-shaped ONNX model (GFPGAN / GPEN-BFR / CodeFormer interface).

    Input ``input`` (1, 3, S, S) float32 RGB in [-1, 1]; output ``output`` (1, 3, S, S): the
    input plus a learned-looking residual (two convolutions, a stride-2 step and a bilinear 2x
    Resize back), scaled by 1.15 so it leaves [-1, 1] as real restorers do and the output
    clamp matters. With ``weight_input`` (CodeFormer) a second input ``weight`` (1,) float64
    scales the residual by ``1 - weight``. Batch 1 like the released files.
    """
    from onnx import TensorProto, helper

    g = _GraphBuilder(seed)
    x = g.one("LeakyRelu", [g.conv("input", 3, 8, 3, pad=1)], alpha=0.2)
    x = g.one("LeakyRelu", [g.conv(x, 8, 16, 3, stride=2, pad=1)], alpha=0.2)
    x = g.conv(g.upsample2x(x), 16, 3, 3, pad=1)
    residual = g.one("Mul", [g.one("Tanh", [x]), g.init("half", np.array(0.5, np.float32))])
    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                            [1, 3, size_px, size_px])]
    if weight_input:
        w = g.one("Cast", ["weight"], to=TensorProto.FLOAT)
        keep = g.one("Sub", [g.init("one", np.array(1.0, np.float32)), w])
        keep = g.one("Reshape", [keep, g.init("shape", np.array([1, 1, 1, 1], np.int64))])
        residual = g.one("Mul", [residual, keep])
        inputs.append(helper.make_tensor_value_info("weight", TensorProto.DOUBLE, [1]))
    summed = g.one("Add", ["input", residual])
    g.nodes.append(helper.make_node("Mul", [summed, g.init("gain", np.array(1.15, np.float32))],
                                    ["output"], name="Mul_out"))
    graph = helper.make_graph(
        g.nodes, "enhancer_standin", inputs,
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, size_px, size_px])],
        g.inits)
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)]), path)


def install_standin_models(root: str | Path, *, size: str = "small",
                           enhancers: tuple[str, ...] = ()) -> tuple[Path, Path]:
    """Write a stand-in inswapper_128 (dynamic batch; ``size`` as :func:`build_inswapper`:
    ``full`` is the real model's size) and w600k_r50, plus manifests accepting them, under
    ``root``, installed the way ``livecam models import`` installs the real ones (the store
    verifies them by sha256 exactly as it verifies downloads). ``enhancers``: enhancer
    manifests (``gpen_bfr_256``, ``gfpgan_1.4``, ...) to install a :func:`build_enhancer`
    stand-in for too, at their manifest's crop size (with a ``weight`` input where the
    manifest declares one). Returns (models_dir, manifests_dir) for the ``models`` config
    section."""
    import yaml

    from livecam.engines.manifest import default_manifests_dir, load_manifests
    from livecam.engines.store import ModelStore, sha256_file

    root = Path(root)
    models_dir, manifests_dir, build_dir = root / "models", root / "manifests", root / "build"
    for d in (models_dir, manifests_dir, build_dir):
        d.mkdir(parents=True, exist_ok=True)
    built = {"inswapper_128": build_inswapper(build_dir / "inswapper_128.onnx", size=size,
                                              batch="N"),
             "w600k_r50": build_arcface(build_dir / "w600k_r50.onnx")}
    for name in enhancers:
        manifest = yaml.safe_load((default_manifests_dir() / f"{name}.yaml").read_text())
        built[name] = build_enhancer(
            build_dir / f"{name}.onnx", size_px=int(manifest["alignment"]["size"]),
            weight_input=any(i["name"] == "weight" for i in manifest.get("inputs", ())))
    for name, path in built.items():
        data = yaml.safe_load((default_manifests_dir() / f"{name}.yaml").read_text())
        data["sources"] = [{"url": "file:///standin", "sha256": sha256_file(path)}]
        (manifests_dir / f"{name}.yaml").write_text(yaml.safe_dump(data))
    store = ModelStore(models_dir, load_manifests(manifests_dir))
    for name, path in built.items():
        store.adopt(name, path)
    return models_dir, manifests_dir
