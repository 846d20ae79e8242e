"""The NumPy backend's one split rule (``nnrt_numpy.parallel.worth_splitting`` / ``split_threads``):
every splitting kernel asks it, below the cut nothing is handed to a helper thread, above it the
kernel splits, and a split result equals the unsplit one bit for bit."""
from __future__ import annotations

import numpy as np
import pytest

import nnrt_numpy.backend  # noqa: F401  (registers the kernels)
from nnrt_numpy import parallel
from nnrt_numpy.kernel import REGISTRY, NodeInfo
from nnrt_numpy.ops.math.matmul import MatMul
from nnrt_numpy.ops.nn import _depthwise
from nnrt_numpy.ops.nn.conv import Conv

RNG = np.random.default_rng(3)


def node(op, attrs, shapes, consts=(), opset=19):
    consts = tuple(consts) + (None,) * (len(shapes) - len(consts))
    return NodeInfo(name=op.lower(), op_type=op, opset=opset, attrs=attrs, num_inputs=len(shapes), num_outputs=1,
                    input_present=(True,) * len(shapes), input_dtypes=(np.dtype(np.float32),) * len(shapes),
                    input_shapes=tuple(shapes), const_inputs=consts)


@pytest.fixture
def recorded(monkeypatch):
    """Two threads allowed; records the thread count of every ``run_chunks`` call."""
    calls: list[int] = []
    run = parallel.run_chunks

    def record(fn, n, nthreads=None):
        calls.append(parallel.threads() if nthreads is None else nthreads)
        return run(fn, n, nthreads)

    monkeypatch.setattr(parallel, "run_chunks", record)
    prev = parallel.set_threads(2)
    try:
        yield calls
    finally:
        parallel.set_threads(*prev)


def test_below_the_cut_one_thread_without_reading_the_load(monkeypatch):
    monkeypatch.setattr(parallel, "threads", lambda: pytest.fail("threads() read below the cut"))
    us = parallel.SPLIT_US * 0.99
    assert not parallel.worth_splitting(us) and parallel.split_threads(us) == 1
    monkeypatch.setattr(parallel, "threads", lambda: 2)
    assert parallel.worth_splitting(parallel.SPLIT_US) and parallel.split_threads(parallel.COLD_SPLIT_US) == 2


def test_a_cold_helper_needs_more_work(monkeypatch):
    """Between SPLIT_US and COLD_SPLIT_US a kernel splits only while the helper is warm (a split
    ended less than WARM_US ago): waking a helper that slept costs more."""
    assert parallel.COLD_SPLIT_US > parallel.SPLIT_US
    monkeypatch.setattr(parallel, "threads", lambda: 2)
    monkeypatch.setattr(parallel, "WARM_US", -1.0)  # never warm
    assert parallel.split_threads(parallel.SPLIT_US) == 1
    assert parallel.split_threads(parallel.COLD_SPLIT_US) == 2
    if parallel.CORES > 1:
        monkeypatch.setattr(parallel, "WARM_US", 60e6)  # a split in the last minute: warm
        parallel.run_chunks(lambda i: None, 2, 2)
        assert parallel.split_threads(parallel.SPLIT_US) == 2


def test_work_estimates_scale_with_the_measured_rates():
    assert parallel.work_us("gemm", parallel.RATES["gemm"] * 10) == pytest.approx(10.0)
    with pytest.raises(KeyError):
        parallel.work_us("no such kind", 1)
    assert parallel.SPLIT_US >= 2 * parallel.HANDOFF_US  # a 2-way split pays only from twice the hand-off


def test_depthwise_estimate_counts_the_input_copies():
    plan = _depthwise.DepthwisePlan(8, 48, 1, (12, 80), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), (12, 80),
                                    np.float32)
    macs_only = parallel.work_us("depthwise", plan.work)
    assert plan.est_us == pytest.approx(macs_only + parallel.work_us("dw_input", 8 * 48 * 14 * 82))


def _kernels():
    """(name, kernel, inputs) of every splitting kernel, each with a few hundred µs of work."""
    w1 = RNG.standard_normal((64, 64, 1, 1)).astype(np.float32)
    w3 = RNG.standard_normal((32, 32, 3, 3)).astype(np.float32)
    wd = RNG.standard_normal((64, 1, 3, 3)).astype(np.float32)
    x1 = RNG.standard_normal((1, 64, 48, 48)).astype(np.float32)
    x3 = RNG.standard_normal((1, 32, 40, 40)).astype(np.float32)
    xd = RNG.standard_normal((2, 64, 64, 64)).astype(np.float32)
    a, b = RNG.standard_normal((40, 80)).astype(np.float32), RNG.standard_normal((80, 4096)).astype(np.float32)
    s = RNG.standard_normal((64, 6906)).astype(np.float32)
    conv = lambda x, w, **at: Conv(node("Conv", {"kernel_shape": list(w.shape[2:]), **at},  # noqa: E731
                                        [x.shape, w.shape], [None, w]))
    softmax = REGISTRY.lookup("", "Softmax", 13)(node("Softmax", {"axis": -1}, [s.shape], opset=13))
    return [("conv1x1", conv(x1, w1), (x1, w1)), ("conv3x3", conv(x3, w3, pads=[1] * 4), (x3, w3)),
            ("depthwise", conv(xd, wd, pads=[1] * 4, group=64), (xd, wd)),
            ("matmul", MatMul(node("MatMul", {}, [a.shape, b.shape])), (a, b)), ("softmax", softmax, (s,))]


@pytest.mark.parametrize("i", range(5), ids=[k[0] for k in _kernels()])
def test_every_splitting_kernel_follows_the_rule_bit_for_bit(recorded, monkeypatch, i):
    _, make_never, args = _kernels()[i]
    monkeypatch.setattr(parallel, "SPLIT_US", float("inf"))  # never worth it
    monkeypatch.setattr(parallel, "COLD_SPLIT_US", float("inf"))
    want = make_never(*args)[0]
    assert all(k == 1 for k in recorded), recorded
    recorded.clear()
    monkeypatch.setattr(parallel, "SPLIT_US", 0.0)  # always (depthwise plans cut their pieces at build)
    monkeypatch.setattr(parallel, "COLD_SPLIT_US", 0.0)
    got = _kernels()[i][1](*args)[0]
    assert any(k == 2 for k in recorded)
    np.testing.assert_array_equal(got, want)
