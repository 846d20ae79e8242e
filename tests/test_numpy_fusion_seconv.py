"""A squeeze-excite block and the 1x1 Conv reading its output run as one step
(nnrt_numpy/fusion_seconv.py: the Conv's weights scaled per image instead of the map): the
unfused graph's and ONNX Runtime's numbers to float32 rounding, with the Conv's own tails,
and lookalikes left alone."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from nnrt_core import ScheduleConfig, Session
from nnrt_core import load_model
import nnrt_numpy.backend  # noqa: F401  (registers the kernels)
from nnrt_numpy.program import GraphProgram

RNG = np.random.default_rng(5)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def se_conv_model(after: str = "plain", conv_kw: dict | None = None, extra_reader: bool = False,
                  se_output: bool = False, c: int = 12, m: int = 5):
    """x (N, c, H, W) -> SE block (GlobalAveragePool, 1x1, Relu, 1x1, HardSigmoid, Mul) -> y ->
    Conv 1x1 (c -> m) -> ``after``: ``plain``, ``residual`` (Add of a second input z),
    ``hswish`` (HardSwish), ``bn`` (BatchNormalization: folded into the Conv)."""
    inits = {"w1": f32(3, c, 1, 1), "b1": f32(3), "w2": f32(c, 3, 1, 1), "b2": f32(c),
             "wp": f32(m, c, 1, 1) * 0.3, "bp": f32(m),
             "bs": RNG.uniform(0.5, 1.5, m).astype(np.float32), "bb": f32(m), "bm": f32(m),
             "bv": RNG.uniform(0.5, 2, m).astype(np.float32)}
    nodes = [helper.make_node("GlobalAveragePool", ["x"], ["g"]), helper.make_node("Conv", ["g", "w1", "b1"], ["s1"]),
             helper.make_node("Relu", ["s1"], ["s2"]), helper.make_node("Conv", ["s2", "w2", "b2"], ["s3"]),
             helper.make_node("HardSigmoid", ["s3"], ["s4"], alpha=0.2, beta=0.5),
             helper.make_node("Mul", ["x", "s4"], ["y"]),
             helper.make_node("Conv", ["y", "wp", "bp"], ["p"], **(conv_kw or {}))]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", c, "H", "W"])]
    if after == "residual":
        nodes.append(helper.make_node("Add", ["p", "z"], ["out"]))
        inputs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", m, "H", "W"]))
    elif after == "hswish":
        nodes.append(helper.make_node("HardSwish", ["p"], ["out"]))
    elif after == "bn":
        nodes.append(helper.make_node("BatchNormalization", ["p", "bs", "bb", "bm", "bv"], ["out"]))
    else:
        nodes.append(helper.make_node("Identity", ["p"], ["out"]))
    spatial = ["Ho", "Wo"] if conv_kw else ["H", "W"]  # strides / pads change the Conv's output size
    outputs = [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["N", m] + spatial)]
    if extra_reader:
        nodes.append(helper.make_node("Relu", ["y"], ["r"]))
        outputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, ["N", c, "H", "W"]))
    if se_output:
        outputs.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", c, "H", "W"]))
    g = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(a, k) for k, a in inits.items()])
    mdl = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    mdl.ir_version = 8
    return mdl


def feeds_for(mdl, n: int, h: int, w: int, m: int = 5) -> dict:
    names = [i.name for i in mdl.graph.input]
    out = {"x": f32(n, 12, h, w)}
    if "z" in names:
        out["z"] = f32(n, m, h, w)
    return out


def merged(prog) -> list:
    return [st for st in prog.steps if type(st.chain).__name__ == "SEConvChain"]


@pytest.mark.parametrize("after", ["plain", "residual", "hswish", "bn"])
@pytest.mark.parametrize("n,h,w", [(1, 2, 96), (3, 5, 7), (2, 1, 1)])
def test_se_and_projection_run_as_one_step(after, n, h, w):
    mdl = se_conv_model(after)
    graph = load_model(mdl).graph
    fused, plain = GraphProgram(graph), GraphProgram(graph, fuse=False)
    steps = merged(fused)
    assert len(steps) == 1
    assert [nd.op_type for nd in steps[0].chain.nodes][-2 if after != "plain" else -1] == "Conv"
    feeds = feeds_for(mdl, n, h, w)
    args = [feeds[v.name] for v in graph.inputs]
    got, want = fused.run(args)[0], plain.run(args)[0]
    assert got.shape == want.shape == (n, 5, h, w) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    ort = pytest.importorskip("onnxruntime")
    ref = ort.InferenceSession(mdl.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
    sess = Session(mdl, ScheduleConfig(backends=["numpy"]))
    np.testing.assert_allclose(sess.run(feeds)["out"], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kw", [{"conv_kw": {"strides": [2, 2]}}, {"extra_reader": True}, {"se_output": True},
                                {"conv_kw": {"pads": [1, 1, 1, 1]}}])
def test_lookalikes_keep_the_separate_steps(kw):
    mdl = se_conv_model(**kw)
    graph = load_model(mdl).graph
    fused, plain = GraphProgram(graph), GraphProgram(graph, fuse=False)
    assert not merged(fused)
    assert any(type(st.chain).__name__ == "SEChain" for st in fused.steps)  # the SE block alone still fuses
    feeds = feeds_for(mdl, 2, 4, 6)
    args = [feeds[v.name] for v in graph.inputs]
    for g, w_ in zip(fused.run(args), plain.run(args)):
        np.testing.assert_allclose(g, w_, rtol=1e-5, atol=1e-5)


def test_merged_step_writes_into_out_and_names_a_bad_input():
    mdl = se_conv_model("residual")
    prog = GraphProgram(load_model(mdl).graph)
    step = merged(prog)[0].chain
    feeds = feeds_for(mdl, 2, 3, 4)
    want = prog.run([feeds["x"], feeds["z"]])[0]
    i = [v.name for v in step.inputs].index("z")
    args = [feeds["x"]] + [None] * (len(step.inputs) - 1)
    args[i] = feeds["z"]
    out = np.full_like(want, np.nan)
    assert step.run(*args, out=out)[0] is out
    np.testing.assert_array_equal(out, want)
    with pytest.raises(ValueError, match="expected \\(N, 12, H, W\\)"):
        step.run(np.zeros((2, 7, 3, 4), np.float32), *args[1:])


def test_merged_step_splits_its_product_like_the_conv(monkeypatch):
    """On idle cores the merged product splits over threads as the 1x1 Conv's would: the same
    numbers to float32 rounding."""
    from nnrt_numpy import parallel
    mdl = se_conv_model("residual")
    graph = load_model(mdl).graph
    prog, plain = GraphProgram(graph), GraphProgram(graph, fuse=False)
    feeds = feeds_for(mdl, 4, 16, 40)
    args = [feeds[v.name] for v in graph.inputs]
    calls: list[int] = []
    run_chunks = parallel.run_chunks
    monkeypatch.setattr(parallel, "run_chunks", lambda fn, n, k=None: (calls.append(n), run_chunks(fn, n, k))[1])
    monkeypatch.setattr(parallel, "SPLIT_US", 0.0)
    monkeypatch.setattr(parallel, "COLD_SPLIT_US", 0.0)
    prev = parallel.set_threads(2)
    try:
        got = prog.run(args)[0]
    finally:
        parallel.set_threads(*prev)
    assert calls and calls[-1] >= 2
    np.testing.assert_allclose(got, plain.run(args)[0], rtol=1e-5, atol=1e-5)
