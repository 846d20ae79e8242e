"""ORT partitions loaded from their stored optimized graph feed their large
weights as graph inputs (views of the stored bytes) instead of handing them
over as initializers, which ONNX Runtime copies when it creates a session."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from nnrt_core import ScheduleConfig, Session
from nnrt_core.frontends.onnx import ExternalWeights
from nnrt_core.runtime.thread_budget import use_thread_budget
from nnrt_core.storage.session_file import encode
from nnrt_onnxruntime.offline import FEED_MIN_BYTES, feed_as_inputs

BIG = FEED_MIN_BYTES // 4  # float32 elements of a weight just big enough to be fed


def _cnn() -> bytes:
    """Conv (64x32x3x3 weight) -> Max with a constant (not a feedable kernel) -> Flatten -> MatMul (16384x16)."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((64, 32, 3, 3)).astype(np.float32) * 0.1, "w"),
             numpy_helper.from_array(rng.standard_normal((64, 16, 16)).astype(np.float32), "floor"),
             numpy_helper.from_array(rng.standard_normal((64 * 16 * 16, 16)).astype(np.float32) * 0.01, "fc")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Max", ["c", "floor"], ["m"], name="max"),
             helper.make_node("Flatten", ["m"], ["f"], name="flatten"),
             helper.make_node("MatMul", ["f", "fc"], ["y"], name="fc")]
    g = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 16, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    return m.SerializeToString()


def _ort_partition(sess):
    return next(s.compiled for s in sess.executor.steps if s.backend.name == "onnxruntime")


def test_warm_partition_feeds_its_weights_and_matches_the_cold_one(tmp_path):
    x = {"x": np.random.default_rng(1).standard_normal((1, 32, 16, 16)).astype(np.float32)}
    cfg = ScheduleConfig(backends=["onnxruntime"], cache_dir=str(tmp_path), num_threads=1)
    cold = Session(_cnn(), cfg)
    assert _ort_partition(cold).describe()["weights_fed"] == 0  # ORT optimizes this one: constants stay
    data = np.frombuffer(encode(cold.to_image()), np.uint8).copy()
    data.flags.writeable = False  # as Ray's object store hands it over: used in place
    warm = Session(memoryview(data))
    part = _ort_partition(warm)
    info = part.describe()
    assert info["stored_form"] == "optimized" and info["weights_fed"] >= 2
    ort_inputs = {i.name for i in part.session.get_inputs()}
    assert "x" in ort_inputs and len(ort_inputs) == 1 + info["weights_fed"]
    want = cold.run(x)["y"]
    assert warm.executor.direct is not None  # the plain runs' direct path feeds the weights too
    np.testing.assert_allclose(warm.run(x)["y"], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(warm.executor.run(x)[0], want, rtol=1e-5, atol=1e-5)
    # a run given a smaller thread budget goes to a second ORT session: it gets the weights too
    adaptive = Session(memoryview(encode(Session(_cnn(), cfg.replace(num_threads=0)).to_image())))
    with use_thread_budget(1):
        np.testing.assert_allclose(adaptive.run(x)["y"], want, rtol=1e-5, atol=1e-5)
    assert warm.profile(x).to_dict()["traceEvents"]  # the profiling session is fed too


def _external(model: onnx.ModelProto) -> tuple[bytes, ExternalWeights]:
    """``model`` with its initializers external (location "w.bin"), and them as arrays."""
    ext = ExternalWeights("w.bin", min_bytes=0)
    kept = []
    for t in model.graph.initializer:
        ref = ext.take(numpy_helper.to_array(t), t.name)
        kept.append(ref if ref is not None else t)
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)
    return model.SerializeToString(), ext


def test_feed_as_inputs_keeps_small_unknown_and_sub_graph_weights():
    big = np.ones((BIG,), np.float32)
    small = np.ones((BIG // 2,), np.float32)
    then = helper.make_graph([helper.make_node("Add", ["a", "in_if"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", TensorProto.FLOAT, [BIG])])
    other = helper.make_graph([helper.make_node("Identity", ["a"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", TensorProto.FLOAT, [BIG])])
    nodes = [helper.make_node("Add", ["a", "fed"], ["s1"]),          # fed: big, Add only
             helper.make_node("Mul", ["s1", "small"], ["s2"]),       # small: too small
             helper.make_node("Max", ["s2", "unknown"], ["s3"]),     # Max is no feedable kernel
             helper.make_node("Add", ["s3", "mixed"], ["s4"]),
             helper.make_node("Max", ["s4", "mixed"], ["s5"]),       # mixed: one use is not feedable
             helper.make_node("If", ["cond"], ["s6"], then_branch=then, else_branch=other),
             helper.make_node("Add", ["s5", "s6"], ["y"]),
             helper.make_node("Add", ["a", "as_output"], ["s7"])]  # as_output is also a graph output
    inits = [numpy_helper.from_array(v, n) for n, v in (("fed", big), ("small", small), ("unknown", big),
                                                         ("mixed", big), ("in_if", big), ("as_output", big))]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [BIG]),
                                       helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [BIG]),
                           helper.make_tensor_value_info("s7", TensorProto.FLOAT, [BIG]),
                           helper.make_tensor_value_info("as_output", TensorProto.FLOAT, [BIG])], inits)
    model, ext = _external(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    out, rest, fed = feed_as_inputs(model, ext)
    assert list(fed) == ["fed"] and fed["fed"] is ext.arrays[ext.names.index("fed")]
    assert sorted(rest.names) == ["as_output", "in_if", "mixed", "small", "unknown"]
    proto = onnx.load_model_from_string(out)
    assert [i.name for i in proto.graph.input] == ["a", "cond", "fed"]
    assert proto.graph.input[2].type.tensor_type.shape.dim[0].dim_value == BIG
    assert "fed" not in {t.name for t in proto.graph.initializer}
    # nothing to feed: the model comes back as it was
    none_model, _ = _external(helper.make_model(
        helper.make_graph([helper.make_node("Max", ["a", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT, [BIG])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [BIG])],
                          [numpy_helper.from_array(big, "w")]), opset_imports=[helper.make_opsetid("", 17)]))
    assert feed_as_inputs(none_model, _external_weights_of(none_model))[2] == {}


def _external_weights_of(model: bytes) -> ExternalWeights:
    from nnrt_onnxruntime.offline import external_arrays

    return external_arrays(model, np.ones(FEED_MIN_BYTES, np.uint8), "test", "w.bin")


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_fed_weight_dtypes_run(tmp_path, dtype):
    """A fed weight of another dtype (Gather's int64 table) runs like the cold session."""
    table = np.arange(BIG, dtype=dtype).reshape(-1, 16)
    g = helper.make_graph([helper.make_node("Gather", ["table", "i"], ["y"], axis=0)], "g",
                          [helper.make_tensor_value_info("i", TensorProto.INT64, [3])],
                          [helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(np.dtype(dtype)),
                                                         [3, 16])], [numpy_helper.from_array(table, "table")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    cfg = ScheduleConfig(backends=["onnxruntime"], cache_dir=str(tmp_path), num_threads=1)
    cold = Session(m.SerializeToString(), cfg)
    warm = Session(encode(cold.to_image()))
    feeds = {"i": np.array([0, 5, 2], np.int64)}
    assert _ort_partition(warm).describe()["weights_fed"] == 1
    np.testing.assert_array_equal(warm.run(feeds)["y"], table[[0, 5, 2]])


def _if_with_branch_weights() -> bytes:
    """If(cond): x + a (1024 floats) else x * b: ORT writes the branch weights external in its optimized graph."""
    rng = np.random.default_rng(1)
    vi = helper.make_tensor_value_info
    branches = []
    for op, w in (("Add", "a"), ("Mul", "b")):
        arr = rng.standard_normal(1024).astype(np.float32)
        branches.append(helper.make_graph([helper.make_node(op, ["x", w], [f"{w}_out"])], f"{op}_branch", [],
                                          [vi(f"{w}_out", TensorProto.FLOAT, [1024])],
                                          [numpy_helper.from_array(arr, w)]))
    g = helper.make_graph([helper.make_node("If", ["cond"], ["y"], then_branch=branches[0], else_branch=branches[1],
                                            name="if")], "if_weights",
                          [vi("cond", TensorProto.BOOL, []), vi("x", TensorProto.FLOAT, [1024])],
                          [vi("y", TensorProto.FLOAT, [1024])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    return m.SerializeToString()


@pytest.mark.parametrize("cond", [True, False])
def test_a_cache_entry_with_weights_in_if_branches_loads_and_matches_onnxruntime(tmp_path, cond):
    """ORT's optimized graph keeps sub-graph weights external, which a warm start cannot hand over: the entry
    stores the portable partition, and the second build loads it (it was refused and rebuilt before)."""
    import onnxruntime as ort

    data = _if_with_branch_weights()
    feeds = {"cond": np.array(cond), "x": np.random.default_rng(2).standard_normal(1024).astype(np.float32)}
    cfg = ScheduleConfig(backends=["onnxruntime"], cache_dir=str(tmp_path))
    first = Session(data, cfg)
    assert _ort_partition(first).describe()["stored_form"] == "onnx"
    second = Session(data, cfg)
    assert second.compiled_model.cache_hit
    assert not [e for e in second.events if e.kind == "cache_rebuilt"]
    ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_array_equal(second.run(feeds)["y"], ref)
