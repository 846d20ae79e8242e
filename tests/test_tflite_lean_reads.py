"""The import's lean reads agree with the ``tflite`` package and fail cleanly:
options through ``options._FastTable``, fp16 constants through a table of
every half, operator tables and codes read once per subgraph."""
from __future__ import annotations

import importlib
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


def test_options_read_equal_the_tflite_package():
    flat = read_flat_model(mobilenet_like(size=32, width=8, blocks=3, classes=10))
    union = {v: k for k, v in vars(tflite.BuiltinOptions).items() if not k.startswith("_")}
    checked = 0
    for k, op in enumerate(flat.operators(flat.subgraph(0))):
        kind = op.u8(10)
        if not kind:
            continue
        cls = getattr(tflite, union[kind])
        ours = options.read_options(OperatorRef(op, k, "op"), cls)
        ref = cls()
        table = op.table(12)
        ref.Init(table.buf, table.pos)
        for name in _getters(cls):
            assert getattr(ours, name)() == getattr(ref, name)(), (cls.__name__, name)
            checked += 1
    assert checked > 20


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


@pytest.mark.parametrize("shape,perm", [((4, 3, 3, 2), (0, 3, 1, 2)), ((1, 3, 3, 8), (3, 0, 1, 2)),
                                        ((64, 5, 5, 16), (0, 3, 1, 2)), ((16, 1, 1, 512), (0, 3, 1, 2))])
def test_fp16_constants_convert_and_transpose_in_one_pass_bit_for_bit(shape, perm):
    """Below and above LUT_MIN, 1x1 kernels included: the same bits as a transposed copy then astype."""
    every = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    data = every[np.random.default_rng(0).integers(0, 1 << 16, int(np.prod(shape)))].reshape(shape)
    got = half_to_float(data, perm)
    want = np.ascontiguousarray(data.transpose(perm)).astype(np.float32)
    assert got.shape == want.shape and got.flags.c_contiguous and got.dtype == np.float32
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_fp16_conv_weights_behind_dequantize_are_converted_once_in_their_layout(monkeypatch):
    """CONV_2D and DEPTHWISE_CONV_2D weights that are DEQUANTIZEs of fp16 constants: one
    conversion each, straight into OIHW / (C*M)1HW, none in TFLite layout; same bits as before."""
    from nnrt_core.frontends.tflite import context
    rng = np.random.default_rng(2)
    w = TFLiteWriter()
    x = w.input("x", [1, 6, 6, 3])
    w16 = rng.standard_normal((4, 3, 3, 3)).astype(np.float16)
    d16 = rng.standard_normal((1, 3, 3, 4)).astype(np.float16)
    wf, df = w.tensor("wf", [4, 3, 3, 3]), w.tensor("df", [1, 3, 3, 4])
    w.op("DEQUANTIZE", [w.const("w16", w16)], [wf])
    w.op("DEQUANTIZE", [w.const("d16", d16)], [df])
    y, z = w.tensor("y", [1, 6, 6, 4]), w.tensor("z", [1, 6, 6, 4])
    w.op("CONV_2D", [x, wf, w.const("b", np.zeros(4, np.float32))], [y], "Conv2DOptions", Padding=0,
         StrideW=1, StrideH=1)
    w.op("DEPTHWISE_CONV_2D", [y, df, w.const("db", np.zeros(4, np.float32))], [z], "DepthwiseConv2DOptions",
         Padding=0, StrideW=1, StrideH=1, DepthMultiplier=1)
    w.outputs = [z]
    calls = []
    real = context.half_to_float
    monkeypatch.setattr(context, "half_to_float", lambda d, perm=None: calls.append(perm) or real(d, perm))
    g = load_tflite(w.build()).graph
    assert calls == [(0, 3, 1, 2), (3, 0, 1, 2)]
    convs = [n for n in g.nodes if n.op_type == "Conv"]
    assert np.array_equal(convs[0].inputs[1].const, w16.astype(np.float32).transpose(0, 3, 1, 2))
    assert np.array_equal(convs[1].inputs[1].const, d16.astype(np.float32).transpose(3, 0, 1, 2))


def test_operator_lists_and_codes_read_column_wise_match_the_one_table_reader():
    from nnrt_core.frontends.tflite.schema import BULK_OPERATORS
    from nnrt_core.frontends.tflite.table import OPERATOR
    w = TFLiteWriter()
    x = w.input("x", [1, 4])
    for k in range(BULK_OPERATORS + 5):
        y = w.tensor(f"y{k}", [1, 4])
        w.op("RELU" if k % 2 else "TANH", [x], [y])
        x = y
    w.outputs = [x]
    flat = read_flat_model(w.build())
    sg = flat.subgraph(0)
    ops = flat.operators(sg)
    assert flat.operator_io(sg) == [(op.i32s(OPERATOR.inputs), op.i32s(OPERATOR.outputs)) for op in ops]
    assert flat.op_names(sg) == [("TANH", False) if k % 2 == 0 else ("RELU", False) for k in range(len(ops))]
    w.ops[BULK_OPERATORS + 2]["opcode"] = 7
    with pytest.raises(ModelLoadError, match=f"operator {BULK_OPERATORS + 2} uses operator code 7; the model has 2"):
        load_tflite(w.build())


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


@pytest.mark.parametrize("deprecated,builtin,custom", [
    (3, None, None), (3, 3, None), (None, 3, None), (127, 150, None), (None, 150, None), (127, 127, None),
    (32, 32, "MyOp"), (32, 32, ""), (-5, None, None), (4, 100, None), (None, None, None), (126, 9999, None)])
def test_operator_codes_read_by_the_lean_table_equal_the_tflite_package(deprecated, builtin, custom):
    """``schema._op_code`` reads OperatorCode tables from the vtable: the same (name, is_custom) as
    the ``tflite`` package's ``max(BuiltinCode(), DeprecatedBuiltinCode())`` and ``CustomCode()``."""
    from nnrt_core.frontends.tflite.schema import BUILTIN_NAMES, _op_code
    from nnrt_core.frontends.tflite.table import Table
    b = flatbuffers.Builder(64)
    cc = b.CreateString(custom) if custom is not None else None
    m = importlib.import_module("tflite.OperatorCode")
    m.Start(b)
    if deprecated is not None:
        m.AddDeprecatedBuiltinCode(b, deprecated)
    if builtin is not None:
        m.AddBuiltinCode(b, builtin)
    if cc is not None:
        m.AddCustomCode(b, cc)
    b.Finish(m.End(b))
    data = bytes(b.Output())
    pos = struct.unpack_from("<I", data, 0)[0]
    ref = tflite.OperatorCode()
    ref.Init(data, pos)
    code = max(int(ref.BuiltinCode()), int(ref.DeprecatedBuiltinCode()))
    name = BUILTIN_NAMES.get(code)
    if name == "CUSTOM":
        want = ((ref.CustomCode() or b"").decode() or "<unnamed custom op>", True)
    else:
        want = (name or f"<unknown builtin {code}>", False)
    assert _op_code(Table(data, pos)) == want


def test_make_attributes_kinds_and_values():
    """The mappers' plain values become the IR attribute kinds ONNX expects (ints stay ints, bools are
    ints, int lists copied, anything with a float is FLOATS)."""
    from nnrt_core.frontends.tflite.context import make_attributes
    from nnrt_core.ir import AttrKind
    ints = [1, 2]
    attrs = make_attributes({"i": 3, "b": True, "n": np.int64(4), "f": 0.5, "nf": np.float32(1.5), "s": "x",
                             "t": np.zeros(2, np.float32), "l": ints, "e": [], "lb": [True, False],
                             "ln": [np.int32(1), 2], "lf": [1, 2.5], "tu": (3, 4)})
    got = {a.name: (a.kind, a.value) for a in attrs}
    K = AttrKind
    assert {k: v[0] for k, v in got.items()} == {
        "i": K.INT, "b": K.INT, "n": K.INT, "f": K.FLOAT, "nf": K.FLOAT, "s": K.STRING, "t": K.TENSOR, "l": K.INTS,
        "e": K.INTS, "lb": K.INTS, "ln": K.INTS, "lf": K.FLOATS, "tu": K.INTS}
    assert got["b"][1] == 1 and type(got["b"][1]) is int and type(got["n"][1]) is int
    assert got["l"][1] == [1, 2] and got["l"][1] is not ints  # a copy: the mapper may reuse its list
    assert got["lb"][1] == [1, 0] and all(type(x) is int for x in got["lb"][1] + got["ln"][1])
    assert got["lf"][1] == [1.0, 2.5] and got["tu"][1] == [3, 4] and got["e"][1] == []


def test_table_reader_refuses_a_vtable_before_the_buffer():
    """A negative vtable position would make ``struct`` read from the end of the file: refused."""
    from nnrt_core.frontends.tflite.table import QUANT, Table, vector_at
    buf = struct.pack("<i", 100) + bytes(8)
    with pytest.raises(ValueError, match="outside the buffer"):
        Table(buf, 0)
    with pytest.raises(ValueError, match="outside the buffer"):
        vector_at(buf, 0, QUANT.scale)
