"""Build-time shortcuts of the TFLite import and the NumPy compile that must not
change what a build produces: shared small constants (QDQ parameters, Clip
bounds), per-tensor quantization read without numpy (and still checked),
buffer tables read column-wise and the kernel registry's remembered lookups."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tflite")

from tflite_models import TFLiteWriter, litert_run, mobilenet_like  # noqa: E402

from nnrt_core import ScheduleConfig, Session  # noqa: E402
from nnrt_core.errors import ModelLoadError  # noqa: E402
from nnrt_core.frontends.tflite import load_tflite  # noqa: E402
from nnrt_core.frontends.tflite.load import read_flat_model  # noqa: E402
from nnrt_numpy.kernel import REGISTRY, Kernel, KernelRegistry  # noqa: E402


def _int8_chain() -> bytes:
    """int8 input -> RELU -> CONCATENATION of it with itself -> int8 output (one scale throughout)."""
    w = TFLiteWriter()
    q = (0.05, -3, 0)
    x = w.input("x", [1, 4, 4, 2], np.int8, quant=q)
    y = w.tensor("y", [1, 4, 4, 2], np.int8, quant=q)
    w.op("RELU", [x], [y])
    z = w.tensor("z", [1, 4, 4, 4], np.int8, quant=q)
    w.op("CONCATENATION", [y, y], [z], "ConcatenationOptions", Axis=3)
    w.outputs = [z]
    return w.build()


def test_qdq_parameters_are_one_constant_per_distinct_value():
    g = load_tflite(_int8_chain()).graph
    qdq = [n for n in g.nodes if n.op_type in ("QuantizeLinear", "DequantizeLinear")]
    assert len(qdq) >= 4
    assert len({id(n.inputs[1]) for n in qdq}) == 1 and len({id(n.inputs[2]) for n in qdq}) == 1
    assert float(qdq[0].inputs[1].const) == pytest.approx(0.05) and int(qdq[0].inputs[2].const) == -3
    assert qdq[0].inputs[2].const.dtype == np.int8
    feed = np.arange(-16, 16, dtype=np.int8).reshape(1, 4, 4, 2)
    out = Session(_int8_chain(), ScheduleConfig(backends=["numpy"])).run({"x": feed})["z"]
    want = np.maximum(feed, -3)  # RELU of q: max(q, zero point)
    np.testing.assert_array_equal(out, np.concatenate([want, want], axis=3))


def test_clip_bounds_are_shared_and_outputs_unchanged():
    model = mobilenet_like(size=16, width=8, blocks=2, classes=4, fp16=True)
    g = load_tflite(model).graph
    clips = [n for n in g.nodes if n.op_type == "Clip"]
    assert len(clips) >= 3
    assert len({id(n.inputs[1]) for n in clips}) == 1 and len({id(n.inputs[2]) for n in clips}) == 1
    assert float(clips[0].inputs[1].const) == 0.0 and float(clips[0].inputs[2].const) == 6.0
    feed = np.random.default_rng(0).standard_normal((1, 16, 16, 3)).astype(np.float32)
    sess = Session(model, ScheduleConfig(backends=["numpy"]))
    np.testing.assert_allclose(next(iter(sess.run({sess.inputs[0].name: feed}).values())),
                               litert_run(model, [feed])[0], rtol=1e-4, atol=1e-5)


def test_kernel_lookup_is_remembered_and_forgotten_when_a_kernel_registers():
    reg = KernelRegistry()

    class Old(Kernel):
        op_type = "MyOp"
        since_version = 1

    class New(Kernel):
        op_type = "MyOp"
        since_version = 7

    assert reg.lookup("", "MyOp", 9) is None  # a miss is not remembered
    reg.register(Old)
    assert reg.lookup("", "MyOp", 9) is Old
    reg.register(New)
    assert reg.lookup("", "MyOp", 9) is New and reg.lookup("", "MyOp", 6) is Old
    assert REGISTRY.lookup("", "Relu", 18) is REGISTRY.lookup("", "Relu", 18)


def _quant_model(scale, zero_point) -> bytes:
    w = TFLiteWriter()
    x = w.input("x", [1, 4], np.int8, quant=(scale, zero_point, 0))
    y = w.tensor("y", [1, 4], np.int8, quant=(0.5, 1, 0))
    w.op("RELU", [x], [y])
    w.outputs = [y]
    return w.build()


@pytest.mark.parametrize("scale", [0.0, -0.25, float("nan"), float("inf")])
def test_per_tensor_scales_must_be_finite_and_positive(scale):
    with pytest.raises(ModelLoadError, match=r"tensor 0 'x': quantization scales must be finite and positive"):
        load_tflite(_quant_model(scale, 0))


@pytest.mark.parametrize("scales", [[0.5, float("nan")], [0.5, -1.0], [float("inf"), 1.0], [0.0, 0.0, 0.0, 0.0]])
def test_per_axis_scales_must_be_finite_and_positive(scales):
    w = TFLiteWriter()
    w.input("x", [1, len(scales)], np.int8, quant=(scales, [0] * len(scales), 1))
    flat = read_flat_model(w.build())
    for bulk in (False, True):
        with pytest.raises(ModelLoadError, match=r"tensor 0 'x': quantization scales must be finite and positive"):
            flat.tensors(flat.subgraph(0), bulk=bulk)


def test_per_axis_quantization_reads_the_file_values_and_empty_scales_mean_none():
    w = TFLiteWriter()
    w.input("x", [1, 3], np.int8, quant=([0.5, 0.25, 0.125], [1, -2, 3], 1))
    w.input("y", [1, 3], np.int8, quant=([0.5, 0.25, 0.125], [], 1))
    w.input("z", [1, 3], np.int8, quant=([], [], 0))
    flat = read_flat_model(w.build())
    x, y, z = flat.tensors(flat.subgraph(0), bulk=False)
    assert x.quant.axis == 1 and x.quant.scale.dtype == np.float32 and x.quant.zero_point.dtype == np.int64
    assert x.quant.scale.tolist() == [0.5, 0.25, 0.125] and x.quant.zero_point.tolist() == [1, -2, 3]
    assert y.quant.zero_point.tolist() == [0, 0, 0] and z.quant is None


def test_per_tensor_quantization_reads_the_file_values_exactly():
    scale = np.float32(0.0123456789)
    flat = read_flat_model(_quant_model(scale, -7))
    q = flat.tensors(flat.subgraph(0), bulk=False)[0].quant
    assert q.axis is None and q.scale.shape == () and q.zero_point.shape == ()
    assert q.scale.dtype == np.float32 and q.scale == scale and q.zero_point.dtype == np.int64 and q.zero_point == -7
    bad = read_flat_model(_quant_model([0.1, 0.2], [0, 0, 0]))
    with pytest.raises(ModelLoadError, match="tensor 0 'x': quantization has 2 scales but 3 zero points"):
        bad.tensors(bad.subgraph(0), bulk=False)


def test_buffer_tables_read_column_wise_match_the_one_table_reader():
    from nnrt_core.frontends.tflite import table
    from nnrt_core.frontends.tflite.schema import BULK_BUFFERS
    w = TFLiteWriter()
    x = w.input("x", [1, 4])
    for k in range(BULK_BUFFERS + 4):  # unused constants: one buffer each
        w.const(f"c{k}", np.full(k % 5 + 1, k, np.float32))
    y = w.tensor("y", [1, 4])
    w.op("RELU", [x], [y])
    w.outputs = [y]
    data = w.build()
    flat = read_flat_model(data)
    one_by_one = [flat._read_buffer(b, i) for i, b in enumerate(flat.root.tables(table.MODEL.buffers))]
    assert flat._buffers_bulk() is not None and flat.buffers == one_by_one and flat.n_buffers == len(one_by_one)
    tensors = flat.tensors(flat.subgraph(0))
    k = BULK_BUFFERS - 1  # tensor 0 is the input, tensor k + 1 the constant c{k}
    assert tensors[k + 1].data.tolist() == [float(k)] * (k % 5 + 1)
    w.external[3] = (1 << 40, 8)  # a buffer claiming data far past the end: refused for the tensor using it
    bad = read_flat_model(w.build())
    assert isinstance(bad.buffers[3], str) and bad.buffers[4] == flat.buffers[4]
    with pytest.raises(ModelLoadError, match="tensor 3 'c2': buffer 3 at offset 1099511627776 with 8 bytes lies "
                                             "outside the file"):
        bad.tensors(bad.subgraph(0))
