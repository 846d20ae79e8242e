"""Exact GELU spelled out as Div / Erf / Add / Mul / Mul (nnrt_numpy/fusion_gelu.py) runs as one
tail of the producing chain, in the three Mul orders, and gives the unfused numbers; look-alikes
are left alone."""
from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from nnrt_core import ScheduleConfig, Session
from nnrt_core.errors import OpError
from nnrt_core import load_model
import nnrt_numpy.backend  # noqa: F401  (registers the kernels)
from nnrt_numpy.program import GraphProgram

RNG = np.random.default_rng(1)


def gelu_model(order: str = "xa_half", root2: float = math.sqrt(2.0), one: float = 1.0, half: float = 0.5,
               scale_op: str = "Div", extra_reader: bool = False, dtype=TensorProto.FLOAT) -> object:
    """Conv 1x1 -> exact GELU spelled out (``order``: how the two Muls are arranged)."""
    npdt = np.float32 if dtype == TensorProto.FLOAT else np.float64
    w = RNG.standard_normal((8, 4, 1, 1)).astype(npdt)
    inits = {"w": w, "r2": np.array(root2 if scale_op == "Div" else 1 / root2, npdt), "one": np.array(one, npdt),
             "half": np.array(half, npdt)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]),
             helper.make_node(scale_op, ["c", "r2"], ["d"]),
             helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["a"])]
    if order == "xa_half":  # (x * a) * 0.5
        nodes += [helper.make_node("Mul", ["c", "a"], ["m"]), helper.make_node("Mul", ["m", "half"], ["y"])]
    elif order == "x_ahalf":  # x * (a * 0.5)
        nodes += [helper.make_node("Mul", ["a", "half"], ["m"]), helper.make_node("Mul", ["c", "m"], ["y"])]
    else:  # (x * 0.5) * a
        nodes += [helper.make_node("Mul", ["c", "half"], ["m"]), helper.make_node("Mul", ["m", "a"], ["y"])]
    outputs = [helper.make_tensor_value_info("y", dtype, ["N", 8, 5, 6])]
    if extra_reader:
        outputs.append(helper.make_tensor_value_info("e", dtype, ["N", 8, 5, 6]))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", dtype, ["N", 4, 5, 6])], outputs,
                          [numpy_helper.from_array(a, n) for n, a in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def run_both(m, x):
    graph = load_model(m).graph
    fused, plain = GraphProgram(graph), GraphProgram(graph, fuse=False)
    return fused.run([x]), plain.run([x]), fused


@pytest.mark.parametrize("order", ["xa_half", "x_ahalf", "x_half_a"])
@pytest.mark.parametrize("scale_op", ["Div", "Mul"])
def test_spelled_out_gelu_is_one_tail_of_the_conv(order, scale_op):
    x = (RNG.standard_normal((3, 4, 5, 6)) * 3).astype(np.float32)
    m = gelu_model(order, scale_op=scale_op)
    got, want, prog = run_both(m, x)
    assert prog.fused_nodes == 5 and len(prog.steps) == 1
    np.testing.assert_allclose(got[0], want[0], rtol=2e-6, atol=2e-6)
    out = Session(m, ScheduleConfig(backends=["numpy"])).run({"x": x})
    np.testing.assert_allclose(out["y"], want[0], rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("kw", [{"root2": 1.5}, {"one": 2.0}, {"half": 0.25}, {"extra_reader": True},
                                {"dtype": TensorProto.DOUBLE}])
def test_gelu_look_alikes_are_not_fused(kw):
    npdt = np.float64 if kw.get("dtype") == TensorProto.DOUBLE else np.float32
    x = RNG.standard_normal((2, 4, 5, 6)).astype(npdt)
    got, want, prog = run_both(gelu_model(**kw), x)
    assert not any(st.chain is not None and "Erf" in [n.op_type for n in st.chain.nodes] for st in prog.steps)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def test_gelu_op_kernel_and_tail_match_the_formula():
    from scipy.special import erf

    x = (RNG.standard_normal((2, 8, 5, 6)) * 4).astype(np.float32)
    w = RNG.standard_normal((8, 8, 1, 1)).astype(np.float32)
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Gelu", ["c"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8, 5, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8, 5, 6])],
                          [numpy_helper.from_array(w, "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
    m.ir_version = 9
    got, want, prog = run_both(m, x)
    assert prog.fused_nodes == 1
    c = np.einsum("oi,nihw->nohw", w[:, :, 0, 0].astype(np.float64), x.astype(np.float64))
    exact = c * 0.5 * (1 + erf(c / math.sqrt(2)))
    np.testing.assert_allclose(got[0], exact, rtol=1e-5, atol=2e-6)
    np.testing.assert_allclose(want[0], exact, rtol=1e-5, atol=2e-6)


def test_fused_gelu_names_the_chain_on_a_bad_input():
    prog = GraphProgram(load_model(gelu_model()).graph)
    with pytest.raises(OpError, match=r"\(Conv\): input channels 3 != weight channels 4"):
        prog.run([np.ones((2, 3, 5, 6), np.float32)])  # 3 channels where the Conv's weights have 4
