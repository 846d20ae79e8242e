"""The Conv kernel's repeat-call ways: after the first call on an input shape, a stride-1 1x1
conv with constant weights (``Conv._pointwise``) and a depthwise conv (its plan remembered per
input shape) skip the per-call checks; their output must equal the first (checked) call's bit
for bit, and the reference, and anything else (runtime weights or bias, other shapes, strided
input) takes the checked way."""
from __future__ import annotations

import numpy as np
import pytest

import nnrt_numpy.backend  # noqa: F401  (registers the kernels)
from nnrt_numpy.kernel import NodeInfo
from nnrt_numpy.ops.nn.conv import Conv

RNG = np.random.default_rng(11)


def make(c: int, m: int, group: int = 1, bias: bool = True, dtype=np.float32, strides=(1, 1)) -> tuple:
    w = RNG.standard_normal((m, c // group, 1, 1)).astype(dtype)
    b = RNG.standard_normal(m).astype(dtype) if bias else None
    info = NodeInfo("c", "Conv", opset=11, attrs={"group": group, "strides": list(strides)},
                    num_inputs=3 if bias else 2, input_present=(True, True, bias)[:3 if bias else 2],
                    input_dtypes=(np.dtype(dtype),) * (3 if bias else 2),
                    const_inputs=(None, w, b) if bias else (None, w))
    return Conv(info), w, b


def reference(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, group: int) -> np.ndarray:
    n, c = x.shape[:2]
    m = w.shape[0]
    xs = x.astype(np.float64).reshape(n, group, c // group, -1)
    ws = w.astype(np.float64).reshape(group, m // group, c // group)
    y = np.einsum("gmc,ngcp->ngmp", ws, xs).reshape((n, m) + x.shape[2:])
    return y if b is None else y + b.reshape(1, m, 1, 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("c,m,group,bias,shape", [
    (8, 16, 1, True, (1, 8, 12, 96)), (16, 88, 1, False, (2, 16, 3, 7)), (12, 6, 3, True, (3, 12, 5, 4)),
    (8, 4, 4, True, (1, 8, 1, 1)), (200, 32, 1, True, (8, 200, 2, 96))])
def test_repeat_calls_equal_the_first_call_and_the_reference(dtype, c, m, group, bias, shape):
    k, w, b = make(c, m, group, bias, dtype)
    x = RNG.standard_normal(shape).astype(dtype)
    first = k(x, w, b)[0]
    assert k._pw, "the first call records the shape"
    again = k(x, w, b)[0]
    x2 = RNG.standard_normal(shape).astype(dtype)
    other = k(x2, w, b)[0]
    np.testing.assert_array_equal(again, first)
    assert again.shape == first.shape == (shape[0], m) + shape[2:] and again.dtype == dtype
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(first, reference(x, w, b, group), rtol=tol, atol=tol)
    np.testing.assert_allclose(other, reference(x2, w, b, group), rtol=tol, atol=tol)


def test_runtime_weights_bias_strided_input_and_new_shapes_take_the_checked_way():
    k, w, b = make(8, 16)
    x = RNG.standard_normal((2, 8, 6, 10)).astype(np.float32)
    k(x, w, b)
    w2, b2 = w * 2, b + 1  # not the node's constants
    np.testing.assert_allclose(k(x, w2, b)[0], reference(x, w2, b, 1), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(k(x, w, b2)[0], reference(x, w, b2, 1), rtol=1e-4, atol=1e-4)
    xt = np.ascontiguousarray(x.transpose(0, 1, 3, 2)).transpose(0, 1, 3, 2)  # same shape, not C-contiguous
    np.testing.assert_allclose(k(xt, w, b)[0], reference(x, w, b, 1), rtol=1e-4, atol=1e-4)
    x3 = RNG.standard_normal((1, 8, 3, 3)).astype(np.float32)
    np.testing.assert_allclose(k(x3, w, b)[0], reference(x3, w, b, 1), rtol=1e-4, atol=1e-4)
    with pytest.raises(Exception, match="channels"):  # a bad shape still fails with the kernel's message
        k(RNG.standard_normal((1, 5, 3, 3)).astype(np.float32), w, b)


def test_strided_pointwise_is_not_recorded():
    k, w, b = make(8, 16, strides=(2, 2))
    x = RNG.standard_normal((1, 8, 6, 10)).astype(np.float32)
    y1 = k(x, w, b)[0]
    assert not k._pw
    np.testing.assert_allclose(y1, reference(x[:, :, ::2, ::2], w, b, 1), rtol=1e-4, atol=1e-4)


def test_out_and_epilogue_still_apply():
    k, w, b = make(8, 16)
    x = RNG.standard_normal((1, 8, 4, 4)).astype(np.float32)
    first = k(x, w, b)[0]
    out = np.empty((1, 16, 4, 4), np.float32)
    checked = k._plan
    k._plan = None  # the repeat-call way must not need it: it writes straight into out
    got = k(x, w, b, out=out)[0]
    k._plan = checked
    assert got is out
    np.testing.assert_array_equal(out, first)
    strided = np.full((1, 16, 4, 8), np.nan, np.float32)[..., ::2]  # not contiguous: the checked way
    assert k(x, w, b, out=strided)[0] is strided
    np.testing.assert_array_equal(strided, first)
    relu = k(x, w, b, epilogue=lambda y: np.maximum(y, 0, out=y))[0]
    np.testing.assert_array_equal(relu, np.maximum(out, 0))


def make_dw(c: int, k: int, nd: int = 2, mult: int = 1) -> tuple:
    w = RNG.standard_normal((c * mult, 1) + (k,) * nd).astype(np.float32)
    b = RNG.standard_normal(c * mult).astype(np.float32)
    info = NodeInfo("d", "Conv", opset=11, attrs={"group": c, "pads": [k // 2] * (2 * nd)}, num_inputs=3,
                    input_present=(True, True, True), input_dtypes=(np.dtype(np.float32),) * 3,
                    const_inputs=(None, w, b))
    return Conv(info), w, b


def dw_reference(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Direct depthwise convolution with same padding (float64), 1-D or 2-D."""
    x2 = x if x.ndim == 4 else x[:, :, None]
    w2 = w if w.ndim == 4 else w[:, :, None]
    n, c, h, wd = x2.shape
    mult = w2.shape[0] // c
    kh, kw = w2.shape[2:]
    xp = np.pad(x2.astype(np.float64), ((0, 0), (0, 0), (kh // 2, kh // 2), (kw // 2, kw // 2)))
    y = np.zeros((n, c * mult, h, wd))
    for m in range(c * mult):
        for i in range(kh):
            for j in range(kw):
                y[:, m] += w2[m, 0, i, j] * xp[:, m // mult, i:i + h, j:j + wd]
    y += b.reshape(1, -1, 1, 1)
    return y if x.ndim == 4 else y[:, :, 0]


@pytest.mark.parametrize("shape,k,mult", [((1, 200, 2, 96), 5, 1), ((2, 24, 12, 9), 3, 1), ((1, 16, 40), 5, 1),
                                          ((1, 8, 6, 7), 3, 2)])
def test_depthwise_repeat_calls_equal_the_first_call_and_the_reference(shape, k, mult):
    k_, w, b = make_dw(shape[1], k, len(shape) - 2, mult)
    x = RNG.standard_normal(shape).astype(np.float32)
    first = k_(x, w, b)[0]
    assert x.shape in k_._dwf
    again = k_(x, w, b)[0]
    np.testing.assert_array_equal(again, first)
    np.testing.assert_allclose(first, dw_reference(x, w, b), rtol=1e-4, atol=1e-4)
    w2 = w * 0.5  # other weights of the same shape (a runtime input): the plan's weights follow them
    np.testing.assert_allclose(k_(x, w2, b)[0], dw_reference(x, w2, b), rtol=1e-4, atol=1e-4)
    with pytest.raises(Exception, match="bias"):  # still checked on the remembered way
        k_(x, w, b[:-1])


def test_depthwise_remembered_plan_yields_to_the_tap_loop(monkeypatch):
    from nnrt_numpy.ops.nn import conv
    k_, w, b = make_dw(8, 3)
    x = RNG.standard_normal((1, 8, 5, 6)).astype(np.float32)
    first = k_(x, w, b)[0]
    monkeypatch.setattr(conv, "TAP_LOOP_MAX", 10 ** 9)  # tests send small convs to the per-tap loop
    np.testing.assert_allclose(k_(x, w, b)[0], first, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape,m", [((8, 32, 2, 96), 200), ((1, 16, 3, 96), 88), ((2, 8, 1, 1), 4),
                                     ((1, 320, 3, 80), 320), ((1, 64, 64, 80), 64)])  # the last: the column
def test_constant_bias_added_as_a_plane_gives_the_column_sums(shape, m):
    k, w, b = make(shape[1], m)
    x = RNG.standard_normal(shape).astype(np.float32)
    n, c = shape[:2]
    want = (np.matmul(w.reshape(m, c), x.reshape(n, c, -1)) + b.reshape(-1, 1)).reshape((n, m) + shape[2:])
    for _ in range(2):  # the checked call, then the repeat-call way
        np.testing.assert_array_equal(k(x, w, b)[0], want)


def test_bias_planes_stay_bounded_over_many_image_sizes():
    from nnrt_numpy.ops.nn import conv
    k, w, b = make(4, 6)
    for width in range(1, 30):
        x = RNG.standard_normal((1, 4, 1, width)).astype(np.float32)
        np.testing.assert_allclose(k(x, w, b)[0], reference(x, w, b, 1), rtol=1e-5, atol=1e-5)
    assert 0 < len(k._bias_planes) <= conv.BIAS_PLANES
    assert all(p.shape[0] * p.shape[1] <= conv.BIAS_ROWS_MAX for p in k._bias_planes.values())
    assert sorted(k._bias_planes) == list(range(30 - conv.BIAS_PLANES, 30))  # the last sizes seen
