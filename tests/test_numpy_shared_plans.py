"""Depthwise convolutions of one compile share their plan and scratch pool
(``nnrt_numpy/shared.py``) when every shape and attribute is the same, keep
their own weights, and give the results of separately compiled kernels."""
from __future__ import annotations

import numpy as np

import nnrt_numpy.backend  # noqa: F401  (registers the kernels)
from nnrt_numpy.kernel import NodeInfo
from nnrt_numpy.ops.nn.conv import Conv
from nnrt_numpy.shared import shared, sharing

RNG = np.random.default_rng(11)
ATTRS = {"group": 16, "kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
XS = (1, 16, 40, 40)


def _node(attrs: dict, w: np.ndarray) -> NodeInfo:
    return NodeInfo(name="dw", op_type="Conv", opset=11, attrs=attrs, num_inputs=2, input_present=(True, True),
                    input_dtypes=(np.dtype(np.float32),) * 2, input_shapes=(XS, w.shape), const_inputs=(None, w))


def _plan(k: Conv):
    return k._dw_plan(XS, k._w_const.shape, np.dtype(np.float32))


def test_shared_is_per_scope():
    made = []
    with sharing():
        a = shared("k", lambda: made.append(1) or object())
        with sharing():  # nested: the outer scope
            assert shared("k", lambda: made.append(1) or object()) is a
    assert len(made) == 1
    assert shared("k", object) is not shared("k", object)  # outside a scope: made every time


def test_same_shapes_share_the_pool_not_the_weights():
    w1, w2 = (RNG.standard_normal((16, 1, 3, 3)).astype(np.float32) for _ in range(2))
    with sharing():
        k1, k2 = Conv(_node(ATTRS, w1)), Conv(_node(ATTRS, w2))
        k3 = Conv(_node(dict(ATTRS, strides=[2, 2]), w1))  # other attributes: its own plan
    p1, p2, p3 = _plan(k1), _plan(k2), _plan(k3)
    assert p1 is not p2 and p1._pool is p2._pool and p1._lock is p2._lock
    assert p3._pool is not p1._pool
    alone1, alone2 = Conv(_node(ATTRS, w1)), Conv(_node(ATTRS, w2))  # no scope: nothing shared
    assert _plan(alone1)._pool is not _plan(alone2)._pool
    x = RNG.standard_normal(XS).astype(np.float32)
    for _ in range(2):  # twice: the weights caches must not answer for each other
        y1, y2 = k1(x, w1)[0], k2(x, w2)[0]
        np.testing.assert_array_equal(y1, alone1(x, w1)[0])
        np.testing.assert_array_equal(y2, alone2(x, w2)[0])
    assert not np.array_equal(y1, y2)
    assert p1.ready() >= 1  # the scratch sets went back to the one pool
