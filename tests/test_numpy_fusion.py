"""The NumPy backend's compile-time fusion (nnrt_numpy/fusion.py): chains are
found where they are safe, and the fused program gives the unfused numbers."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from nnrt_core import ScheduleConfig, Session
from nnrt_core.session import load_model
import nnrt_numpy.backend  # noqa: F401  (registers the kernels)
from nnrt_numpy.program import GraphProgram

RNG = np.random.default_rng(0)


def f32(*shape, lo=-1.0, hi=1.0):
    return (RNG.random(shape, dtype=np.float32) * (hi - lo) + lo).astype(np.float32)


def model(nodes, inputs, outputs, inits, opset=17):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
                          [numpy_helper.from_array(a, n) for n, a in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def bn_inits(prefix, c):
    return {f"{prefix}_s": f32(c, lo=0.5, hi=1.5), f"{prefix}_b": f32(c), f"{prefix}_m": f32(c),
            f"{prefix}_v": f32(c, lo=0.5, hi=2.0)}


def bn(prefix, x, y):
    return helper.make_node("BatchNormalization", [x, f"{prefix}_s", f"{prefix}_b", f"{prefix}_m", f"{prefix}_v"], [y])


def run_both(m, feeds):
    """(fused outputs, unfused outputs, fused program) for the whole graph on numpy."""
    graph = load_model(m).graph
    fused = GraphProgram(graph)
    plain = GraphProgram(graph, fuse=False)
    names = [v.name for v in graph.inputs]
    args = [feeds[n] for n in names]
    return fused.run(args), plain.run(args), fused


def check(m, feeds, fused_nodes, rtol=1e-5):
    got, want, prog = run_both(m, feeds)
    assert prog.fused_nodes == fused_nodes
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-5)
    # and the session (default passes) agrees
    sess = Session(m, ScheduleConfig(backends=["numpy"]))
    out = sess.run(feeds)
    for g, w in zip(out.values(), want):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-5)


def test_conv_bn_mul_add_relu_folds_into_conv():
    inits = {"w": f32(8, 4, 3, 3), "b": f32(8), "mc": f32(8, 1, 1), "ac": f32(8, 1, 1), **bn_inits("bn", 8)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), bn("bn", "c", "n"),
             helper.make_node("Mul", ["n", "mc"], ["m"]), helper.make_node("Add", ["ac", "m"], ["a"]),
             helper.make_node("Relu", ["a"], ["y"])]
    check(model(nodes, [("x", [2, 4, 9, 9])], [("y", [2, 8, 9, 9])], inits), {"x": f32(2, 4, 9, 9)}, 4)


def test_residual_add_and_activations():
    inits = {"w": f32(6, 6, 1, 1), **bn_inits("bn", 6)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), bn("bn", "c", "n"),
             helper.make_node("Sum", ["n", "x"], ["s"]), helper.make_node("LeakyRelu", ["s"], ["l"], alpha=0.2),
             helper.make_node("Add", ["x", "l"], ["a"]), helper.make_node("Sigmoid", ["a"], ["y"])]
    check(model(nodes, [("x", [1, 6, 5, 7])], [("y", [1, 6, 5, 7])], inits), {"x": f32(1, 6, 5, 7)}, 5)


def test_bn_head_and_clip():
    inits = {"mc": f32(5, 1, 1), "ac": f32(5, 1, 1), "lo": np.array(-0.25, np.float32),
             "hi": np.array(0.5, np.float32), **bn_inits("bn", 5)}
    nodes = [helper.make_node("Concat", ["x", "z"], ["cat"], axis=1), bn("bn", "cat", "n"),
             helper.make_node("Mul", ["n", "mc"], ["m"]), helper.make_node("Add", ["m", "ac"], ["a"]),
             helper.make_node("Clip", ["a", "lo", "hi"], ["y"])]
    feeds = {"x": f32(2, 3, 4, 4), "z": f32(2, 2, 4, 4)}
    check(model(nodes, [("x", [2, 3, 4, 4]), ("z", [2, 2, 4, 4])], [("y", [2, 5, 4, 4])], inits), feeds, 4)


def test_gemm_and_matmul_heads():
    inits = {"B": f32(16, 8), "C": f32(8), "M": f32(8, 8)}
    nodes = [helper.make_node("Gemm", ["x", "B", "C"], ["g"]), helper.make_node("Relu", ["g"], ["r"]),
             helper.make_node("MatMul", ["r", "M"], ["mm"]), helper.make_node("Sigmoid", ["mm"], ["y"])]
    check(model(nodes, [("x", [3, 16])], [("y", [3, 8])], inits), {"x": f32(3, 16)}, 2)


def test_no_fusion_when_intermediate_has_other_readers():
    inits = {"w": f32(4, 4, 1, 1)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Relu", ["c"], ["y"]),
             helper.make_node("Sigmoid", ["c"], ["z"])]
    check(model(nodes, [("x", [1, 4, 3, 3])], [("y", [1, 4, 3, 3]), ("z", [1, 4, 3, 3]), ("c", [1, 4, 3, 3])], inits), {"x": f32(1, 4, 3, 3)}, 0)
    # the Conv output is a graph output: the Relu cannot overwrite it
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Relu", ["c"], ["y"])]
    check(model(nodes, [("x", [1, 4, 3, 3])], [("y", [1, 4, 3, 3]), ("c", [1, 4, 3, 3])], inits), {"x": f32(1, 4, 3, 3)}, 0)


def test_no_inplace_when_broadcast_grows_the_tensor():
    inits = {"w": f32(4, 4, 1, 1), "big": f32(2, 4, 3, 3)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Add", ["c", "big"], ["y"])]
    check(model(nodes, [("x", [1, 4, 3, 3])], [("y", [2, 4, 3, 3])], inits), {"x": f32(1, 4, 3, 3)}, 0)


def test_errors_name_the_head_node():
    inits = {"w": f32(4, 4, 1, 1)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Relu", ["c"], ["y"])]
    graph = load_model(model(nodes, [("x", [1, 4, 3, 3])], [("y", [1, 4, 3, 3])], inits)).graph
    prog = GraphProgram(graph)
    assert prog.fused_nodes == 1
    with pytest.raises(Exception, match="Conv_0"):
        prog.run([np.zeros((1, 5, 3, 3), np.float32)])
