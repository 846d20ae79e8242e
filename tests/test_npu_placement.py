"""Heterogeneous placement under the fp16 NPU (issue 31): the cheap boolean
ops of attention masks and NaN guards run on the emulated NPU (no NPU -> ORT
-> NPU per layer), island merging is cost-based for any island size, and
exactness of what the NPU computes in its boolean/integer ops."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("nnrt_npu_emu")

from nnrt_core import ScheduleConfig, Session  # noqa: E402
from nnrt_core.backend import CompileOptions  # noqa: E402
from nnrt_core.frontends import load_onnx  # noqa: E402
from nnrt_core.placement import merge_islands, partition_graph  # noqa: E402
from nnrt_npu_emu.backend import NpuEmuBackend  # noqa: E402

NPU_CFG = dict(backends=["npu_emu", "onnxruntime"], precision="fp16")


def _ort(m: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def attention_model(layers: int = 3, seq: int = 8, dim: int = 16, seed: int = 0) -> onnx.ModelProto:
    """``layers`` single-head attention layers as PyTorch exports them: a
    boolean mask from an int64 attention mask (Cast, And, Where to -inf) and
    the NaN guard ``Where(IsNaN(p), 0, p)`` after every Softmax."""
    rng = np.random.default_rng(seed)
    inits = [nh.from_array(np.array(0.0, np.float32), "zero"), nh.from_array(np.array(-np.inf, np.float32), "ninf"),
             nh.from_array(np.array([1], np.int64), "ax1"), nh.from_array(np.array(dim ** -0.5, np.float32), "scale"),
             nh.from_array(np.tril(np.ones((seq, seq), bool)), "causal")]
    nodes = [h.make_node("Cast", ["mask"], ["mb"], to=T.BOOL, name="mask_cast"),
             h.make_node("Unsqueeze", ["mb", "ax1"], ["mb3"], name="mask_unsq"),
             h.make_node("And", ["mb3", "causal"], ["allowed"], name="mask_and"),
             h.make_node("Where", ["allowed", "zero", "ninf"], ["bias"], name="mask_where")]
    x = "x"
    for i in range(layers):
        for w in "qkvo":
            inits.append(nh.from_array((rng.standard_normal((dim, dim)) / dim ** 0.5).astype(np.float32), f"w{w}{i}"))
            nodes.append(h.make_node("MatMul", [x if w != "o" else f"att{i}", f"w{w}{i}"], [f"{w}{i}"], name=f"mm{w}{i}"))
            if w == "v":
                nodes += [h.make_node("Transpose", [f"k{i}"], [f"kt{i}"], perm=[0, 2, 1], name=f"kt{i}"),
                          h.make_node("MatMul", [f"q{i}", f"kt{i}"], [f"s{i}"], name=f"qk{i}"),
                          h.make_node("Mul", [f"s{i}", "scale"], [f"ss{i}"], name=f"scale{i}"),
                          h.make_node("Add", [f"ss{i}", "bias"], [f"sb{i}"], name=f"bias{i}"),
                          h.make_node("Softmax", [f"sb{i}"], [f"p{i}"], axis=-1, name=f"softmax{i}"),
                          h.make_node("IsNaN", [f"p{i}"], [f"nan{i}"], name=f"isnan{i}"),
                          h.make_node("Where", [f"nan{i}", "zero", f"p{i}"], [f"pg{i}"], name=f"guard{i}"),
                          h.make_node("MatMul", [f"pg{i}", f"v{i}"], [f"att{i}"], name=f"pv{i}")]
        nodes.append(h.make_node("Add", [x, f"o{i}"], [f"h{i}"], name=f"res{i}"))
        x = f"h{i}"
    nodes.append(h.make_node("Identity", [x], ["y"], name="out"))
    g = h.make_graph(nodes, "attention", [h.make_tensor_value_info("x", T.FLOAT, [1, seq, dim]),
                                          h.make_tensor_value_info("mask", T.INT64, [1, seq])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, seq, dim])], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def test_nan_guard_and_mask_run_on_the_npu_without_ping_pong():
    m = attention_model(layers=3)
    feeds = {"x": np.random.default_rng(1).standard_normal((1, 8, 16)).astype(np.float32),
             "mask": np.array([[1, 1, 1, 1, 1, 1, 0, 0]], np.int64)}
    sess = Session(m, ScheduleConfig(**NPU_CFG))
    # before: IsNaN/Where/And/Cast were not on the NPU: 1 + 2 per layer partitions
    assert [p.backend for p in sess.partitions] == ["npu_emu"]
    y = sess.run(feeds)["y"]
    ref = _ort(m, feeds)[0]
    assert y.shape == ref.shape
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) < 2e-2


def _logic_model() -> onnx.ModelProto:
    x, c = "x", "c"
    nodes = [h.make_node("IsNaN", [x], ["isnan"]),
             h.make_node("Equal", [x, c], ["eq"]), h.make_node("Less", [x, c], ["lt"]),
             h.make_node("Greater", [x, c], ["gt"]), h.make_node("LessOrEqual", [x, c], ["le"]),
             h.make_node("GreaterOrEqual", [x, c], ["ge"]),
             h.make_node("Or", ["isnan", "lt"], ["or_"]), h.make_node("Xor", ["le", "ge"], ["xor"]),
             h.make_node("Not", ["eq"], ["ne"]), h.make_node("And", ["ne", "gt"], ["and_"]),
             h.make_node("Where", ["or_", x, c], ["sel"]),
             h.make_node("Equal", ["ids", "zero_i"], ["pad"]),
             h.make_node("Where", ["pad", "ids", "ids2"], ["ids_sel"])]
    outs = ["isnan", "eq", "lt", "gt", "le", "ge", "or_", "xor", "ne", "and_", "pad"]
    g = h.make_graph(
        nodes, "logic", [h.make_tensor_value_info("x", T.FLOAT, [4, 6]), h.make_tensor_value_info("c", T.FLOAT, [4, 6]),
                         h.make_tensor_value_info("ids", T.INT64, [4, 6])],
        [h.make_tensor_value_info(o, T.BOOL, [4, 6]) for o in outs]
        + [h.make_tensor_value_info("sel", T.FLOAT, [4, 6]), h.make_tensor_value_info("ids_sel", T.INT64, [4, 6])],
        [nh.from_array(np.array(0, np.int64), "zero_i"), nh.from_array(np.full((4, 6), 7, np.int64), "ids2")])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def test_boolean_ops_on_fp16_data_are_exact():
    m = _logic_model()
    rng = np.random.default_rng(2)
    # fp16 values (what the chip holds): equal pairs, +-0, NaN, the largest finite fp16, subnormals
    x = rng.standard_normal((4, 6)).astype(np.float16).astype(np.float32)
    c = x.copy()
    c[0] += 1.0
    c[1, :3] = -c[1, :3]
    x[2, 0], x[2, 1], x[2, 2], c[2, 3] = np.nan, 65504.0, -0.0, 0.0
    x[3, 0], c[3, 0] = 6e-8, 0.0
    x[3, 1] = c[3, 1] = np.nan
    feeds = {"x": x, "c": c, "ids": rng.integers(0, 3, (4, 6)).astype(np.int64)}
    sess = Session(m, ScheduleConfig(**NPU_CFG))
    assert {p.backend for p in sess.partitions} == {"npu_emu"}
    got = sess.run(feeds)
    for name, ref in zip([o.name for o in m.graph.output], _ort(m, feeds)):
        assert got[name].dtype == ref.dtype, name
        np.testing.assert_array_equal(got[name], ref, err_msg=name)


def test_isinf_is_declined_on_an_fp16_chip_with_the_reason():
    g = h.make_graph([h.make_node("IsInf", ["x"], ["y"], name="isinf")], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [2, 3])], [h.make_tensor_value_info("y", T.BOOL, [2, 3])])
    graph = load_onnx(h.make_model(g, opset_imports=[h.make_opsetid("", 17)])).graph
    backend = NpuEmuBackend()
    cap16 = backend.capability(graph, CompileOptions(precision="fp16"))
    assert "saturate" in cap16.reason("isinf")
    sess = Session(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), ScheduleConfig(**NPU_CFG))
    x = np.array([[np.inf, -np.inf, 1.0], [np.nan, 7e4, 0.0]], np.float32)
    np.testing.assert_array_equal(sess.run({"x": x})["y"], np.isinf(x))
    assert "saturate" in {p.node: p.rejected for p in sess.placement_report}["isinf"]["npu_emu"]


def test_gather_nd_with_constant_indices_matches_ort():
    idx = np.array([[[0, 1], [1, 0]], [[1, 1], [0, 0]]], np.int64)
    for batch_dims, data_shape, ind, out_shape in ((0, [2, 2, 3], idx, [2, 2, 3]), (1, [2, 2, 3], idx[:, :, :1], [2, 2, 3])):
        g = h.make_graph([h.make_node("GatherND", ["x", "i"], ["y"], batch_dims=batch_dims, name="gnd"),
                          h.make_node("Relu", ["y"], ["z"])], "g",
                         [h.make_tensor_value_info("x", T.FLOAT, data_shape)],
                         [h.make_tensor_value_info("z", T.FLOAT, out_shape)], [nh.from_array(ind, "i")])
        m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
        x = np.arange(12, dtype=np.float32).reshape(data_shape) - 5
        sess = Session(m, ScheduleConfig(**NPU_CFG))
        assert sess.placement["gnd"] == "npu_emu"
        np.testing.assert_array_equal(sess.run({"x": x})["z"], _ort(m, {"x": x})[0])


def test_wide_integer_to_float_cast_stays_off_the_fp16_chip():
    # an int32 accumulator or an int64 id beyond 2048 is not exact in fp16 (2049 -> 2048, 70000 -> saturated)
    for dtype, np_dtype in ((T.INT32, np.int32), (T.INT64, np.int64)):
        g = h.make_graph([h.make_node("Cast", ["a"], ["y"], to=T.FLOAT, name="cast")], "g",
                         [h.make_tensor_value_info("a", dtype, [2, 3])], [h.make_tensor_value_info("y", T.FLOAT, [2, 3])])
        m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
        sess = Session(m, ScheduleConfig(**NPU_CFG))
        assert sess.placement["cast"] == "onnxruntime"
        a = np.array([[70000, 2049, 3], [-1, 0, 123457]], np_dtype)
        np.testing.assert_array_equal(sess.run({"a": a})["y"], a.astype(np.float32))
    # int8 -> float is exact in fp16: on the chip
    g = h.make_graph([h.make_node("Cast", ["a"], ["f"], to=T.FLOAT, name="cast"), h.make_node("Neg", ["f"], ["y"])],
                     "g", [h.make_tensor_value_info("a", T.INT8, [2, 3])], [h.make_tensor_value_info("y", T.FLOAT, [2, 3])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    sess = Session(m, ScheduleConfig(**NPU_CFG))
    assert sess.placement["cast"] == "npu_emu"
    a = np.array([[-128, 127, 3], [-1, 0, 5]], np.int8)
    np.testing.assert_array_equal(sess.run({"a": a})["y"], -a.astype(np.float32))


# ------------------------------------------------------- island merging
def _chain(*ops: str) -> onnx.ModelProto:
    nodes, prev = [], "x"
    for i, op in enumerate(ops):
        out = "y" if i == len(ops) - 1 else f"t{i}"
        nodes.append(h.make_node(op, [prev], [out], name=f"{op.lower()}{i}"))
        prev = out
    g = h.make_graph(nodes, "chain", [h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                     [h.make_tensor_value_info("y", T.FLOAT, [2, 3])])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def test_merge_islands_moves_a_sandwiched_partition_of_any_size_when_it_pays_off():
    # relu0(npu) -> abs1(numpy) -> neg2, neg3, neg4 (npu) -> abs5(numpy) -> relu6(npu)
    g = load_onnx(_chain("Relu", "Abs", "Neg", "Neg", "Neg", "Abs", "Relu")).graph
    names = [n.name for n in g.nodes]
    assignment = dict(zip(names, ["npu", "numpy", "npu", "npu", "npu", "numpy", "npu"]))
    transfer = lambda v, src, dst: 0.0 if src == dst or "npu" not in (src, dst) else 1e-3  # noqa: E731
    kwargs = dict(can_run=lambda n, b: b == "numpy" or not n.startswith("abs"), transfer_seconds=transfer,
                  switch_seconds=lambda b: 1e-5)
    merged, moves = merge_islands(g, assignment, island_seconds=lambda nodes, b: 1e-6 * len(nodes), **kwargs)
    assert [(m.nodes, m.target) for m in moves] == [(["neg2", "neg3", "neg4"], "numpy")]
    assert [p.backend for p in partition_graph(g, merged)] == ["npu", "numpy", "npu"]
    # the same three nodes cost more on numpy than the two transfers they save: no move
    slow = lambda nodes, b: 1e-3 * len(nodes) if b == "numpy" else 1e-6  # noqa: E731
    assert merge_islands(g, assignment, island_seconds=slow, **kwargs)[1] == []
    # a size bound still applies where a scheduler sets one
    assert merge_islands(g, assignment, island_seconds=lambda nodes, b: 1e-6, max_nodes=2, **kwargs)[1] == []


# ------------------------------------------------- shape-carrying values
def duration_model(tokens: int = 6, hop: int = 4, dim: int = 8, seed: int = 3) -> onnx.ModelProto:
    """A TTS duration construct: per-token durations ``Ceil(|w| * scale)``
    and ``Floor(Div(.., 1))`` -> Cast -> ReduceSum / CumSum -> Range / Expand ->
    the audio length (``hop`` samples per frame), beside a float encoder
    (MatMul/Relu) that the NPU takes."""
    rng = np.random.default_rng(seed)
    inits = [nh.from_array(np.array(1.0, np.float32), "scale"), nh.from_array(np.array(1.0, np.float32), "one_f"),
             nh.from_array(np.array(0, np.int64), "zero"), nh.from_array(np.array(1, np.int64), "one"),
             nh.from_array(np.array(hop, np.int64), "hop"), nh.from_array(np.array(0, np.int64), "axis"),
             nh.from_array((rng.standard_normal((dim, dim)) / dim ** 0.5).astype(np.float32), "w_enc")]
    nodes = [h.make_node("MatMul", ["feat", "w_enc"], ["enc"], name="enc"), h.make_node("Relu", ["enc"], ["hid"], name="relu"),
             h.make_node("Abs", ["w"], ["w_abs"], name="abs"),
             h.make_node("Mul", ["w_abs", "scale"], ["w_scaled"], name="mul"),
             h.make_node("Ceil", ["w_scaled"], ["w_ceil"], name="ceil"),
             h.make_node("Div", ["w_ceil", "one_f"], ["w_div"], name="div"),
             h.make_node("Floor", ["w_div"], ["w_floor"], name="floor"),
             h.make_node("Cast", ["w_floor"], ["dur"], to=T.INT64, name="cast"),
             h.make_node("Reshape", ["dur", "minus_one"], ["dur_flat"], name="flat"),
             h.make_node("CumSum", ["dur_flat", "axis"], ["ends"], name="cumsum"),
             h.make_node("ReduceSum", ["dur_flat"], ["frames"], keepdims=0, name="total"),
             h.make_node("Mul", ["frames", "hop"], ["samples"], name="samples"),
             h.make_node("Range", ["zero", "samples", "one"], ["t"], name="range"),
             h.make_node("Cast", ["t"], ["audio"], to=T.FLOAT, name="audio"),
             h.make_node("Reshape", ["samples", "minus_one"], ["samples1"], name="samples1"),
             h.make_node("Expand", ["one_f", "samples1"], ["envelope"], name="expand")]
    inits.append(nh.from_array(np.array([-1], np.int64), "minus_one"))
    g = h.make_graph(nodes, "durations", [h.make_tensor_value_info("feat", T.FLOAT, [tokens, dim]),
                                          h.make_tensor_value_info("w", T.FLOAT, [1, tokens])],
                     [h.make_tensor_value_info("hid", T.FLOAT, [tokens, dim]),
                      h.make_tensor_value_info("ends", T.INT64, [tokens]),
                      h.make_tensor_value_info("audio", T.FLOAT, ["samples"]),
                      h.make_tensor_value_info("envelope", T.FLOAT, ["samples"])], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def _duration_feeds(tokens: int = 6, dim: int = 8) -> dict:
    # durations just above an integer in fp32 but not in fp16 (spacing 1 between 1024 and 2048): Ceil gives n+1 in
    # fp32 and n after an fp16 store
    w = np.array([1024.4, 1500.3, 2000.2, 1100.45, 1300.25, 1800.3], np.float32)[:tokens]
    return {"feat": np.random.default_rng(4).standard_normal((tokens, dim)).astype(np.float32),
            "w": w[None]}


def test_values_that_become_shapes_stay_exact_under_fp16():
    m = duration_model()
    feeds = _duration_feeds()
    ref = dict(zip([o.name for o in m.graph.output], _ort(m, feeds)))
    fp32 = Session(m, ScheduleConfig(backends=["numpy"])).run(feeds)
    sess = Session(m, ScheduleConfig(**NPU_CFG))
    got = sess.run(feeds)
    for name in ref:
        assert got[name].shape == fp32[name].shape == ref[name].shape, name
    np.testing.assert_array_equal(got["ends"], ref["ends"])
    assert got["audio"].shape == (4 * int(np.sum(np.ceil(feeds["w"]))),)
    report = {p.node: p for p in sess.placement_report}
    for node in ("abs", "mul", "ceil", "div", "floor"):
        assert report[node].backend != "npu_emu", node
        assert "becomes a shape" in report[node].rejected["npu_emu"], report[node].rejected
    assert "Range 'range'" in report["floor"].rejected["npu_emu"] or "Reshape" in report["floor"].rejected["npu_emu"]
    assert report["enc"].backend == "npu_emu"  # the float encoder still runs on the NPU


def test_fp16_would_change_the_length_of_the_duration_construct():
    """The construct of the test above does lose samples in fp16: the chip's
    own result for the durations alone (the old plan) is shorter."""
    m = duration_model()
    feeds = _duration_feeds()
    w16 = feeds["w"].astype(np.float16).astype(np.float32)
    assert np.sum(np.ceil(w16)) < np.sum(np.ceil(feeds["w"]))
    # on the chip, the fp32 plan's durations stay exact when no consumer is a shape:
    g = load_onnx(m).graph
    cap = NpuEmuBackend().capability(g, CompileOptions(precision="fp16"))
    assert not cap.supports("ceil") and cap.supports("enc")
    cap32 = NpuEmuBackend().capability(g, CompileOptions(precision="fp16", device="emu-npu-i8"))
    assert "becomes a shape" not in (cap32.reason("ceil") or "")


def test_shape_value_analysis_walks_data_flow_and_stops_at_shape_readers():
    from nnrt_core.ir.shape_values import computes_in_float, shape_value_producers
    g = load_onnx(duration_model()).graph
    by_name = {n.name: n for n in g.nodes}
    marked = {n.name for n in g.nodes if id(n) in shape_value_producers(g)}
    assert {"abs", "mul", "ceil", "div", "floor", "cast", "flat", "total", "samples", "samples1"} <= marked
    assert not marked & {"enc", "relu", "cumsum", "range", "audio", "expand"}  # none feeds a shape
    assert computes_in_float(by_name["floor"]) and computes_in_float(by_name["cast"])
    assert not computes_in_float(by_name["total"])  # int64 arithmetic is exact anywhere
    # Shape reads only the shape of its input: what computes that input is not a shape value
    nodes = [h.make_node("Relu", ["x"], ["r"], name="relu"), h.make_node("Shape", ["r"], ["s"], name="shape"),
             h.make_node("Reshape", ["x", "s"], ["y"], name="reshape")]
    gm = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                      [h.make_tensor_value_info("y", T.FLOAT, [2, 3])])
    g2 = load_onnx(h.make_model(gm, opset_imports=[h.make_opsetid("", 17)])).graph
    assert {n.name for n in g2.nodes if id(n) in shape_value_producers(g2)} == {"shape"}
    assert not computes_in_float(next(n for n in g2.nodes if n.name == "shape"))


# ------------------------------------------------------- dynamic int8
def test_dynamically_quantized_accumulators_never_reach_fp16(tmp_path):
    """``quantize_dynamic`` writes MatMulInteger (int32 accumulation) -> Cast
    -> Mul(scale): the float accumulator (~1e5 here) was the input of an NPU
    Mul, saturated by the chip's fp16 input store and moved to the backup
    after the first run (``overflow_fallback``).  Now the Mul is declined up
    front with the reason, and the result is ONNX Runtime's."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    rng = np.random.default_rng(0)
    d = 64
    nodes = [h.make_node("MatMul", ["x", "w0"], ["a"]), h.make_node("Relu", ["a"], ["b"]),
             h.make_node("MatMul", ["b", "w1"], ["y"])]
    g = h.make_graph(nodes, "mlp", [h.make_tensor_value_info("x", T.FLOAT, [1, 16, d])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 16, d])],
                     [nh.from_array((rng.standard_normal((d, d)) * 0.5).astype(np.float32), f"w{i}") for i in range(2)])
    src, dst = tmp_path / "mlp.onnx", tmp_path / "mlp_dyn.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), src)
    quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8)
    m = onnx.load(dst)
    assert "MatMulInteger" in {n.op_type for n in m.graph.node}
    x = (rng.standard_normal((1, 16, d)) * 3).astype(np.float32)
    sess = Session(m, ScheduleConfig(**NPU_CFG))
    y = sess.run({"x": x})["y"]
    assert not [e for e in sess.events if e.kind == "overflow_fallback"]
    np.testing.assert_allclose(y, _ort(m, {"x": x})[0], rtol=1e-6, atol=1e-6 * float(np.abs(y).max()))
    acc_readers = [p for p in sess.placement_report if "float of the int32 value" in p.rejected.get("npu_emu", "")]
    assert acc_readers and all(p.backend != "npu_emu" for p in acc_readers)


def test_a_float_that_becomes_a_wide_integer_is_computed_off_the_fp16_chip():
    """A bias quantized at run time (``Floor(b / (sx * sw))`` -> Cast int32, as
    a dynamically quantized ConvInteger's): fp16 would round 12345.6 / 0.5 to
    a multiple of 16."""
    g = h.make_graph([h.make_node("Div", ["b", "s"], ["q"], name="div"), h.make_node("Floor", ["q"], ["f"], name="floor"),
                      h.make_node("Cast", ["f"], ["y"], to=T.INT32, name="cast"),
                      h.make_node("Relu", ["b"], ["r"], name="relu")], "g",
                     [h.make_tensor_value_info("b", T.FLOAT, [2, 4]), h.make_tensor_value_info("s", T.FLOAT, [])],
                     [h.make_tensor_value_info("y", T.INT32, [2, 4]), h.make_tensor_value_info("r", T.FLOAT, [2, 4])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    sess = Session(m, ScheduleConfig(**NPU_CFG))
    report = {p.node: p for p in sess.placement_report}
    for node in ("div", "floor"):
        assert report[node].backend != "npu_emu"
        assert "becomes an integer" in report[node].rejected["npu_emu"], report[node].rejected
    assert report["relu"].backend == "npu_emu"
    feeds = {"b": np.array([[12345.6, -3000.3, 7.0, 65000.0], [1.5, 2.5, -1e4, 4097.0]], np.float32),
             "s": np.array(0.5, np.float32)}
    np.testing.assert_array_equal(sess.run(feeds)["y"], _ort(m, feeds)[0])
