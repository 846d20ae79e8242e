"""The TFLite operators the real models of benchmarks/tflite_models.py need beyond
the frontend's core set, each on models written in code and compared with the
LiteRT interpreter (no downloads)."""
from __future__ import annotations

import struct

import numpy as np
import pytest

pytest.importorskip("tflite")
litert = pytest.importorskip("ai_edge_litert.interpreter")

from tflite_models import litert_run  # noqa: E402
from tflite_real_writer import RealWriter  # noqa: E402

from nnrt_core import ScheduleConfig, Session  # noqa: E402
from nnrt_core.errors import ModelLoadError, UnsupportedNodeError  # noqa: E402

RNG = np.random.default_rng(0)


def run_nnrt(model: bytes, feeds: list[np.ndarray], backends=("numpy",)) -> list[np.ndarray]:
    sess = Session(model, ScheduleConfig(backends=list(backends)))
    res = sess.run({i.name: x for i, x in zip(sess.inputs, feeds)})
    return [np.asarray(res[o.name]) for o in sess.outputs]


def assert_matches_litert(model: bytes, feeds: list[np.ndarray], rel: float = 1e-5) -> list[np.ndarray]:
    want = litert_run(model, feeds)
    got = run_nnrt(model, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        scale = max(float(np.abs(w.astype(np.float64)).max()), 1e-6)
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=0, atol=rel * scale)
    return got


# ------------------------------------------------- MediaPipe Convolution2DTransposeBias
def transpose_bias_model(x_shape, kernel, stride, padding, c_out, raw_options=None) -> bytes:
    """input NHWC -> Convolution2DTransposeBias (OHWI weights, bias) -> output."""
    n, h, w_, c = x_shape
    sh, sw = stride
    kh, kw = kernel
    if padding == "SAME":
        oh, ow = h * sh, w_ * sw
    else:
        oh, ow = (h - 1) * sh + kh, (w_ - 1) * sw + kw
    m = RealWriter()
    x = m.input("x", x_shape)
    wt = m.const("w", RNG.standard_normal((c_out, kh, kw, c)).astype(np.float32))
    b = m.const("b", RNG.standard_normal(c_out).astype(np.float32))
    y = m.tensor("y", (n, oh, ow, c_out))
    opts = raw_options if raw_options is not None else struct.pack("<3i", {"SAME": 1, "VALID": 2}[padding], sw, sh)
    m.op("CUSTOM", [x, wt, b], [y], custom="Convolution2DTransposeBias", custom_options=opts)
    m.outputs = [y]
    return m.build()


@pytest.mark.parametrize("x_shape,kernel,stride,padding,c_out", [
    ((1, 8, 8, 16), (2, 2), (2, 2), "SAME", 1),  # selfie_segmentation's last layer, scaled down
    ((1, 5, 7, 3), (3, 3), (2, 2), "SAME", 4),
    ((1, 6, 5, 2), (4, 3), (2, 1), "SAME", 3),
    ((1, 4, 4, 3), (3, 3), (1, 1), "VALID", 2),
    ((1, 5, 3, 2), (3, 2), (2, 3), "VALID", 5),
])
def test_convolution_2d_transpose_bias_matches_litert(x_shape, kernel, stride, padding, c_out):
    model = transpose_bias_model(x_shape, kernel, stride, padding, c_out)
    assert_matches_litert(model, [RNG.standard_normal(x_shape).astype(np.float32)])


def test_convolution_2d_transpose_bias_is_claimed_as_custom_op():
    from nnrt_core.frontends.tflite import custom_ops
    assert "Convolution2DTransposeBias" in custom_ops()


@pytest.mark.parametrize("raw,needle", [
    (b"\x01\x00\x00\x00", "12 bytes"),
    (struct.pack("<3i", 7, 2, 2), "padding 7"),
    (struct.pack("<3i", 1, 0, 2), "positive"),
])
def test_convolution_2d_transpose_bias_bad_options(raw, needle):
    model = transpose_bias_model((1, 4, 4, 2), (2, 2), (2, 2), "SAME", 1, raw_options=raw)
    with pytest.raises(UnsupportedNodeError, match=needle) as e:
        Session(model, ScheduleConfig(backends=["numpy"]))
    assert "Convolution2DTransposeBias" in str(e.value)


def test_convolution_2d_transpose_bias_output_shape_checked():
    m = RealWriter()
    x = m.input("x", (1, 4, 4, 2))
    wt = m.const("w", np.ones((1, 2, 2, 2), np.float32))
    b = m.const("b", np.zeros(1, np.float32))
    y = m.tensor("y", (1, 9, 8, 1))  # SAME, stride 2 makes 8 x 8
    m.op("CUSTOM", [x, wt, b], [y], custom="Convolution2DTransposeBias", custom_options=struct.pack("<3i", 1, 2, 2))
    m.outputs = [y]
    with pytest.raises((UnsupportedNodeError, ModelLoadError), match="expected 8"):
        Session(m.build(), ScheduleConfig(backends=["numpy"]))
