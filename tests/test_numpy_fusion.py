"""The NumPy backend's compile-time fusion (nnrt_numpy/fusion.py): chains are
found where they are safe, and the fused program gives the unfused numbers."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from nnrt_core import ScheduleConfig, Session
from nnrt_core import load_model
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


def test_matmul_bias_chain_with_symbolic_rows():
    """MatMul -> Add(bias) -> Relu over (N, T, C) with symbolic N and T (a sequence head): fused
    although axis 1 is not static; a per-channel operand on that axis is not (it cannot be checked)."""
    inits = {"M": f32(16, 12), "c": f32(12), "t": f32(1, 5, 1)}
    nodes = [helper.make_node("MatMul", ["x", "M"], ["mm"]), helper.make_node("Add", ["mm", "c"], ["a"]),
             helper.make_node("Relu", ["a"], ["y"])]
    m = model(nodes, [("x", ["N", "T", 16])], [("y", ["N", "T", 12])], inits)
    for shape in [(1, 5, 16), (3, 7, 16)]:
        check(m, {"x": f32(*shape)}, 2)
    nodes = [helper.make_node("MatMul", ["x", "M"], ["mm"]), helper.make_node("Mul", ["mm", "t"], ["y"])]
    check(model(nodes, [("x", ["N", "T", 16])], [("y", ["N", "T", 12])], inits), {"x": f32(2, 5, 16)}, 0)


def test_residual_add_with_other_symbols_fuses_and_still_broadcasts():
    """Exported networks name the sizes of a residual Add's two inputs (and its output) with
    different symbols (``unk__29`` vs ``unk__21``): the Add still fuses into the Conv (in place
    when the sizes agree at run time; broadcast as the node would when they do not)."""
    inits = {"w": f32(4, 4, 1, 1)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Add", ["c", "r"], ["a"]),
             helper.make_node("Relu", ["a"], ["y"])]
    m = model(nodes, [("x", ["N", 4, "H", "W"]), ("r", ["M", 4, "P", "Q"])], [("y", ["K", 4, "S", "T"])], inits)
    check(m, {"x": f32(2, 4, 3, 5), "r": f32(2, 4, 3, 5)}, 2)
    check(m, {"x": f32(1, 4, 3, 5), "r": f32(3, 4, 3, 5)}, 2)  # r broadcasts the Conv's output
    # an operand that broadcasts onto the head's output (channel 1) is added in place
    m2 = model([helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Add", ["c", "r"], ["y"])],
               [("x", ["N", 4, "H", "W"]), ("r", ["N", 1, "H", "W"])], [("y", ["N", 4, "H", "W"])], inits)
    check(m2, {"x": f32(2, 4, 3, 5), "r": f32(2, 1, 3, 5)}, 1)
    # one that would grow it (a static 3 where the head has 1) is not fused
    m2 = model([helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Add", ["c", "r"], ["y"])],
               [("x", ["N", 4, 1, "W"]), ("r", ["N", 4, 3, "W"])], [("y", ["N", 4, 3, "W"])], inits)
    check(m2, {"x": f32(2, 4, 1, 5), "r": f32(2, 4, 3, 5)}, 0)
    # a tail that declares static sizes where the head's are symbolic is not taken (its output
    # buffer could be planned for sizes the head does not produce).  Declared on an intermediate:
    # a graph output's unconfirmed static sizes are not kept in its type (declared_outputs.py)
    m3 = model([helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Relu", ["c"], ["t"]),
                helper.make_node("Neg", ["t"], ["y"])],
               [("x", ["N", 4, "H", "W"])], [("y", ["N", 4, "H", "W"])], inits)
    m3.graph.value_info.append(helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 4, 3, 5]))
    check(m3, {"x": f32(2, 4, 3, 5)}, 0)


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


def _concat_model():
    """Two conv branches (one fused with Relu, one plain), a MaxPool branch that
    cannot be placed, and a conv whose output is also read elsewhere."""
    inits = {"w1": f32(5, 4, 1, 1), "b1": f32(5), "w3": f32(6, 4, 3, 3), "b3": f32(6), "w2": f32(3, 4, 1, 1)}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"]), helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["x", "w3", "b3"], ["c3"], pads=[1, 1, 1, 1]),
             helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["x", "w2"], ["c2"]), helper.make_node("Sigmoid", ["c2"], ["z"]),
             helper.make_node("Concat", ["r1", "c3", "p", "c2"], ["y"], axis=1)]
    return model(nodes, [("x", [1, 4, 6, 7])], [("y", [1, 18, 6, 7]), ("z", [1, 3, 6, 7])], inits)


def test_concat_inputs_are_written_in_place():
    m = _concat_model()
    feeds = {"x": f32(1, 4, 6, 7)}
    got, want, prog = run_both(m, feeds)
    assert prog.placed == 2  # r1 (fused chain) and c3; not the pool nor c2 (read twice)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
    again = prog.run([feeds["x"]])  # a fresh buffer per run: the first result is untouched
    np.testing.assert_array_equal(got[0], again[0])
    assert got[0] is not again[0]


def test_concat_placement_is_thread_safe():
    from concurrent.futures import ThreadPoolExecutor
    graph = load_model(_concat_model()).graph
    prog = GraphProgram(graph)
    xs = [f32(1, 4, 6, 7) for _ in range(8)]
    want = [GraphProgram(graph, fuse=False).run([x])[0] for x in xs]
    with ThreadPoolExecutor(4) as ex:
        for _ in range(5):
            got = list(ex.map(lambda x: prog.run([x])[0], xs))
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def test_concat_placement_needs_leading_unit_dims():
    inits = {"w": f32(3, 4, 1, 1)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Concat", ["c", "x"], ["y"], axis=1)]
    m = model(nodes, [("x", [2, 4, 3, 3])], [("y", [2, 7, 3, 3])], inits)
    got, want, prog = run_both(m, {"x": f32(2, 4, 3, 3)})
    assert prog.placed == 0  # batch 2: a channel slice is not contiguous
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)


@pytest.mark.parametrize("act, params", [("Relu", []), ("LeakyRelu", [0.2]), ("Clip", [-0.1, 0.3]), ("Sigmoid", [])])
def test_fused_conv_uses_the_conv_kernel(act, params):
    """FusedConv (level ``all``) gives the numbers of Conv + activation."""
    from nnrt_numpy.ops.contrib.fused_conv import FusedConv

    w, b, z = f32(6, 4, 3, 3), f32(6), f32(1, 6, 5, 5)
    x = f32(1, 4, 5, 5)
    nodes = [helper.make_node("FusedConv", ["x", "w", "b", "z"], ["y"], domain="com.microsoft", activation=act,
                              pads=[1, 1, 1, 1], **({"activation_params": params} if params else {}))]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 5, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6, 5, 5])],
                          [numpy_helper.from_array(a, n) for n, a in {"w": w, "b": b, "z": z}.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    prog = GraphProgram(load_model(m).graph)
    assert prog.steps[0].kernel.fast is not None
    y = prog.run([x])[0]
    ref = Session(model([helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1])], [("x", [1, 4, 5, 5])],
                        [("c", [1, 6, 5, 5])], {"w": w, "b": b}), ScheduleConfig(backends=["numpy"])).run({"x": x})["c"] + z
    ref = {"Relu": lambda v: np.maximum(v, 0), "LeakyRelu": lambda v: np.where(v < 0, v * np.float32(0.2), v),
           "Clip": lambda v: np.clip(v, np.float32(-0.1), np.float32(0.3)),
           "Sigmoid": lambda v: 1 / (1 + np.exp(-v))}[act](ref)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, ref, rtol=1e-6, atol=1e-6)


# ------------------------------------------------ mobile-network activation tails
def _hswish_nodes(x: str, y: str, mul_first: bool, div: bool) -> list:
    """x * Clip(x + 3, 0, 6) / 6 spelled out (PaddlePaddle's export), in either order."""
    scale = helper.make_node("Div" if div else "Mul", ["p" if mul_first else "r", "six" if div else "sixth"],
                             [y if mul_first else "q"])
    nodes = [helper.make_node("Add", [x, "three"], ["t"]), helper.make_node("Clip", ["t", "zero", "six"], ["r"])]
    if mul_first:
        return nodes + [helper.make_node("Mul", [x, "r"], ["p"]), scale]
    return nodes + [scale, helper.make_node("Mul", ["q", x], [y])]


HS_INITS = {"three": np.array(3, np.float32), "zero": np.array(0, np.float32), "six": np.array(6, np.float32),
            "sixth": np.array(1 / 6, np.float32)}


@pytest.mark.parametrize("mul_first,div", [(True, True), (False, True), (False, False)])
def test_spelled_out_hard_swish_fuses_into_the_conv_bit_for_bit(mul_first, div):
    inits = {"w": f32(6, 1, 3, 3, lo=-4, hi=4), "b": f32(6), **HS_INITS}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], group=6)]
    nodes += _hswish_nodes("c", "y", mul_first, div)
    m = model(nodes, [("x", [2, 6, 7, 9])], [("y", [2, 6, 7, 9])], inits)
    feeds = {"x": f32(2, 6, 7, 9, lo=-3, hi=3)}
    got, want, prog = run_both(m, feeds)
    assert prog.fused_nodes == 4
    np.testing.assert_array_equal(got[0], want[0])  # same operations in the same order
    check(m, feeds, 4)


def test_hard_swish_pattern_with_another_reader_is_not_fused():
    inits = {"w": f32(4, 4, 1, 1), **HS_INITS}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"])] + _hswish_nodes("c", "y", True, True)
    nodes.append(helper.make_node("Relu", ["r"], ["z"]))  # the Clip output is read twice
    m = model(nodes, [("x", [1, 4, 3, 3])], [("y", [1, 4, 3, 3]), ("z", [1, 4, 3, 3])], inits)
    check(m, {"x": f32(1, 4, 3, 3, lo=-5, hi=5)}, 2)  # Add + Clip, and Mul + Div (the Conv stays alone)


@pytest.mark.parametrize("order", [0, 1])
def test_x_times_hard_sigmoid_of_x_fuses_bit_for_bit(order):
    """BatchNormalization -> Mul(y, HardSigmoid(y)) over (N, C, T) (PP-OCRv6 rec tiny's neck): one
    step, bit for bit; with another reader of the HardSigmoid it is not fused."""
    inits = bn_inits("b", 6)
    nodes = [bn("b", "x", "y"), helper.make_node("HardSigmoid", ["y"], ["h"], alpha=0.2, beta=0.5),
             helper.make_node("Mul", ["y", "h"] if order else ["h", "y"], ["z"])]
    m = model(nodes, [("x", ["N", 6, "T"])], [("z", ["N", 6, "T"])], inits)
    x = f32(2, 6, 9, lo=-8, hi=8)
    check(m, {"x": x}, 2)
    got, want, _ = run_both(m, {"x": x})
    np.testing.assert_array_equal(got[0], want[0])
    m2 = model(nodes, [("x", ["N", 6, "T"])], [("z", ["N", 6, "T"]), ("h", ["N", 6, "T"])], inits)
    check(m2, {"x": x}, 0)


def test_hard_sigmoid_and_hard_swish_tails():
    inits = {"w": f32(5, 5, 1, 1), "w2": f32(5, 5, 1, 1)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("HardSigmoid", ["c"], ["h"], alpha=0.3),
             helper.make_node("Conv", ["h", "w2"], ["d"]), helper.make_node("HardSwish", ["d"], ["y"])]
    m = model(nodes, [("x", [2, 5, 4, 4])], [("y", [2, 5, 4, 4])], inits)
    feeds = {"x": f32(2, 5, 4, 4, lo=-8, hi=8)}
    got, want, prog = run_both(m, feeds)
    assert prog.fused_nodes == 2
    np.testing.assert_array_equal(got[0], want[0])
    check(m, feeds, 2)


def test_squeeze_excite_with_symbolic_batch_and_size_fuses():
    """GlobalAveragePool -> Conv -> Relu -> Conv -> HardSigmoid -> Mul, with a free batch and
    free spatial sizes (symbolic dims, channels static), as exported mobile networks have."""
    inits = {"w": f32(8, 8, 1, 1), "w1": f32(2, 8, 1, 1), "b1": f32(2), "w2": f32(8, 2, 1, 1), "b2": f32(8)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["g"]),
             helper.make_node("Conv", ["g", "w1", "b1"], ["s1"]), helper.make_node("Relu", ["s1"], ["s2"]),
             helper.make_node("Conv", ["s2", "w2", "b2"], ["s3"]), helper.make_node("HardSigmoid", ["s3"], ["s4"]),
             helper.make_node("Mul", ["r", "s4"], ["y"])]
    m = model(nodes, [("x", ["N", 8, "H", "W"])], [("y", ["N", 8, "H", "W"])], inits)
    for shape in [(1, 8, 5, 6), (3, 8, 2, 9)]:
        check(m, {"x": f32(*shape)}, 6)  # Conv+Relu, and the whole block as one step (fusion_se)
        got, want, prog = run_both(m, {"x": f32(*shape)})
        np.testing.assert_array_equal(got[0], want[0])  # the same operations: bit for bit
        assert [type(st.chain).__name__ for st in prog.steps] == ["Chain", "SEChain"]


def _se_model(relu: bool = True, act: str = "HardSigmoid", mul_other: bool = False, extra_output: str | None = None,
              bias: bool = True, pool: dict | None = None, opset: int = 17):
    """x -> SE block -> y (GlobalAveragePool, or ReduceMean with ``pool``'s attributes / axes input,
    1x1 Conv, [Relu], 1x1 Conv, act, Mul)."""
    inits = {"w1": f32(3, 12, 1, 1), "w2": f32(12, 3, 1, 1)}
    if bias:
        inits.update(b1=f32(3), b2=f32(12))
    if pool is None:
        first = helper.make_node("GlobalAveragePool", ["x"], ["g"])
    elif "axes_input" in pool:
        inits["ax"] = np.array(pool["axes_input"], np.int64)
        first = helper.make_node("ReduceMean", ["x", "ax"], ["g"], **{k: v for k, v in pool.items() if k != "axes_input"})
    else:
        first = helper.make_node("ReduceMean", ["x"], ["g"], **pool)
    nodes = [first, helper.make_node("Conv", ["g", "w1"] + (["b1"] if bias else []), ["s1"])]
    if relu:
        nodes.append(helper.make_node("Relu", ["s1"], ["s2"]))
    nodes += [helper.make_node("Conv", ["s2" if relu else "s1", "w2"] + (["b2"] if bias else []), ["s3"]),
              helper.make_node(act, ["s3"], ["s4"], **({"alpha": 0.25, "beta": 0.4} if act == "HardSigmoid" else {})),
              helper.make_node("Mul", ["s4", "z" if mul_other else "x"], ["y"])]
    inputs = [("x", [2, 12, 4, 7])] + ([("z", [2, 12, 4, 7])] if mul_other else [])
    outputs = [("y", [2, 12, 4, 7])] + ([(extra_output, [2, 12, 1, 1])] if extra_output else [])
    if "ax" in inits:  # an int64 initializer: model() makes float ones
        m = model(nodes, inputs, outputs, {k: v for k, v in inits.items() if k != "ax"}, opset=opset)
        m.graph.initializer.append(numpy_helper.from_array(inits["ax"], "ax"))
        return m
    return model(nodes, inputs, outputs, inits, opset=opset)


@pytest.mark.parametrize("pool,opset,fused", [({"axes": [2, 3]}, 11, True), ({"axes": [-1, -2], "keepdims": 1}, 13, True),
                                              ({"axes_input": [2, 3]}, 18, True), ({"axes": [3]}, 11, False),
                                              ({"axes_input": [3]}, 18, False)])
def test_squeeze_excite_with_reduce_mean_pooling(pool, opset, fused):
    """PaddlePaddle's SE blocks pool with ReduceMean(axes=[2, 3], keepdims=1): one step too (the
    mean to float rounding); a ReduceMean over other axes is left alone."""
    m = _se_model(pool=pool, opset=opset)
    feeds = {"x": f32(2, 12, 4, 7)}
    got, want, prog = run_both(m, feeds)
    assert any(type(st.chain).__name__ == "SEChain" for st in prog.steps) == fused
    assert (len(prog.steps) == 1) == fused
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=1e-6)
    ort = pytest.importorskip("onnxruntime")
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(got[0], ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("relu,bias", [(True, True), (False, True), (True, False)])
def test_squeeze_excite_block_runs_as_one_step_bit_for_bit(relu, bias):
    m = _se_model(relu=relu, bias=bias)
    feeds = {"x": f32(2, 12, 4, 7)}
    got, want, prog = run_both(m, feeds)
    assert len(prog.steps) == 1 and type(prog.steps[0].chain).__name__ == "SEChain"
    np.testing.assert_array_equal(got[0], want[0])
    ort = pytest.importorskip("onnxruntime")
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(got[0], ref, rtol=1e-5, atol=1e-6)
    out = np.full_like(want[0], np.nan)  # the arena / Concat placement hands the step its output buffer
    assert prog.steps[0].chain.run(feeds["x"], out=out)[0] is out
    np.testing.assert_array_equal(out, want[0])


@pytest.mark.parametrize("kw", [{"act": "Sigmoid"}, {"mul_other": True}, {"extra_output": "s3"}])
def test_squeeze_excite_lookalikes_are_not_fused_as_a_block(kw):
    m = _se_model(**kw)
    feeds = {"x": f32(2, 12, 4, 7)}
    if kw.get("mul_other"):
        feeds["z"] = f32(2, 12, 4, 7)
    got, want, prog = run_both(m, feeds)
    assert all(type(st.chain).__name__ != "SEChain" for st in prog.steps)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def test_squeeze_excite_step_names_a_bad_input():
    m = _se_model()
    prog = run_both(m, {"x": f32(2, 12, 4, 7)})[2]
    with pytest.raises(ValueError, match="expected \\(N, 12, H, W\\)"):
        prog.steps[0].chain.run(np.zeros((2, 5, 4, 7), np.float32))


def test_squeeze_excite_step_takes_strided_inputs_and_outputs():
    """The scale runs as (N * C, H * W) rows on contiguous arrays and broadcasts otherwise: the
    same values either way."""
    m = _se_model()
    x = f32(2, 12, 4, 7)
    got, want, prog = run_both(m, {"x": x})
    step = prog.steps[0].chain
    xt = np.ascontiguousarray(x.transpose(0, 1, 3, 2)).transpose(0, 1, 3, 2)  # x's values, not C-contiguous
    np.testing.assert_array_equal(step.run(xt)[0], want[0])
    big = np.full((2, 12, 4, 14), np.nan, np.float32)
    out = big[..., ::2]  # a strided output buffer
    assert step.run(x, out=out)[0] is out
    np.testing.assert_array_equal(out, want[0])
