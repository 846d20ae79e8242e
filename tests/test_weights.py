"""Weights shared between sessions (nnrt_core.storage.weights)."""
from __future__ import annotations

import gc

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from nnrt_core import ScheduleConfig, Session
from nnrt_core.storage.weights import MIN_SHARED_BYTES, WeightStore


def mlp(seed: int = 0):
    rng = np.random.default_rng(seed)
    w1 = numpy_helper.from_array(rng.standard_normal((64, 128)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((128, 10)).astype(np.float32), "w2")
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "w2"], ["y"], name="fc2")]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 10])], [w1, w2])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    return m.SerializeToString()


X = {"x": np.random.default_rng(5).standard_normal((2, 64)).astype(np.float32)}
WEIGHT_BYTES = (64 * 128 + 128 * 10) * 4


@pytest.mark.parametrize("backends", [["numpy"], ["onnxruntime"], ["npu_emu"]])
def test_second_session_of_a_model_shares_its_weights(backends):
    model = mlp(seed=100 + len(backends[0]))  # weights no other test holds
    first = Session(model, ScheduleConfig(backends=backends))
    second = Session(model, ScheduleConfig(backends=backends))
    assert first.stats()["weight_bytes"] == WEIGHT_BYTES and first.stats()["shared_weight_bytes"] == 0
    assert second.stats()["shared_weight_bytes"] == WEIGHT_BYTES
    for name in ("w1", "w2"):
        a, b = first.graph.initializers[name].const, second.graph.initializers[name].const
        assert a is b and not a.flags.writeable
    np.testing.assert_array_equal(first.run(X)["y"], second.run(X)["y"])


def test_other_weights_are_not_shared():
    a = Session(mlp(seed=201), ScheduleConfig(backends=["numpy"]))
    b = Session(mlp(seed=202), ScheduleConfig(backends=["numpy"]))
    assert b.stats()["shared_weight_bytes"] == 0
    assert a.graph.initializers["w1"].const is not b.graph.initializers["w1"].const


def test_store_compares_bytes_dtype_and_shape_and_forgets_unused_arrays():
    store = WeightStore()
    base = np.arange(2048, dtype=np.float32)
    kept, shared = store.intern(base)
    assert not shared and not kept.flags.writeable and base.flags.writeable  # the caller's array keeps its flags
    again, shared = store.intern(base.copy())
    assert shared and again is kept
    other_shape, shared = store.intern(base.reshape(32, 64).copy())
    assert not shared and other_shape.shape == (32, 64)
    other_dtype, shared = store.intern(base.view(np.int32).copy())
    assert not shared and other_dtype.dtype == np.int32
    small = np.zeros(MIN_SHARED_BYTES // 8, np.float32)
    assert store.intern(small) == (small, False)  # too small to be worth a digest
    assert len(store) == 3
    del kept, again, other_shape, other_dtype
    gc.collect()
    assert len(store) == 0  # weak: weights go with their last session


def test_caller_ir_arrays_stay_writable():
    from nnrt_core.frontends import load_onnx

    model = load_onnx(mlp(seed=301))
    w1 = model.graph.initializers["w1"].const = np.array(model.graph.initializers["w1"].const)
    assert w1.flags.writeable
    sess = Session(model, ScheduleConfig(backends=["numpy"]))
    assert w1.flags.writeable  # the session holds a read-only view, not the caller's array
    assert not sess.graph.initializers["w1"].const.flags.writeable


def test_constants_inside_subgraphs_are_interned_too():
    """A sub-graph's initializer is found through its If node (and one of the top graph too)."""
    from nnrt_core.ir import Attribute, AttrKind, DataType, Graph, Node, TensorType, Value
    from nnrt_core.storage.weights import share_graph_weights
    big = np.arange(2048, dtype=np.float32)  # 8 KiB: above MIN_SHARED_BYTES
    cond = Value("cond", TensorType(DataType.BOOL, ()))
    top = Graph("main", inputs=[cond], initializers=[Value("top_w", const=big + 1)])
    then_g = Graph("then", parent=top, initializers=[Value("sub_w", const=big.copy())])
    then_g.outputs = [then_g.initializers["sub_w"]]
    else_g = Graph("else", parent=top, initializers=[Value("sub_w2", const=big.copy())])
    else_g.outputs = [else_g.initializers["sub_w2"]]
    out = Value("out", TensorType(DataType.FLOAT, (2048,)))
    top.add_node(Node("If", [cond], [out], name="if", attributes=[
        Attribute("then_branch", AttrKind.GRAPH, then_g), Attribute("else_branch", AttrKind.GRAPH, else_g)]))
    report = share_graph_weights(top, WeightStore())
    assert report.arrays == 3 and report.shared_arrays == 1  # sub_w2 has sub_w's bytes
    assert then_g.initializers["sub_w"].const is else_g.initializers["sub_w2"].const
    assert not top.initializers["top_w"].const.flags.writeable


class _CountingXXH:
    """``xxhash`` with its 128-bit digests counted."""

    def __init__(self, real) -> None:
        self.real, self.digests = real, 0

    def xxh3_128(self, data):
        self.digests += 1
        return self.real.xxh3_128(data)

    def __getattr__(self, name):
        return getattr(self.real, name)


def test_arrays_nothing_resembles_are_not_digested(monkeypatch):
    import nnrt_core.storage.weights as W
    counter = _CountingXXH(W.xxhash)
    monkeypatch.setattr(W, "xxhash", counter)
    store = WeightStore()
    rng = np.random.default_rng(7)
    arrays = [rng.standard_normal(4096).astype(np.float32) for _ in range(5)]  # same shape, other bytes
    held = [store.intern(a)[0] for a in arrays]
    assert counter.digests == 0 and len(store) == 5
    again, shared = store.intern(arrays[2].copy())  # one held array resembles it: both digested, once
    assert shared and again is held[2] and counter.digests == 2
    again, shared = store.intern(arrays[2].copy())
    assert shared and again is held[2] and counter.digests == 3  # the held one's digest is kept


def test_same_samples_other_bytes_are_told_apart_by_the_digest():
    """Arrays equal at the three sampled places (start, middle, end) but not elsewhere."""
    store = WeightStore()
    base = np.zeros(4096, np.float32)  # 16 KiB; the samples are bytes 0-255, 8064-8319, 16128-16383
    other = base.copy()
    other[300] = 1.0  # byte 1200: outside the samples
    a, shared_a = store.intern(base)
    b, shared_b = store.intern(other)
    assert not shared_a and not shared_b and a is not b and len(store) == 2
    np.testing.assert_array_equal(b, other)
    c, shared_c = store.intern(other.copy())  # matches the second array held under that sample key
    assert shared_c and c is b
    d, shared_d = store.intern(base.copy())
    assert shared_d and d is a
    del a, b, c, d
    gc.collect()
    assert len(store) == 0
    e, shared_e = store.intern(base.copy())  # the store forgot both: held afresh
    assert not shared_e and len(store) == 1
