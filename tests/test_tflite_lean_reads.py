"""The import's lean reads agree with the ``tflite`` package and fail cleanly:
options through ``options._FastTable``, fp16 constants through a table of
every half, operator tables and codes read once per subgraph."""
from __future__ import annotations

import inspect
import struct

import flatbuffers
import numpy as np
import pytest

tflite = pytest.importorskip("tflite")

from tflite_models import TFLiteWriter, mobilenet_like  # noqa: E402

from nnrt_core.errors import ModelLoadError, NnrtError  # noqa: E402
from nnrt_core.frontends.tflite import load_tflite, options  # noqa: E402
from nnrt_core.frontends.tflite.context import OperatorRef  # noqa: E402
from nnrt_core.frontends.tflite.load import read_flat_model  # noqa: E402
from nnrt_core.frontends.tflite.ops.quant import LUT_MIN, half_to_float  # noqa: E402


def _getters(cls: type) -> list[str]:
    """The zero-argument field accessors of a generated options class."""
    return [n for n, f in vars(cls).items() if inspect.isfunction(f) and n[0].isupper() and n != "Init"
            and len(inspect.signature(f).parameters) == 1 and not n.endswith(("AsNumpy", "IsNone", "Length"))]


def test_options_read_through_the_lean_table_equal_the_tflite_package():
    flat = read_flat_model(mobilenet_like(size=32, width=8, blocks=3, classes=10))
    union = {v: k for k, v in vars(tflite.BuiltinOptions).items() if not k.startswith("_")}
    checked = 0
    for k, op in enumerate(flat.operators(flat.subgraph(0))):
        kind = op.u8(10)
        if not kind:
            continue
        cls = getattr(tflite, union[kind])
        ours = options.read_options(OperatorRef(op, k, "op"), cls)
        assert type(ours._tab) is options._FastTable
        ref = cls()
        table = op.table(12)
        ref.Init(table.buf, table.pos)
        for name in _getters(cls):
            assert getattr(ours, name)() == getattr(ref, name)(), (cls.__name__, name)
            checked += 1
    assert checked > 20


def test_lean_table_refuses_positions_outside_the_buffer():
    buf = struct.pack("<i", 100) + bytes(8)  # a table whose vtable would lie before the buffer
    with pytest.raises(ValueError, match="outside the buffer"):
        options._FastTable(buf, 0).Offset(4)
    with pytest.raises(ValueError, match="outside the buffer"):
        options._FastTable(buf, 0).Get(flatbuffers.number_types.Int32Flags, -4)
    with pytest.raises(struct.error):
        options._FastTable(buf, 10).Offset(4)


def test_corrupt_conv_models_only_raise_our_errors():
    good = mobilenet_like(size=16, width=8, blocks=2, classes=4)
    rng = np.random.default_rng(5)
    for _ in range(150):
        data = bytearray(good)
        for i in rng.integers(0, len(data), rng.integers(1, 4)):
            data[i] = rng.integers(0, 256)
        try:
            load_tflite(bytes(data))
        except NnrtError:
            pass


@pytest.mark.parametrize("shape", [(7,), (LUT_MIN,), (256, 256)])
def test_fp16_constants_convert_bit_for_bit(shape):
    every = np.arange(1 << 16, dtype=np.uint16).view(np.float16)  # NaN payloads and subnormals included
    data = every[: int(np.prod(shape))].reshape(shape)
    for d in (data, data.T, data[::-1]):
        got, want = half_to_float(d), d.astype(np.float32)
        assert got.dtype == np.float32 and got.shape == want.shape and got.flags.c_contiguous
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_operator_tables_and_codes_are_read_once_and_bad_codes_named():
    w = TFLiteWriter()
    x = w.input("x", [1, 4])
    y = w.tensor("y", [1, 4])
    w.op("RELU", [x], [y])
    w.outputs = [y]
    flat = read_flat_model(w.build())
    sg = flat.subgraph(0)
    assert flat.operators(sg) is flat.operators(sg)
    assert flat.op_names(sg) is flat.op_names(sg) and flat.op_names(sg) == [("RELU", False)]
    w.ops[0]["opcode"] = 5
    with pytest.raises(ModelLoadError, match="operator 0 uses operator code 5; the model has 1"):
        load_tflite(w.build())
