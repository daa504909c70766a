"""The TFLite graphs' torch ops (:mod:`livecam.gpupipe.networks.tflite_torch`) as the compilers see
them: traced on fake tensors (shapes only), as dynamo and ``torch._dynamo.aot_compile`` do."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from livecam.gpupipe.networks import tflite_torch


@pytest.mark.parametrize(("stride", "padding", "dilation"), [(1, 1, 1), (2, 0, 1), (1, 2, 2)])
def test_the_cuda_depthwise_convolution_traces_with_any_batch(
        stride: int, padding: int, dilation: int) -> None:
    """Seen on the H200: the streams' detector and mesh calls compiled for any batch from two
    up (``advanced.gpu.compile_dynamic_batches``) could not be saved whole ("Operator does not
    support running with fake tensors"), so each start traced them again. On CUDA a small
    batch's depthwise convolution is ``aten._conv_depthwise2d``, which torch gives no shape
    function: a fake tensor of a fixed shape runs the real kernel on zeros, one of a symbolic
    batch cannot. Here fake CUDA tensors (no GPU needed) of a symbolic batch go through the
    port's convolution and come out shaped as ``conv2d``'s output."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import (
        DimDynamic,
        ShapeEnv,
        StatelessSymbolicContext,
    )

    channels, height, width = 8, 9, 11
    params = {"groups": channels, "stride": (stride, stride), "padding": (padding, padding),
              "dilation": (dilation, dilation)}
    want = F.conv2d(torch.rand(3, channels, height, width), torch.rand(channels, 1, 3, 3),
                    None, stride, padding, dilation, channels).shape
    mode = FakeTensorMode(shape_env=ShapeEnv())
    dynamic = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC])
    batch = mode.from_tensor(torch.zeros(3), symbolic_context=dynamic).shape[0]
    with mode:
        x = torch.empty((batch, channels, height, width), device="cuda", dtype=torch.float16)
        weight = torch.empty((channels, 1, 3, 3), device="cuda", dtype=torch.float16)
        bias = torch.empty((channels,), device="cuda", dtype=torch.float16)
        assert x.is_cuda and not isinstance(batch, int)  # the branch the CUDA port takes
        out = tflite_torch._conv2d(x, weight, bias, params)
    assert out.shape[0] is batch or str(out.shape[0]) == str(batch)
    assert tuple(out.shape[1:]) == tuple(want[1:])
    assert out.is_cuda and out.dtype == torch.float16 and out.is_contiguous()


def test_dynamo_traces_the_depthwise_convolution_whole_with_a_dynamic_batch() -> None:
    """The H200's error as dynamo raised it, reproduced on the CPU: ``fullgraph`` (as saving
    a call whole compiles) over ``aten._conv_depthwise2d`` with the batch marked dynamic.
    Only the trace is checked: the op itself runs on CUDA alone, so the backend stands in."""
    graphs: list[torch.fx.GraphModule] = []

    def backend(graph: torch.fx.GraphModule, example: list[torch.Tensor]) -> object:
        graphs.append(graph)
        return lambda *args: (torch.zeros(1),)

    def depthwise(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return torch.ops.aten._conv_depthwise2d(x, weight, [3, 3], None, [1, 1], [1, 1],
                                                [1, 1])

    x = torch.rand(2, 8, 10, 10)
    torch._dynamo.mark_dynamic(x, 0)
    torch.compile(depthwise, fullgraph=True, backend=backend)(x, torch.rand(8, 1, 3, 3))
    (graph,) = graphs
    assert "_conv_depthwise2d" in graph.code


@pytest.mark.gpu
@pytest.mark.skipif("not __import__('torch').cuda.is_available()",
                    reason="the shape function is checked against CUDA's kernel")
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize(("batch", "stride", "padding", "dilation"),
                         [(1, 1, 1, 1), (3, 2, 0, 1), (8, 1, 2, 2)])
def test_the_depthwise_shape_function_matches_the_cuda_kernel(
        batch: int, stride: int, padding: int, dilation: int, channels_last: bool) -> None:
    """The shape function the compilers trace with must describe what CUDA's kernel writes:
    the same shape, dtype and strides (a compiled graph reads the output by those strides)."""
    x = torch.rand(batch, 8, 9, 11, device="cuda", dtype=torch.float16)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    weight = torch.rand(8, 1, 3, 3, device="cuda", dtype=torch.float16)
    bias = torch.rand(8, device="cuda", dtype=torch.float16)
    args = ([3, 3], bias, [stride] * 2, [padding] * 2, [dilation] * 2)
    real = torch.ops.aten._conv_depthwise2d(x, weight, *args)
    fake = tflite_torch._depthwise_output(x, weight, *args)
    assert (real.shape, real.stride(), real.dtype) == (fake.shape, fake.stride(), fake.dtype)
    want = F.conv2d(x.float(), weight.float(), bias.float(), stride, padding, dilation, 8)
    assert torch.allclose(real.float(), want, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("shape", [(2, 5, 6, 6), (3, 4, 12, 7), (1, 2, 1, 3)])
@pytest.mark.parametrize("channels_last", [False, True])
def test_a_doubling_resize_is_torch_s_bilinear_resize(shape: tuple[int, ...],
                                                      channels_last: bool) -> None:
    # the full-range detector's three resizes double both sides: lerps of shifted copies
    # instead of PyTorch's NCHW kernel (one thread per output pixel looping over every
    # picture and channel), the same values; any other size is F.interpolate's
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(1))
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    for size in ((2 * shape[2], 2 * shape[3]), (2 * shape[2] + 1, 2 * shape[3])):
        want = F.interpolate(x, size=size, mode="bilinear", align_corners=False)
        got = tflite_torch._resize_bilinear(x, size)
        assert got.shape == want.shape
        assert torch.allclose(got, want, rtol=0, atol=1e-6)
