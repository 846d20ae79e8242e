"""The NumPy backend's fast paths give the numbers of the plain ones:
flat stride-1 pooling (bit for bit), GEMMs and convolutions split over
threads (nnrt_numpy.parallel; OpenBLAS may round a smaller product
differently in the last bits), the batched depthwise convolution, and the
BLAS thread bookkeeping around a run."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import nnrt_numpy.backend  # noqa: F401  (registers the kernels)
from nnrt_numpy import blas, parallel
from nnrt_numpy.kernel import NodeInfo
from nnrt_numpy.ops.nn._spatial import pad_spatial, same_pool_2d, window_reduce, window_view
from nnrt_numpy.ops.nn.averagepool import AveragePool
from nnrt_numpy.ops.nn import conv as conv_module
from nnrt_numpy.ops.nn.conv import Conv
from nnrt_numpy.ops.nn.maxpool import MaxPool

RNG = np.random.default_rng(0)


@pytest.fixture
def two_threads():
    """Let split kernels use two threads (whatever the machine's load) for the test."""
    prev = parallel.set_threads(2)
    try:
        yield
    finally:
        parallel.set_threads(*prev)


def node(op, attrs, shapes, consts=(), dtype=np.float32, outputs=1):
    consts = tuple(consts) + (None,) * (len(shapes) - len(consts))
    return NodeInfo(name=op.lower(), op_type=op, opset=19, attrs=attrs, num_inputs=len(shapes),
                    num_outputs=outputs, input_present=(True,) * len(shapes),
                    input_dtypes=(np.dtype(dtype),) * len(shapes), input_shapes=tuple(shapes),
                    const_inputs=consts)


# ---------------------------------------------------------------- pooling
@pytest.mark.parametrize("shape", [(1, 5, 7, 9), (2, 3, 1, 1), (1, 4, 2, 3), (3, 2, 5, 2), (1, 6, 14, 14)])
@pytest.mark.parametrize("kernel", [(3, 3), (1, 3), (3, 1), (2, 2), (5, 5), (4, 3)])
def test_same_pool_equals_padded_window_reduce_bit_for_bit(shape, kernel):
    for bh, bw in itertools.product(range(kernel[0]), range(kernel[1])):
        for ufunc, ident in ((np.maximum, -np.inf), (np.add, 0.0)):
            x = RNG.standard_normal(shape).astype(np.float32)
            if ufunc is np.maximum:
                x.flat[:: 7] = np.nan
            begin, end = [bh, bw], [kernel[0] - 1 - bh, kernel[1] - 1 - bw]
            xp = pad_spatial(x, begin, end, ident)
            want = window_reduce(xp, list(kernel), [1, 1], [1, 1], list(shape[2:]), ufunc)
            got = same_pool_2d(x, kernel, begin, ufunc)
            assert got.shape == want.shape and got is not x
            np.testing.assert_array_equal(got, want)


def test_same_pool_declines_what_it_does_not_handle():
    x = np.zeros((1, 2, 4, 4), np.float32)
    assert same_pool_2d(x[:, :, ::2], (3, 3), [1, 1], np.add) is None  # not contiguous
    assert same_pool_2d(x, (3, 3), [3, 1], np.add) is None  # pad as large as the kernel
    assert same_pool_2d(np.zeros((1, 2, 4, 4, 4), np.float32), (3, 3, 3), [1, 1, 1], np.add) is None


def _naive_pool(x, k, pads, stride, op, count_include_pad=False):
    n, c, h, w = x.shape
    ho = (h + pads[0] + pads[2] - k[0]) // stride + 1
    wo = (w + pads[1] + pads[3] - k[1]) // stride + 1
    y = np.zeros((n, c, ho, wo), np.float64)
    for i in range(ho):
        for j in range(wo):
            r0, c0 = i * stride - pads[0], j * stride - pads[1]
            win = x[:, :, max(r0, 0):r0 + k[0], max(c0, 0):c0 + k[1]]
            if op == "max":
                y[:, :, i, j] = win.max(axis=(2, 3))
            else:
                cnt = k[0] * k[1] if count_include_pad else win.shape[2] * win.shape[3]
                y[:, :, i, j] = win.sum(axis=(2, 3), dtype=np.float64) / cnt
    return y


@pytest.mark.parametrize("shape,k,pads", [((1, 8, 13, 13), (3, 3), (1, 1, 1, 1)), ((2, 3, 6, 5), (3, 3), (1, 1, 1, 1)),
                                          ((1, 4, 9, 9), (5, 5), (2, 2, 2, 2)), ((1, 4, 7, 8), (2, 2), (0, 0, 1, 1)),
                                          ((1, 3, 5, 5), (3, 1), (1, 0, 1, 0))])
def test_stride1_same_max_and_average_pool_kernels(shape, k, pads):
    x = RNG.standard_normal(shape).astype(np.float32)
    attrs = {"kernel_shape": list(k), "pads": list(pads), "strides": [1, 1]}
    got = MaxPool(node("MaxPool", attrs, [shape]))(x)[0]
    np.testing.assert_array_equal(got, _naive_pool(x, k, pads, 1, "max").astype(np.float32))
    for cip in (0, 1):
        got = AveragePool(node("AveragePool", {**attrs, "count_include_pad": cip}, [shape]))(x)[0]
        np.testing.assert_allclose(got, _naive_pool(x, k, pads, 1, "avg", bool(cip)), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- parallel
@pytest.mark.parametrize("g,m,k,n", [(1, 64, 147, 3000), (1, 300, 256, 49), (4, 34, 34, 784), (1, 1000, 1024, 1),
                                     (2, 48, 27, 1000), (1, 17, 5, 3)])
def test_split_matmul_equals_one_call(two_threads, g, m, k, n):
    a = RNG.random((g, m, k), dtype=np.float32)
    b = RNG.random((1, g, k, n), dtype=np.float32)
    want = np.matmul(a, b)
    for pieces in (0, 2, 3, 7):
        np.testing.assert_allclose(parallel.matmul(a, b, pieces=pieces), want, rtol=1e-5)
    out = np.empty_like(want)
    assert parallel.matmul(a, b, out=out) is out
    np.testing.assert_allclose(out, want, rtol=1e-5)
    first = parallel.matmul(a, b)  # which thread runs a piece does not matter
    for _ in range(3):
        np.testing.assert_array_equal(parallel.matmul(a, b), first)


def test_run_chunks_runs_every_piece_once_and_reraises():
    seen = []
    parallel.run_chunks(seen.append, 50, 2)
    assert sorted(seen) == list(range(50))

    def boom(i):
        if i == 3:
            raise ValueError("piece 3")

    with pytest.raises(ValueError, match="piece 3"):
        parallel.run_chunks(boom, 8, 2)
    inner = []  # a split inside a piece runs inline
    parallel.run_chunks(lambda i: parallel.run_chunks(lambda j: inner.append((i, j)), 3, 2), 4, 2)
    assert sorted(inner) == [(i, j) for i in range(4) for j in range(3)]


CONVS = [  # x shape, w shape, attrs
    ((1, 16, 20, 20), (24, 16, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((1, 3, 40, 40), (16, 3, 7, 7), {"pads": [3, 3, 3, 3], "strides": [2, 2]}),
    ((1, 64, 9, 9), (96, 64, 3, 3), {"pads": [1, 1, 1, 1]}),  # fewer pixels than channels: split by channels
    ((1, 32, 30, 30), (40, 32, 1, 1), {}),  # pointwise, columns are a view of x
    ((1, 32, 30, 30), (48, 32, 1, 1), {"strides": [2, 2]}),
    ((2, 8, 18, 18), (12, 4, 3, 3), {"pads": [0, 1, 2, 1], "group": 2}),
    ((1, 8, 25, 25), (8, 8, 3, 3), {"dilations": [2, 2], "strides": [2, 1]}),
]


@pytest.mark.parametrize("xs,ws,attrs", CONVS)
def test_conv_split_into_pieces_equals_the_unsplit_conv(two_threads, monkeypatch, xs, ws, attrs):
    monkeypatch.setattr(parallel, "SPLIT_US", 0.0)  # split even these small convolutions
    monkeypatch.setattr(parallel, "COLD_SPLIT_US", 0.0)
    monkeypatch.setattr(parallel, "MIN_MACS", 1)  # in many pieces
    x = RNG.standard_normal(xs).astype(np.float32)
    w = RNG.standard_normal(ws).astype(np.float32)
    b = RNG.standard_normal(ws[0]).astype(np.float32)
    k = Conv(node("Conv", {"kernel_shape": list(ws[2:]), **attrs}, [xs, ws, (ws[0],)], [None, w, b]))
    got = k(x, w, b)[0]
    prev = parallel.set_threads(1)
    try:
        want = k(x, w, b)[0]
    finally:
        parallel.set_threads(*prev)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(k(x, w, b)[0], got)  # the same pieces every time
    # placed into a slice of a larger (Concat) buffer
    buf = np.full((xs[0], ws[0] + 5) + got.shape[2:], np.nan, np.float32) if xs[0] == 1 else None
    if buf is not None:
        out = buf[:, 5:]
        assert k(x, w, b, out=out)[0] is out
        np.testing.assert_array_equal(out, got)
        assert np.isnan(buf[:, :5]).all()


@pytest.mark.parametrize("xs,ws,attrs", CONVS + [((3, 6, 11, 7), (5, 6, 3, 3), {"pads": [1, 1, 1, 1]})])
def test_conv_cache_blocks_on_one_thread_equal_the_float64_convolution(monkeypatch, xs, ws, attrs):
    """A convolution whose im2col exceeds ``PIECE_BYTES`` (and whose weights take at most half of
    it) runs in row pieces even on one thread: the same values as the whole-batch im2col and a
    float64 reference."""
    x = RNG.standard_normal(xs).astype(np.float32)
    w = RNG.standard_normal(ws).astype(np.float32)
    b = RNG.standard_normal(ws[0]).astype(np.float32)
    k = Conv(node("Conv", {"kernel_shape": list(ws[2:]), **attrs}, [xs, ws, (ws[0],)], [None, w, b]))
    prev = parallel.set_threads(1)
    try:
        monkeypatch.setattr(conv_module, "PIECE_BYTES", 1 << 60)
        whole = k(x, w, b)[0]
        calls: list[int] = []
        run = parallel.run_chunks
        monkeypatch.setattr(parallel, "run_chunks", lambda fn, n, k=None: (calls.append(n), run(fn, n, k)))
        g = attrs.get("group", 1)
        piece = 2 * w[: ws[0] // g].nbytes  # the smallest pieces allowed: twice one group's weights
        monkeypatch.setattr(conv_module, "PIECE_BYTES", piece)
        monkeypatch.setattr(conv_module, "BLOCK_FROM", piece)
        got = k(x, w, b)[0]
    finally:
        parallel.set_threads(*prev)
    direct = attrs.get("strides", [1, 1]) == [1, 1] and ws[2:] == (1, 1)
    cols = xs[0] * xs[1] * ws[2] * ws[3] * got.shape[2] * got.shape[3] * 4
    assert calls == ([] if direct or cols <= piece else calls[:1]) and (not calls or calls[0] >= xs[0])
    if xs == (3, 6, 11, 7):
        assert calls == [6]  # 3 images x 2 pieces of ceil(64 / 7) = 10 rows
    pads = attrs.get("pads", [0, 0, 0, 0])
    xp = pad_spatial(x.astype(np.float64), pads[:2], pads[2:])
    win = window_view(xp, list(ws[2:]), attrs.get("strides", [1, 1]), attrs.get("dilations", [1, 1]),
                      got.shape[2:])  # (n, c, ho, wo, kh, kw)
    cg, mg = xs[1] // g, ws[0] // g
    want = np.concatenate([np.einsum("nchwij,mcij->nmhw", win[:, i * cg:(i + 1) * cg], w[i * mg:(i + 1) * mg])
                           for i in range(g)], axis=1) + b[:, None, None]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got, whole, rtol=1e-5, atol=1e-5)


def test_depthwise_batched_path_matches_the_tap_loop():
    c = 72
    x = RNG.standard_normal((1, c, 30, 30)).astype(np.float32)
    w = RNG.standard_normal((c, 1, 3, 3)).astype(np.float32)
    for strides in ([1, 1], [2, 2]):
        k = Conv(node("Conv", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": strides, "group": c},
                      [x.shape, w.shape]))
        got = k(x, w)[0]
        xp = pad_spatial(x, [1, 1], [1, 1])
        want = np.einsum("nchwij,cij->nchw", window_view(xp, [3, 3], strides, [1, 1], got.shape[2:]),
                         w[:, 0].astype(np.float64))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_blas_enter_leave_restore_the_thread_state():
    before = parallel.set_threads(1)
    parallel.set_threads(*before)
    blas.enter(2)
    try:
        if blas.available() and blas.SPLIT:
            assert parallel.threads() == min(2, parallel.CORES) or parallel.threads() == 2
        blas.enter(0)  # nested run: adaptive
        blas.leave()
    finally:
        blas.leave()
    assert getattr(parallel._local, "state", (1, False)) == before


# ------------------------------------------- IEEE arithmetic without errstate
def _div_log_model():
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("Div", ["a", "b"], ["q"], name="div"),
                           helper.make_node("Log", ["a"], ["l"], name="log")], "ieee",
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT, [3]),
                           helper.make_tensor_value_info("b", TensorProto.FLOAT, [3])],
                          [helper.make_tensor_value_info("q", TensorProto.FLOAT, [3]),
                           helper.make_tensor_value_info("l", TensorProto.FLOAT, [3])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("mode", ["default", "warnings-as-errors", "seterr-raise"])
def test_elementwise_kernels_give_ieee_results_whatever_the_callers_error_settings(mode):
    import contextlib
    import warnings

    from nnrt_core import ScheduleConfig, Session

    sess = Session(_div_log_model(), ScheduleConfig(backends=["numpy"]))
    feeds = {"a": np.array([1.0, -1.0, 0.0], np.float32), "b": np.array([0.0, 0.0, 0.0], np.float32)}
    ctx = np.errstate(all="raise") if mode == "seterr-raise" else contextlib.nullcontext()
    with warnings.catch_warnings(record=True) as caught, ctx:
        if mode == "warnings-as-errors":
            warnings.simplefilter("error")  # placed before nnrt_numpy's own filter
        out = sess.run(feeds)
    np.testing.assert_array_equal(out["q"][:2], [np.inf, -np.inf])
    assert np.isnan(out["q"][2]) and np.isnan(out["l"][1]) and out["l"][2] == -np.inf
    assert [(str(w.message), w.filename) for w in caught if issubclass(w.category, RuntimeWarning)] == []


@pytest.mark.parametrize("xs,ws", [((40, 80), (80, 690)), ((1, 40, 80), (80, 690)), ((3, 40, 16), (3, 16, 50)),
                                   ((2, 1, 300, 16), (3, 16, 9)), ((7, 16), (16,))])
def test_matmul_split_over_threads_equals_numpy(two_threads, monkeypatch, xs, ws):
    """The MatMul kernel splits a large float product over the threads (``parallel.matmul``);
    forced on small ones here: numpy's values (up to BLAS rounding) and shapes, broadcasting too."""
    from nnrt_numpy.ops.math.matmul import MatMul

    monkeypatch.setattr(parallel, "SPLIT_US", 0.0)
    monkeypatch.setattr(parallel, "COLD_SPLIT_US", 0.0)
    monkeypatch.setattr(parallel, "MIN_MACS", 1)  # in many pieces
    a = RNG.standard_normal(xs).astype(np.float32)
    b = RNG.standard_normal(ws).astype(np.float32)
    k = MatMul(node("MatMul", {}, [xs, ws]))
    got = k(a, b)[0]
    assert got.shape == np.matmul(a, b).shape and got.dtype == np.float32
    np.testing.assert_allclose(got, np.matmul(a.astype(np.float64), b), rtol=1e-4, atol=1e-4)
    with pytest.raises(Exception, match="incompatible shapes"):
        k(a, RNG.standard_normal((5, 3)).astype(np.float32))


@pytest.mark.parametrize("shape,opset,axis", [((2, 40, 691), 13, -1), ((40, 691), 11, 1), ((3, 5, 7, 11), 11, 2)])
def test_softmax_row_pieces_equal_the_whole_array_softmax(two_threads, monkeypatch, shape, opset, axis):
    """A large Softmax over its last axis runs in row pieces on the threads: bit for bit the
    one-thread values (the same operations per row)."""
    from nnrt_numpy.kernel import REGISTRY

    x = (RNG.standard_normal(shape) * 4).astype(np.float32)
    info = NodeInfo(name="sm", op_type="Softmax", opset=opset, attrs={"axis": axis}, num_inputs=1, num_outputs=1,
                    input_present=(True,), input_dtypes=(np.dtype(np.float32),), input_shapes=(shape,),
                    const_inputs=(None,))
    k = REGISTRY.lookup("", "Softmax", opset)(info)
    prev = parallel.set_threads(1)
    try:
        want = k(x)[0]
    finally:
        parallel.set_threads(*prev)
    monkeypatch.setattr(parallel, "SPLIT_US", 0.0)  # split even this small Softmax
    monkeypatch.setattr(parallel, "COLD_SPLIT_US", 0.0)
    got = k(x)[0]
    assert got.shape == x.shape and got.dtype == np.float32
    np.testing.assert_array_equal(got, want)
    rows = x.reshape(-1, shape[-1]) if opset >= 13 else x.reshape(int(np.prod(shape[:axis])), -1)
    ref = np.exp(rows.astype(np.float64) - rows.max(axis=1, keepdims=True))
    np.testing.assert_allclose(got.reshape(rows.shape), ref / ref.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("trans_a,trans_b", [(0, 1), (1, 0), (0, 0)])
def test_gemm_split_over_threads_equals_numpy(two_threads, monkeypatch, trans_a, trans_b):
    """The Gemm kernel splits a large float product over the threads as MatMul does (a constant,
    transposed-once B too): numpy's values up to BLAS rounding, alpha, beta and C as before."""
    from nnrt_numpy.ops.math.gemm import Gemm

    calls = []
    real = parallel.matmul
    monkeypatch.setattr(parallel, "matmul", lambda a, b, **kw: calls.append(a.shape) or real(a, b, **kw))
    monkeypatch.setattr(parallel, "SPLIT_US", 0.0)
    monkeypatch.setattr(parallel, "COLD_SPLIT_US", 0.0)
    monkeypatch.setattr(parallel, "MIN_MACS", 1)
    a = RNG.standard_normal((40, 24) if not trans_a else (24, 40)).astype(np.float32)
    b = RNG.standard_normal((24, 70) if not trans_b else (70, 24)).astype(np.float32)
    c = RNG.standard_normal(70).astype(np.float32)
    info = node("Gemm", {"transA": trans_a, "transB": trans_b, "alpha": 0.5, "beta": 2.0},
                [a.shape, b.shape, c.shape], consts=(None, b))
    got = Gemm(info)(a, b, c)[0]
    aa, bb = (a.T if trans_a else a), (b.T if trans_b else b)
    np.testing.assert_allclose(got, 0.5 * (aa.astype(np.float64) @ bb) + 2.0 * c, rtol=1e-4, atol=1e-4)
    assert calls, "the product went through parallel.matmul"
