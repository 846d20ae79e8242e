"""TFLite import, second round: the ``nnrt_tflite_custom_ops`` plugin hook,
RFFT2D / COMPLEX_ABS (complex tensors as float pairs) and free input dims."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tflite")

from conftest import make_registry  # noqa: E402
from tflite_models import TFLiteWriter  # noqa: E402

from nnrt_core import ScheduleConfig, Session  # noqa: E402
from nnrt_core.errors import PluginError, UnsupportedNodeError  # noqa: E402
from nnrt_core.frontends.tflite import custom_ops, load_tflite  # noqa: E402
from nnrt_core.hookspec import hookimpl  # noqa: E402

NUMPY = ScheduleConfig(backends=["numpy"])


# ------------------------------------------------------------ custom-op hook
def _abs_model(op: str = "PlugAbs") -> bytes:
    w = TFLiteWriter()
    x = w.input("x", [3])
    y = w.tensor("y", [3])
    w.op("CUSTOM", [x], [y], custom=op)
    w.outputs = [y]
    return w.build()


def _plug_abs(ctx) -> None:
    ctx.set_out(0, ctx.node("Abs", [ctx.x(0)], *ctx.out_type(0)))


class _Plugin:
    def __init__(self, answer) -> None:
        self.answer = answer
        self.calls = 0

    @hookimpl
    def nnrt_tflite_custom_ops(self):
        self.calls += 1
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


def test_a_plugin_claims_a_custom_operator_through_the_hook():
    plugin = _Plugin({"PlugAbs": _plug_abs})
    sess = Session(_abs_model(), NUMPY, registry=make_registry(plugin))
    np.testing.assert_array_equal(sess.run({"x": np.array([-1, 2, -3], np.float32)})["y"], [1, 2, 3])
    assert plugin.calls == 1
    assert "PlugAbs" not in custom_ops()  # the hook does not touch the global registry


def test_the_hook_is_not_asked_when_nothing_is_unclaimed():
    w = TFLiteWriter()
    x = w.input("x", [3])
    y = w.tensor("y", [3])
    w.op("ABS", [x], [y])
    w.outputs = [y]
    plugin = _Plugin({"PlugAbs": _plug_abs})
    Session(w.build(), NUMPY, registry=make_registry(plugin))
    assert plugin.calls == 0


@pytest.mark.parametrize("answer, says", [
    (RuntimeError("boom"), "raised RuntimeError: boom"),
    (SystemExit(3), "raised SystemExit"),
    (["PlugAbs"], "returned a list, expected a dict"),
    ({"PlugAbs": 42}, "returned a int for 'PlugAbs', expected a callable mapper"),
    ({3: _plug_abs}, "returned the operator name 3"),
    (None, "returned a NoneType"),
])
def test_a_broken_hook_is_reported_not_a_crash(answer, says):
    with pytest.raises(UnsupportedNodeError) as e:
        Session(_abs_model(), NUMPY, registry=make_registry(_Plugin(answer)))
    msg = str(e.value)
    assert "PlugAbs" in msg and "plugin 'test0'" in msg and says in msg, msg


def test_a_good_plugin_still_works_beside_a_broken_one():
    reg = make_registry(_Plugin(RuntimeError("boom")), _Plugin({"PlugAbs": _plug_abs}))
    got = Session(_abs_model(), NUMPY, registry=reg).run({"x": np.array([-1, 0, 5], np.float32)})
    np.testing.assert_array_equal(got["y"], [1, 0, 5])


def test_two_plugins_claiming_one_operator_is_reported():
    reg = make_registry(_Plugin({"PlugAbs": _plug_abs}), _Plugin({"PlugAbs": _plug_abs}))
    mappers, problems = reg.tflite_custom_ops()
    assert list(mappers) == ["PlugAbs"]
    assert len(problems) == 1 and "claims 'PlugAbs', which plugin 'test0' claims already" in problems[0]


def test_a_plugin_mapper_that_raises_is_a_plugin_error():
    def bad(ctx):
        raise KeyError("nope")

    with pytest.raises(PluginError, match="plugin mapper of custom operator 'PlugAbs' raised KeyError"):
        Session(_abs_model(), NUMPY, registry=make_registry(_Plugin({"PlugAbs": bad})))


# ------------------------------------------------------------ complex tensors
def _litert(model: bytes, feeds, shapes=None):
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=model)
    for d, s in zip(it.get_input_details(), shapes or []):
        it.resize_tensor_input(d["index"], list(s))
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), feeds):
        it.set_tensor(d["index"], x)
    it.invoke()
    return [it.get_tensor(d["index"]).copy() for d in it.get_output_details()]


def _check(model: bytes, feeds, config=NUMPY, shapes=None, tol=1e-4):
    pytest.importorskip("ai_edge_litert")
    want = _litert(model, feeds, shapes)
    sess = Session(model, config)
    got = sess.run(dict(zip([i.name for i in sess.inputs], feeds)))
    for g, w in zip(got.values(), want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape)
        np.testing.assert_allclose(g, w, atol=tol * max(float(np.abs(w).max()), 1e-30), rtol=0)


def _rfft_model(shape, length, squeeze=False) -> bytes:
    w = TFLiteWriter()
    x = w.input("x", shape)
    fl = w.const("fft_length", np.array(length, np.int32))
    out = list(shape[:-2]) + [length[0], length[1] // 2 + 1]
    c = w.tensor("spectrum", out, np.complex64)
    w.op("RFFT2D", [x, fl], [c], "Rfft2dOptions")
    if squeeze:
        out = out[:-2] + out[-1:]
        c2 = w.tensor("squeezed", out, np.complex64)
        w.op("SQUEEZE", [c], [c2], "SqueezeOptions")
        w.tensors[c2]["shape"] = out
        c = c2
    a, r, i, k = (w.tensor(n, out) for n in ("abs", "real", "imag", "cast"))
    w.op("COMPLEX_ABS", [c], [a])
    w.op("REAL", [c], [r])
    w.op("IMAG", [c], [i])
    w.op("CAST", [c], [k], "CastOptions")
    w.outputs = [a, r, i, k]
    return w.build()


@pytest.mark.parametrize("backend", ["numpy", "onnxruntime"])
@pytest.mark.parametrize("shape, length, squeeze", [
    ([2, 3, 1, 16], [1, 16], True),     # the audio models' form: one row, frames x samples
    ([3, 1, 20], [1, 16], False),       # cropped to fft_length
    ([3, 1, 12], [1, 16], False),       # zero-padded to fft_length
    ([2, 4, 8], [4, 8], False),         # a real 2-D transform
    ([5, 2048], [1, 2048], False),      # the real models' size
])
def test_rfft2d_and_complex_parts_match_litert(backend, shape, length, squeeze):
    if len(shape) == 2:
        shape = [1] + shape
    x = np.random.default_rng(0).normal(size=shape).astype(np.float32)
    _check(_rfft_model(shape, length, squeeze), [x], ScheduleConfig(backends=[backend], backup="numpy"))


@pytest.mark.parametrize("length", [[1, 2048], [4, 8]])
def test_rfft2d_is_an_onnx_dft_that_ort_runs(length):
    """RFFT2D is ONNX DFT (an FFT in the engines: 43 frames of 2048 samples took 1.7 ms as DFT on
    ORT, one thread, against 30 ms for the two 43x2048x1025 matrix products it was before)."""
    shape = [1, length[0], length[1]]
    model = _rfft_model(shape, length)
    ops = [n.op_type for n in load_tflite(model).graph.nodes]
    assert ops.count("DFT") == (2 if length[0] > 1 else 1) and "MatMul" not in ops
    sess = Session(model, ScheduleConfig(backends=["onnxruntime"], backup="numpy"))
    assert {p.backend for p in sess.placement_report} == {"onnxruntime"}


@pytest.mark.parametrize("backend", ["numpy", "onnxruntime"])
def test_rfft2d_of_other_lengths_matches_numpy_fft(backend):
    """LiteRT's kernel takes power-of-two lengths only; nnrt's DFT computes any (checked against numpy)."""
    shape, length = [2, 3, 10], [3, 12]
    x = np.random.default_rng(2).normal(size=shape).astype(np.float32)
    sess = Session(_rfft_model(shape, length), ScheduleConfig(backends=[backend], backup="numpy"))
    got = sess.run({sess.inputs[0].name: x})
    want = np.fft.rfft2(np.pad(x.astype(np.float64), [(0, 0), (0, 0), (0, 2)]))
    real, imag = (got[o.name] for o in sess.outputs[1:3])
    scale = float(np.abs(want).max())
    assert real.shape == want.shape and np.abs(real - want.real).max() <= 1e-5 * scale
    assert np.abs(imag - want.imag).max() <= 1e-5 * scale


def test_other_ops_refuse_complex_inputs():
    w = TFLiteWriter()
    x = w.input("x", [1, 1, 8])
    c = w.tensor("c", [1, 1, 5], np.complex64)
    w.op("RFFT2D", [x, w.const("fl", np.array([1, 8], np.int32))], [c], "Rfft2dOptions")
    y = w.tensor("y", [1, 1, 5], np.complex64)
    w.op("EXP", [c], [y])
    z = w.tensor("z", [1, 1, 5])
    w.op("COMPLEX_ABS", [y], [z])
    w.outputs = [z]
    with pytest.raises(UnsupportedNodeError, match="input 0 \\('c'\\) is complex64"):
        Session(w.build(), NUMPY)


def test_rfft2d_refuses_bad_fft_length():
    w = TFLiteWriter()
    x = w.input("x", [1, 1, 8])
    c = w.tensor("c", [1, 1, 5], np.complex64)
    w.op("RFFT2D", [x, w.const("fl", np.array([8], np.int32))], [c], "Rfft2dOptions")
    a = w.tensor("a", [1, 1, 5])
    w.op("COMPLEX_ABS", [c], [a])
    w.outputs = [a]
    with pytest.raises(UnsupportedNodeError, match="fft_length \\[8\\] must be two sizes"):
        Session(w.build(), NUMPY)


# ------------------------------------------------------------ free input dims
def _free_batch_model() -> bytes:
    """x: signature [-1, 4] declared [1, 4]; the batch flows through SHAPE ->
    STRIDED_SLICE -> PACK -> RESHAPE, as converters write it."""
    w = TFLiteWriter()
    x = w.input("x", [1, 4])
    w.tensors[x]["signature"] = [-1, 4]
    s = w.tensor("s", [2], np.int32)
    w.op("SHAPE", [x], [s], "ShapeOptions", OutType=2)
    n = w.tensor("n", [], np.int32)
    consts = [w.const(k, np.array(v, np.int32)) for k, v in (("b", [0]), ("e", [1]), ("st", [1]))]
    w.op("STRIDED_SLICE", [s, *consts], [n], "StridedSliceOptions", ShrinkAxisMask=1)
    p = w.tensor("p", [3], np.int32)
    two = w.const("two", np.array(2, np.int32))
    w.op("PACK", [n, two, two], [p], "PackOptions", ValuesCount=3, Axis=0)
    h = w.tensor("h", [1, 4])
    w.tensors[h]["signature"] = [-1, 4]
    wt = w.const("w", np.random.default_rng(1).normal(size=(4, 4)).astype(np.float32))
    w.op("FULLY_CONNECTED", [x, wt, w.const("bias", np.ones(4, np.float32))], [h], "FullyConnectedOptions")
    r = w.tensor("r", [1, 2, 2])
    w.tensors[r]["signature"] = [-1, 2, 2]
    w.op("RESHAPE", [h, p], [r])
    y = w.tensor("y", [1, 2])
    w.tensors[y]["signature"] = [-1, 2]
    w.op("MEAN", [r, w.const("axes", np.array([2], np.int32))], [y], "ReducerOptions", KeepDims=False)
    w.outputs = [y]
    return w.build()


@pytest.mark.parametrize("batch", [1, 3, 7])
def test_free_input_dims_follow_input_shapes_like_litert_resize(batch):
    x = np.random.default_rng(batch).normal(size=(batch, 4)).astype(np.float32)
    cfg = ScheduleConfig(backends=["numpy"], input_shapes={"x": [batch, 4]})
    _check(_free_batch_model(), [x], cfg, shapes=[(batch, 4)], tol=1e-5)


def test_free_input_dims_default_to_the_declared_shape():
    x = np.random.default_rng(0).normal(size=(1, 4)).astype(np.float32)
    _check(_free_batch_model(), [x], NUMPY, tol=1e-5)
    from nnrt_core.frontends.tflite import load_tflite

    model = load_tflite(_free_batch_model(), input_shapes={"x": [5, 4]})
    assert model.graph.inputs[0].type.shape == (5, 4) and model.graph.outputs[0].type.shape == (5, 2)
    assert not any(n.op_type in ("Shape", "Concat") for n in model.graph.nodes)  # shape arithmetic folded


def test_input_shapes_may_only_set_free_dims():
    from nnrt_core.errors import ConfigError

    with pytest.raises(ConfigError, match="does not fit the model's input signature \\[-1, 4\\]"):
        Session(_free_batch_model(), ScheduleConfig(backends=["numpy"], input_shapes={"x": [3, 5]}))
    with pytest.raises(ConfigError, match="does not fit"):
        Session(_free_batch_model(), ScheduleConfig(backends=["numpy"], input_shapes={"x": [3]}))


def test_a_dynamic_tensor_without_a_shape_rule_is_refused():
    w = TFLiteWriter()
    x = w.input("x", [1, 2, 2, 4])
    w.tensors[x]["signature"] = [-1, 2, 2, 4]
    y = w.tensor("y", [1, 4, 4, 1])
    w.tensors[y]["signature"] = [-1, 4, 4, 1]
    w.op("DEPTH_TO_SPACE", [x], [y], "DepthToSpaceOptions", BlockSize=2)
    w.outputs = [y]
    with pytest.raises(UnsupportedNodeError, match="DEPTH_TO_SPACE.*\\['y'\\] depend on the free input dim"):
        Session(w.build(), NUMPY)


def test_a_static_signature_contradicting_the_inputs_is_refused():
    w = TFLiteWriter()
    x = w.input("x", [1, 4])
    w.tensors[x]["signature"] = [-1, 4]
    y = w.tensor("y", [1, 4])
    w.tensors[y]["signature"] = [1, 4]  # claims static, but follows x's batch
    w.op("RELU", [x], [y])
    w.outputs = [y]
    from nnrt_core.errors import ModelLoadError

    with pytest.raises(ModelLoadError, match="static shape signature \\[1, 4\\], but its inputs give \\[3, 4\\]"):
        Session(w.build(), ScheduleConfig(backends=["numpy"], input_shapes={"x": [3, 4]}))


def test_available_operations_uses_the_hook_too():
    from nnrt_core.builder import available_operations

    reg = make_registry(_Plugin({"PlugAbs": _plug_abs}))
    support = available_operations(_abs_model(), "numpy", registry=reg)
    assert [s.op_type for s in support] == ["Abs"] and all(s.supported for s in support)


def test_random_corruption_of_a_free_dims_model_only_raises_our_errors():
    from nnrt_core.errors import NnrtError
    from nnrt_core.frontends.tflite import load_tflite

    good = _free_batch_model()
    rng = np.random.default_rng(7)  # this seed hit an options accessor outside the guard once
    for _ in range(3000):
        data = bytearray(good)
        for i in rng.integers(0, len(data), rng.integers(1, 5)):
            data[i] = rng.integers(0, 256)
        try:
            load_tflite(bytes(data), input_shapes={"x": [3, 4]})
        except NnrtError:
            pass


def test_complex_graph_outputs_are_refused():
    w = TFLiteWriter()
    x = w.input("x", [1, 1, 8])
    c = w.tensor("c", [1, 1, 5], np.complex64)
    w.op("RFFT2D", [x, w.const("fl", np.array([1, 8], np.int32))], [c], "Rfft2dOptions")
    w.outputs = [c]
    with pytest.raises(UnsupportedNodeError, match="tensor 1 'c' is a complex64 graph input or output"):
        Session(w.build(), NUMPY)


LAZY_PLUGIN = _Plugin({"PlugAbs": _plug_abs})  # loaded through an entry point by the test below


def test_a_lazily_loaded_plugin_is_imported_for_unclaimed_custom_ops():
    from importlib import metadata

    from conftest import builtin_entry_points
    from nnrt_core.registry import BACKEND_GROUP, Registry

    ep = metadata.EntryPoint(name="lazy_tflite", value=f"{__name__}:LAZY_PLUGIN", group=BACKEND_GROUP)
    reg = Registry(entry_points=lambda g: builtin_entry_points(g) + ([ep] if g == BACKEND_GROUP else []), env={})
    got = Session(_abs_model(), NUMPY, registry=reg).run({"x": np.array([-2, 3, -4], np.float32)})
    np.testing.assert_array_equal(got["y"], [2, 3, 4])
