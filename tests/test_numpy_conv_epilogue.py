"""A convolution split over threads runs its chain's per-value tails (GELU, HardSwish, Relu,
scalar Mul / Add) on each piece of its output (``epilogue=``, nnrt_numpy/fusion.py) and gives
the numbers of the unfused graph; tails with a per-channel operand stay after the head."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import nnrt_numpy.backend  # noqa: F401  (registers the kernels)
from nnrt_core import load_model
from nnrt_numpy import fusion, parallel
from nnrt_numpy.program import GraphProgram

RNG = np.random.default_rng(3)


def conv_tail_model(tail: str, ksize: int) -> object:
    """Conv (8 -> 16 channels, ``ksize``, same padding) followed by the ``tail`` nodes."""
    w = RNG.standard_normal((16, 8, ksize, ksize)).astype(np.float32) * 0.3
    inits = {"w": w, "b": RNG.standard_normal(16).astype(np.float32), "two": np.array(2.0, np.float32),
             "ch": RNG.standard_normal((1, 16, 1, 1)).astype(np.float32)}
    p = ksize // 2
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[p] * 4)]
    if tail == "gelu":
        nodes.append(helper.make_node("Gelu", ["c"], ["y"]))
    elif tail == "hardswish":
        nodes.append(helper.make_node("HardSwish", ["c"], ["y"]))
    elif tail == "relu_mul_add":
        nodes += [helper.make_node("Relu", ["c"], ["r"]), helper.make_node("Mul", ["r", "two"], ["m"]),
                  helper.make_node("Add", ["m", "two"], ["y"])]
    else:  # a per-channel Mul after the Relu: not a per-value tail
        nodes += [helper.make_node("Relu", ["c"], ["r"]), helper.make_node("Mul", ["r", "ch"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8, 21, 17])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16, 21, 17])],
                          [numpy_helper.from_array(a, n) for n, a in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
    m.ir_version = 9
    return m


@pytest.mark.parametrize("ksize", [1, 3])
@pytest.mark.parametrize("tail", ["gelu", "hardswish", "relu_mul_add", "channel_mul"])
def test_split_conv_runs_per_value_tails_on_its_pieces(monkeypatch, tail, ksize):
    graph = load_model(conv_tail_model(tail, ksize)).graph
    fused, plain = GraphProgram(graph), GraphProgram(graph, fuse=False)
    assert len(fused.steps) == 1
    x = (RNG.standard_normal((2, 8, 21, 17)) * 2).astype(np.float32)
    want = plain.run([x])[0]
    pieces: list[tuple] = []
    apply = fusion.apply_hard
    monkeypatch.setattr(fusion, "apply_hard", lambda op, y: (pieces.append(y.shape), apply(op, y))[1])
    monkeypatch.setattr(parallel, "SPLIT_US", 0.0)  # split even this small convolution
    monkeypatch.setattr(parallel, "COLD_SPLIT_US", 0.0)
    monkeypatch.setattr(parallel, "MIN_MACS", 1)  # in many pieces
    prev = parallel.set_threads(2)
    try:
        got = fused.run([x])[0]
        one = parallel.set_threads(1)
        try:
            alone = fused.run([x])[0]  # one thread: the tails run once, on the whole output
        finally:
            parallel.set_threads(*one)
    finally:
        parallel.set_threads(*prev)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(alone, want, rtol=2e-5, atol=2e-5)
    if tail in ("gelu", "hardswish"):  # one call per piece (>= 2 with two threads), then one whole
        assert len(pieces) >= 3 and pieces[-1] == want.shape and all(s != want.shape for s in pieces[:-1])


def test_per_value_tails_refuse_channel_and_tensor_operands():
    t = np.float32
    assert fusion.per_value_tails([("relu", t(0), t(np.inf)), ("mul", np.array([2.0], np.float32))]) is not None
    assert fusion.per_value_tails([("mul", np.ones((1, 4, 1, 1), np.float32))]) is None
    assert fusion.per_value_tails([("add_in", 1)]) is None
    assert fusion.per_value_tails([]) is None
    y = np.arange(-3, 3, dtype=np.float32).reshape(2, 3)
    fusion.per_value_tails([("relu", t(0), t(np.inf)), ("add", np.array([1.0], np.float32))])(y[:, 1:])
    np.testing.assert_array_equal(y, [[-3, 1, 1], [0, 2, 3]])


def dw_tail_model(tail: str, shape: tuple, k: int) -> object:
    """A depthwise Conv (``k`` x ``k``, same padding, bias) followed by ``tail``: ``hswish3``
    (Add 3, Clip 0..6, Mul, Div 6 as PaddlePaddle exports it), ``gelu`` (Gelu) or ``relu``."""
    n, c, h, w_ = shape
    inits = {"w": RNG.standard_normal((c, 1, k, k)).astype(np.float32) * 0.3,
             "b": RNG.standard_normal(c).astype(np.float32), "three": np.array(3.0, np.float32),
             "zero": np.array(0.0, np.float32), "six": np.array(6.0, np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], group=c, pads=[k // 2] * 4, kernel_shape=[k, k])]
    if tail == "hswish3":
        nodes += [helper.make_node("Add", ["c", "three"], ["a"]), helper.make_node("Clip", ["a", "zero", "six"], ["cl"]),
                  helper.make_node("Mul", ["c", "cl"], ["m"]), helper.make_node("Div", ["m", "six"], ["y"])]
    elif tail == "gelu":
        nodes.append(helper.make_node("Gelu", ["c"], ["y"]))
    else:
        nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))],
                          [numpy_helper.from_array(a, n_) for n_, a in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
    m.ir_version = 9
    return m


@pytest.mark.parametrize("shape,k", [((3, 24, 2, 40), 5), ((2, 40, 9, 13), 3), ((1, 64, 3, 30), 5)])
@pytest.mark.parametrize("tail", ["hswish3", "gelu", "relu"])
def test_split_depthwise_conv_runs_per_value_tails_on_its_pieces(monkeypatch, tail, shape, k):
    """Split over two threads, a depthwise conv runs the chain's tails on each piece of channels:
    the same numbers bit for bit as on one thread (tails once, on the whole output), and the
    unfused graph's to float32 rounding."""
    monkeypatch.setattr(parallel, "SPLIT_US", 0.0)  # plans cut in pieces, and split at run time
    monkeypatch.setattr(parallel, "COLD_SPLIT_US", 0.0)
    graph = load_model(dw_tail_model(tail, shape, k)).graph
    fused, plain = GraphProgram(graph), GraphProgram(graph, fuse=False)
    assert len(fused.steps) == 1
    x = (RNG.standard_normal(shape) * 3).astype(np.float32)
    want = plain.run([x])[0]
    calls: list[tuple] = []
    epi = fusion.per_value_tails

    def counting(ops):
        f = epi(ops)
        return None if f is None else (lambda y: (calls.append(y.shape), f(y))[1])

    monkeypatch.setattr(fusion, "per_value_tails", counting)
    fused = GraphProgram(graph)  # its epilogue now counts its calls
    prev = parallel.set_threads(2)
    try:
        got = fused.run([x])[0]
        split_calls = list(calls)
        one = parallel.set_threads(1)
        try:
            alone = fused.run([x])[0]
        finally:
            parallel.set_threads(*one)
    finally:
        parallel.set_threads(*prev)
    np.testing.assert_array_equal(got, alone)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    assert len(split_calls) >= 2 and all(s != want.shape for s in split_calls)  # per piece
    assert calls[len(split_calls):] == [want.shape]  # one thread: once, on the whole output
