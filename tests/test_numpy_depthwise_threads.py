"""The NumPy backend's depthwise convolution on several threads: bit for bit
the one-thread result over a grid of shapes (strides, dilations, pads,
channel multipliers, batch 1 and 8, odd sizes, both ways), ``num_threads=1``
keeps every piece on the calling thread, the bias as the product's last tap
follows a changed bias, the cheap kernel-row trim equals the brute-force
one, and the warm-up of partitions sized at run time."""
from __future__ import annotations

import itertools
import threading

import numpy as np
import pytest
from onnx import TensorProto, helper

import nnrt_numpy.backend as numpy_backend
from nnrt_core import ScheduleConfig, Session
from nnrt_core.errors import InputError, OpError
from nnrt_numpy import parallel
from nnrt_numpy.kernel import NodeInfo
from nnrt_numpy.ops.nn import _depthwise
from nnrt_numpy.ops.nn import conv as conv_module

RNG = np.random.default_rng(19)


def plan_for(n, c, mult, hw, k, s, d, begin, end, mode):
    out = [(size + b + e - (kk - 1) * dd - 1) // ss + 1 for size, kk, ss, dd, b, e in zip(hw, k, s, d, begin, end)]
    return _depthwise.DepthwisePlan(n, c, mult, hw, k, s, d, begin, end, out, np.float32, mode), out


def reference(x, w, b, k, s, d, begin, end, out, mult):
    """Direct float64 sum over the taps (the value every way must approximate)."""
    n, c, h, wd = x.shape
    xp = np.zeros((n, c, h + max(begin[0], 0) + max(end[0], 0) + 8, wd + max(begin[1], 0) + max(end[1], 0) + 8))
    xp[:, :, max(begin[0], 0):max(begin[0], 0) + h, max(begin[1], 0):max(begin[1], 0) + wd] = x
    wr = w.reshape(c, mult, k[0], k[1]).astype(np.float64)
    y = np.zeros((n, c, mult, out[0], out[1]))
    for i, j in itertools.product(range(k[0]), range(k[1])):
        r0, c0 = i * d[0] + max(begin[0], 0) - begin[0], j * d[1] + max(begin[1], 0) - begin[1]
        tap = xp[:, :, r0:r0 + (out[0] - 1) * s[0] + 1:s[0], c0:c0 + (out[1] - 1) * s[1] + 1:s[1]]
        y += tap[:, :, None] * wr[None, :, :, i, j, None, None]
    y = y.reshape(n, c * mult, out[0], out[1])
    return y if b is None else y + b.reshape(1, -1, 1, 1)


GRID = [  # (n, c, mult, (h, w), kernel, strides, dilations, begin, end)
    (1, 7, 1, (9, 11), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),
    (8, 5, 1, (13, 7), (3, 3), (2, 2), (1, 1), (1, 1), (1, 1)),
    (8, 6, 2, (10, 12), (3, 3), (1, 1), (2, 2), (2, 2), (2, 2)),
    (1, 9, 1, (7, 15), (5, 5), (1, 2), (1, 1), (2, 2), (2, 2)),
    (8, 3, 1, (11, 9), (3, 3), (1, 1), (1, 1), (0, 0), (0, 0)),
    (1, 4, 2, (5, 17), (5, 3), (2, 1), (1, 2), (2, 0), (1, 3)),
    (8, 11, 1, (2, 19), (5, 5), (1, 1), (1, 1), (2, 2), (2, 2)),
    (1, 13, 1, (6, 6), (3, 3), (3, 3), (1, 1), (0, 1), (2, 0)),
]


@pytest.mark.parametrize("mode", ["cols", "cl"])
@pytest.mark.parametrize("case", GRID, ids=lambda c: f"n{c[0]}c{c[1]}m{c[2]}{c[3]}k{c[4]}s{c[5]}d{c[6]}")
@pytest.mark.parametrize("bias", [True, False])
def test_threaded_pieces_equal_one_thread_bit_for_bit(monkeypatch, mode, case, bias):
    n, c, mult, hw, k, s, d, begin, end = case
    monkeypatch.setattr(_depthwise, "BLOCK_BYTES", 1)  # one channel (or image) per piece: many pieces
    monkeypatch.setattr(_depthwise, "CL_LANES", 1)
    plan, out = plan_for(n, c, mult, hw, k, s, d, begin, end, mode)
    assert plan.nblocks == n * c
    x = RNG.standard_normal((n, c) + hw).astype(np.float32)
    w = RNG.standard_normal((c * mult, 1) + k).astype(np.float32)
    b = RNG.standard_normal(c * mult).astype(np.float32) if bias else None
    one = plan.run(x, w, b, np.full((n, c * mult, *out), np.nan, np.float32), nthreads=1)
    two = plan.run(x, w, b, np.full_like(one, np.nan), nthreads=2)
    np.testing.assert_array_equal(two, one)
    np.testing.assert_allclose(one, reference(x, w, b, k, s, d, begin, end, out, mult), rtol=1e-4, atol=1e-4)
    # the same plan with its default pieces (several channels each) gives the same values
    monkeypatch.setattr(_depthwise, "BLOCK_BYTES", 2 << 20)
    big, _ = plan_for(n, c, mult, hw, k, s, d, begin, end, mode)
    np.testing.assert_allclose(big.run(x, w, b, np.empty_like(one), nthreads=2), one, rtol=1e-5, atol=1e-5)


def dw_model(n, c, h, w, k=3, bias=True, static=True):
    wt = RNG.standard_normal((c, 1, k, k)).astype(np.float32)
    inits = [helper.make_tensor("w", TensorProto.FLOAT, wt.shape, wt.ravel())]
    names = ["x", "w"]
    if bias:
        inits.append(helper.make_tensor("b", TensorProto.FLOAT, [c], RNG.standard_normal(c).astype(np.float32)))
        names.append("b")
    node = helper.make_node("Conv", names, ["y"], group=c, kernel_shape=[k, k], pads=[k // 2] * 4)
    shape = [n, c, h, w] if static else ["N", c, "H", "W"]
    g = helper.make_graph([node], "dw", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def record_threads(monkeypatch) -> set[int]:
    """Idents of the threads that run depthwise pieces (each piece sleeps a little, so
    an idle helper surely takes some when it may)."""
    seen: set[int] = set()
    cols, cl = _depthwise.DepthwisePlan._cols, _depthwise.DepthwisePlan._cl

    def wrap(fn):
        def run(self, *args):
            seen.add(threading.get_ident())
            threading.Event().wait(0.002)
            return fn(self, *args)
        return run

    monkeypatch.setattr(_depthwise.DepthwisePlan, "_cols", wrap(cols))
    monkeypatch.setattr(_depthwise.DepthwisePlan, "_cl", wrap(cl))
    return seen


def test_num_threads_1_runs_every_piece_on_the_calling_thread(monkeypatch):
    monkeypatch.setattr(parallel, "SPLIT_US", 0.0)
    monkeypatch.setattr(parallel, "COLD_SPLIT_US", 0.0)
    monkeypatch.setattr(_depthwise, "BLOCK_BYTES", 1)
    seen = record_threads(monkeypatch)
    m = dw_model(2, 6, 12, 10)
    x = RNG.standard_normal((2, 6, 12, 10)).astype(np.float32)
    one = Session(m, ScheduleConfig(backends=["numpy"], num_threads=1)).run({"x": x})["y"]
    assert seen == {threading.get_ident()}
    seen.clear()
    two = Session(m, ScheduleConfig(backends=["numpy"], num_threads=2)).run({"x": x})["y"]
    np.testing.assert_array_equal(two, one)
    if parallel.CORES > 1:  # 12 pieces of >= 2 ms: the helper takes some
        assert threading.get_ident() in seen and len(seen) == 2


def test_errors_inside_threaded_pieces_reach_the_caller(monkeypatch):
    monkeypatch.setattr(parallel, "SPLIT_US", 0.0)
    monkeypatch.setattr(parallel, "COLD_SPLIT_US", 0.0)
    monkeypatch.setattr(_depthwise, "BLOCK_BYTES", 1)
    plan, out = plan_for(2, 4, 1, (6, 6), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), "cols")

    def boom(self, *args):
        raise FloatingPointError("piece failed")

    monkeypatch.setattr(_depthwise.DepthwisePlan, "_cols", boom)
    with pytest.raises(FloatingPointError, match="piece failed"):
        plan.run(np.zeros((2, 4, 6, 6), np.float32), np.zeros((4, 1, 3, 3), np.float32), None,
                 np.empty((2, 4) + tuple(out), np.float32), nthreads=2)
    monkeypatch.undo()
    # bad inputs are still named errors with threads
    sess = Session(dw_model(1, 4, 6, 6, static=False), ScheduleConfig(backends=["numpy"], num_threads=2))
    with pytest.raises(InputError, match="dimension 1 to be 4"):
        sess.run({"x": np.zeros((1, 5, 6, 6), np.float32)})
    with pytest.raises(OpError, match="input channels 5"):
        conv_module.Conv(_node(4))(np.zeros((1, 5, 6, 6), np.float32), np.zeros((4, 1, 3, 3), np.float32))


def _node(c: int, xs: tuple | None = None) -> NodeInfo:
    """A depthwise 3x3 Conv node with weights and bias given at run time."""
    return NodeInfo(name="dw", op_type="Conv", opset=13, num_inputs=3, input_present=(True,) * 3,
                    attrs={"group": c, "kernel_shape": [3, 3], "pads": [1, 1, 1, 1]},
                    input_dtypes=(np.dtype(np.float32),) * 3, input_shapes=(xs, (c, 1, 3, 3), (c,)),
                    const_inputs=(None, None, None))


def test_bias_as_last_tap_follows_a_changed_bias_and_weights():
    c = 5
    w = RNG.standard_normal((c, 1, 3, 3)).astype(np.float32)
    k = conv_module.Conv(_node(c, (2, c, 8, 9)))
    x = RNG.standard_normal((2, c, 8, 9)).astype(np.float32)
    nobias = k(x, w)[0]
    for _ in range(2):
        b = RNG.standard_normal(c).astype(np.float32)
        np.testing.assert_allclose(k(x, w, b)[0], nobias + b.reshape(1, c, 1, 1), rtol=1e-5, atol=1e-5)
    w2 = w * 2
    np.testing.assert_allclose(k(x, w2, b)[0], 2 * nobias + b.reshape(1, c, 1, 1), rtol=1e-5, atol=1e-5)
    with pytest.raises(OpError, match="bias B"):
        k(x, w, np.zeros(c + 1, np.float32))


def test_trim_equals_the_brute_force_search():
    def brute(size, k, s, d, b, o):
        pos = np.arange(o) * s - b
        hits = [t for t in range(k) if ((pos + t * d >= 0) & (pos + t * d < size)).any()]
        return (hits[0], hits[-1] + 1) if hits else (0, k)

    for size, k, s, d, b, e in itertools.product(range(1, 6), range(1, 6), range(1, 4), range(1, 3), range(-2, 5),
                                                 range(-2, 5)):
        span = size + b + e - (k - 1) * d - 1
        if span < 0:
            continue
        o = span // s + 1
        live = _depthwise._trim([size], [k], [s], [d], [b], [o])[3][0]
        assert (live.start, live.stop) == brute(size, k, s, d, b, o), (size, k, s, d, b, e)


def test_dynamic_shapes_prefault_heap_and_import_the_depthwise_module_at_compile(monkeypatch):
    calls = []
    real = conv_module._depthwise
    monkeypatch.setattr(conv_module, "_depthwise", lambda: calls.append(1) or real())
    sess = Session(dw_model(1, 4, 6, 6, static=False), ScheduleConfig(backends=["numpy"]))
    assert calls  # at compile, though the input shape is known only at run time
    part = sess.compiled_model.steps[0].compiled
    assert part.warm_heap_bytes == 0  # one node: its output is the graph's, nothing intermediate
    # two nodes: the intermediate is sized at run time
    m = dw_model(1, 4, 6, 6, static=False)
    m.graph.node[0].output[0] = "t"
    m.graph.node.append(helper.make_node("Relu", ["t"], ["y"]))
    part = Session(m, ScheduleConfig(backends=["numpy"])).compiled_model.steps[0].compiled
    assert part.warm_heap_bytes == min(numpy_backend.DYNAMIC_WARM_BYTES, numpy_backend.WARM_HEAP_BYTES)
    m2 = dw_model(1, 4, 6, 6, static=True)
    m2.graph.node[0].output[0] = "t"
    m2.graph.node.append(helper.make_node("Relu", ["t"], ["y"]))
    part = Session(m2, ScheduleConfig(backends=["numpy"])).compiled_model.steps[0].compiled
    assert part.warm_heap_bytes == 4 * 6 * 6 * 4  # static: the intermediate's own bytes
