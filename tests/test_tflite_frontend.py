"""The TFLite frontend as a whole: loading paths and bytes, bad input, custom
operators and the plugin hook, subgraphs and signature defs, ONNX export."""
from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("tflite")

from tflite_models import TFLiteWriter  # noqa: E402

from nnrt_core import ScheduleConfig, Session  # noqa: E402
from nnrt_core.errors import ConfigError, ModelLoadError, UnsupportedNodeError  # noqa: E402
from nnrt_core.frontends.detect import is_tflite_source  # noqa: E402
from nnrt_core.frontends.tflite import available_ops, load_tflite, register_op, unregister_op  # noqa: E402


def _fc_model(**tensor_kw) -> TFLiteWriter:
    w = TFLiteWriter()
    x = w.input("x", [2, 4])
    wt = w.const("weights", np.arange(12, dtype=np.float32).reshape(3, 4) / 10)
    b = w.const("bias", np.ones(3, np.float32))
    y = w.tensor("y", [2, 3])
    w.op("FULLY_CONNECTED", [x, wt, b], [y], "FullyConnectedOptions", FusedActivationFunction=1)
    w.outputs = [y]
    return w


def _expected(x: np.ndarray) -> np.ndarray:
    return np.maximum(x @ (np.arange(12, dtype=np.float32).reshape(3, 4) / 10).T + 1, 0)


def test_session_from_bytes_and_from_a_path(tmp_path):
    data = _fc_model().build()
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    p = tmp_path / "m.tflite"
    p.write_bytes(data)
    q = tmp_path / "no_suffix.bin"
    q.write_bytes(data)
    for src in (data, str(p), p, q, bytearray(data)):
        got = Session(src, ScheduleConfig(backends=["numpy"])).run({"x": x})["y"]
        np.testing.assert_allclose(got, _expected(x), rtol=1e-6)
    assert is_tflite_source(data) and is_tflite_source(p) and is_tflite_source(q)
    assert not is_tflite_source(b"\x08\x07abcdefgh") and not is_tflite_source(tmp_path / "x.onnx")


def test_input_shapes_may_restate_but_not_change_static_shapes():
    data = _fc_model().build()
    Session(data, ScheduleConfig(backends=["numpy"], input_shapes={"x": [2, 4]}))
    with pytest.raises(ConfigError, match="does not fit the model's input signature \\[2, 4\\]"):
        Session(data, ScheduleConfig(backends=["numpy"], input_shapes={"x": [5, 4]}))
    with pytest.raises(ConfigError, match="no input"):
        Session(data, ScheduleConfig(backends=["numpy"], input_shapes={"nope": [2, 4]}))


# ------------------------------------------------------------------ bad input
def test_truncated_and_non_tflite_files(tmp_path):
    data = _fc_model().build()
    for cut in (0, 4, 7, 8, 20, len(data) // 2, len(data) - 3):
        with pytest.raises(ModelLoadError):
            load_tflite(data[:cut])
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"this is not a flatbuffer at all")
    with pytest.raises(ModelLoadError, match="not a TFLite model.*identifier"):
        Session(str(bad))
    with pytest.raises(ModelLoadError, match="does not exist"):
        Session(str(tmp_path / "missing.tflite"))


def test_paths_that_are_no_regular_file_are_refused_and_base_dir_is_the_resolved_folder(tmp_path):
    import os
    (tmp_path / "dir.tflite").mkdir()
    os.mkfifo(tmp_path / "fifo.tflite")  # never opened: a FIFO would block the read
    for name in ("dir.tflite", "fifo.tflite", "missing.tflite"):
        with pytest.raises(ModelLoadError, match=f"model file '.*{name}' does not exist or is not a file"):
            load_tflite(tmp_path / name)
    with pytest.raises(ModelLoadError, match="does not exist or is not a file"):
        load_tflite("bad\0path.tflite")
    real = tmp_path / "real"
    real.mkdir()
    (real / "m.tflite").write_bytes(_fc_model().build())
    (tmp_path / "link.tflite").symlink_to(real / "m.tflite")
    assert load_tflite(tmp_path / "link.tflite").base_dir == str((real / "m.tflite").resolve().parent)
    assert load_tflite(str(real / "m.tflite")).base_dir == str(real.resolve())



def test_base_dir_comes_from_the_open_file_or_falls_back_to_realpath(tmp_path, monkeypatch):
    """The resolved folder is read from /proc/self/fd (one readlink); without that link, or when
    it names another file, ``os.path.realpath`` resolves the path as before: same answer."""
    import os
    from nnrt_core.frontends.tflite import load as tfl_load
    real = tmp_path / "real"
    real.mkdir()
    (real / "m.tflite").write_bytes(_fc_model().build())
    (tmp_path / "link.tflite").symlink_to(real / "m.tflite")
    want = str(real.resolve())
    seen = []
    real_readlink = os.readlink
    monkeypatch.setattr(tfl_load, "_readlink", lambda p: seen.append(p) or real_readlink(p))
    assert load_tflite(tmp_path / "link.tflite").base_dir == want
    if os.path.isdir("/proc/self/fd"):
        assert seen and seen[0].startswith("/proc/self/fd/")
    (tmp_path / "other.tflite").write_bytes(b"not the model")
    for broken in (lambda p: (_ for _ in ()).throw(OSError("no /proc")), lambda p: "relative/path",
                   lambda p: str(tmp_path / "other.tflite"), lambda p: str(tmp_path / "gone.tflite (deleted)")):
        monkeypatch.setattr(tfl_load, "_readlink", broken)
        assert load_tflite(tmp_path / "link.tflite").base_dir == want

def test_unknown_schema_version():
    w = _fc_model()
    w.version = 7
    with pytest.raises(ModelLoadError, match="unknown TFLite schema version 7"):
        load_tflite(w.build())


def test_buffer_outside_the_file_is_refused_naming_the_tensor():
    w = _fc_model()
    w.external[1] = (1 << 40, 48)  # the weights' buffer claims data far past the end
    with pytest.raises(ModelLoadError, match="tensor 1 'weights'.*outside the file"):
        load_tflite(w.build())


def test_buffer_size_must_match_the_shape():
    w = TFLiteWriter()
    x = w.input("x", [2, 4])
    wt = w.tensor("weights", [3, 4], np.float32, data=np.zeros(11, np.float32))
    y = w.tensor("y", [2, 3])
    w.op("FULLY_CONNECTED", [x, wt, -1], [y], "FullyConnectedOptions")
    w.outputs = [y]
    with pytest.raises(ModelLoadError, match="tensor 1 'weights': shape \\[3, 4\\] of float needs 48 bytes but its "
                                             "buffer holds 44"):
        load_tflite(w.build())


def test_absurd_tensor_sizes_and_bad_indices():
    w = _fc_model()
    w.tensors[3]["shape"] = [1 << 30, 1 << 30, 8]
    with pytest.raises(ModelLoadError, match="tensor 3 'y'.*over the limit"):
        load_tflite(w.build())
    w = _fc_model()
    w.tensors[1]["buffer"] = 99
    with pytest.raises(ModelLoadError, match="tensor 1 'weights': buffer index 99 is out of range"):
        load_tflite(w.build())
    w = _fc_model()
    w.ops[0]["inputs"][0] = 42
    with pytest.raises(ModelLoadError, match="operator 0 \\(FULLY_CONNECTED\\) refers to tensor 42"):
        load_tflite(w.build())
    w = _fc_model()
    w.tensors[0]["shape"] = [2, -4]
    with pytest.raises(ModelLoadError, match="tensor 0 'x'.*negative"):
        load_tflite(w.build())


def test_random_corruption_only_ever_raises_model_load_error():
    """Flipped bytes and cuts: the loader raises our errors, never struct.error / IndexError / numpy's."""
    from nnrt_core.errors import NnrtError
    good = _fc_model().build()
    rng = np.random.default_rng(18)
    for _ in range(400):
        data = bytearray(good)
        for i in rng.integers(0, len(data), rng.integers(1, 5)):
            data[i] = rng.integers(0, 256)
        try:
            load_tflite(bytes(data[: rng.integers(8, len(data) + 1)]))
        except NnrtError:
            pass


def test_column_reader_of_tensors_agrees_with_the_table_reader_on_corrupt_files(monkeypatch):
    """Tensors read column-wise (numpy gathers) equal the one-table-at-a-time reading,
    and a corrupt file fails the same way either way (no numpy error, no huge allocation)."""
    from nnrt_core.errors import NnrtError
    from nnrt_core.frontends.tflite import schema
    from nnrt_core.frontends.tflite.load import read_flat_model

    monkeypatch.setattr(schema, "BULK_TENSORS", 1)  # column-wise even for this small model

    def read(data: bytes, bulk: bool) -> object:
        try:
            flat = read_flat_model(data)
            return [(t.index, t.name, t.dtype, t.shape, None if t.data is None else t.data.tobytes(),
                     None if t.quant is None else (t.quant.scale.tolist(), t.quant.zero_point.tolist(), t.quant.axis))
                    for t in flat.tensors(flat.subgraph(0), bulk=bulk)]
        except NnrtError as e:
            return f"{type(e).__name__}: {e}"

    w = _fc_model()
    w.input("q", [2, 3], np.int8, quant=(np.array([0.5, 0.25]), np.array([1, -2]), 0))
    good = w.build()
    assert read(good, True) == read(good, False) and not isinstance(read(good, True), str)
    rng = np.random.default_rng(7)
    for _ in range(300):
        data = bytearray(good)
        for i in rng.integers(0, len(data), rng.integers(1, 4)):
            data[i] = rng.integers(0, 256)
        assert read(bytes(data), True) == read(bytes(data), False)


def _graph_facts(model) -> tuple:
    g = model.graph
    return ([(n.name, n.op_type, [v.name if v is not None else None for v in n.inputs],
              [(v.name, str(v.type)) for v in n.outputs], sorted((k, repr(a.value)) for k, a in n.attributes.items()))
             for n in g.nodes],
            {k: (v.const.dtype.str, v.const.shape, v.const.tobytes()) for k, v in g.initializers.items()})


def test_dequantize_shortcut_gives_the_mappers_graph_and_a_replaced_mapper_loses_it():
    """fp16 DEQUANTIZE of a constant skips the OpContext (registry shortcut): the same
    graph as the mapper's; a mapper replaced with register_op runs for every operator."""
    from tflite_models import mobilenet_like

    from nnrt_core.frontends.tflite.ops.quant import dequantize

    data = mobilenet_like(size=32, width=8, blocks=2, classes=10, fp16=True)
    fast = load_tflite(data)
    calls = []

    def wrapped(ctx):
        calls.append(ctx.index)
        dequantize(ctx)

    register_op("DEQUANTIZE", wrapped, custom=False, replace=True)
    try:
        slow = load_tflite(data)
    finally:
        register_op("DEQUANTIZE", dequantize, custom=False, replace=True)
    assert len(calls) >= 5 and _graph_facts(fast) == _graph_facts(slow)


def test_dequantize_with_a_bad_tensor_index_still_fails_naming_the_operator():
    w = TFLiteWriter()
    x = w.input("x", [2])
    c = w.const("c", np.ones(2, np.float16))
    d, y = w.tensor("d", [2]), w.tensor("y", [2])
    w.op("DEQUANTIZE", [c], [d])
    w.op("ADD", [x, d], [y], "AddOptions")
    w.outputs = [y]
    assert np.allclose(Session(w.build(), ScheduleConfig(backends=["numpy"])).run(
        {"x": np.ones(2, np.float32)})["y"], 2)
    w.ops[0]["outputs"] = [99]
    with pytest.raises(ModelLoadError, match=r"operator 0 \(DEQUANTIZE\) refers to tensor 99"):
        load_tflite(w.build())


# ------------------------------------------------------------------ operators
def _custom_model() -> bytes:
    w = TFLiteWriter()
    x = w.input("x", [3])
    y, z = w.tensor("y", [3]), w.tensor("z", [3])
    w.op("CUSTOM", [x], [y], custom="MyAbs")
    w.op("CUMSUM", [y, w.const("axis", np.array(0, np.int32))], [z], "CumsumOptions")
    w.op("CUSTOM", [z], [z], custom="Other")
    w.outputs = [z]
    return w.build()


def test_unmapped_and_custom_operators_are_listed_in_one_error():
    with pytest.raises(UnsupportedNodeError) as e:
        load_tflite(_custom_model())
    msg = str(e.value)
    assert "['CUMSUM']" in msg and "['MyAbs', 'Other']" in msg and "register_op" in msg
    assert "CONV_2D" in msg  # the mapped operators are listed


def test_a_plugin_claims_a_custom_operator_with_register_op():
    w = TFLiteWriter()
    x = w.input("x", [3])
    y = w.tensor("y", [3])
    w.op("CUSTOM", [x], [y], custom="MyAbs")
    w.outputs = [y]

    def my_abs(ctx):
        ctx.set_out(0, ctx.node("Abs", [ctx.x(0)], *ctx.out_type(0)))

    register_op("MyAbs", my_abs)
    try:
        with pytest.raises(ValueError, match="already has a mapper"):
            register_op("MyAbs", my_abs)
        got = Session(w.build(), ScheduleConfig(backends=["numpy"])).run({"x": np.array([-1, 2, -3], np.float32)})
        np.testing.assert_array_equal(got["y"], [1, 2, 3])
    finally:
        unregister_op("MyAbs")
    with pytest.raises(UnsupportedNodeError, match="MyAbs"):
        load_tflite(w.build())


def test_every_mapped_builtin_is_a_real_builtin_name():
    import tflite
    names = set(vars(tflite.BuiltinOperator))
    assert set(available_ops()) <= names and len(available_ops()) >= 55


def test_subgraphs_and_signature_defs_are_reported():
    w = _fc_model()
    w.extra_subgraphs = 2
    w.signatures = [("serving_default", 0, [("in_x", 0)], [("out_y", 3), ("out_z", 2)]), ("other", 2)]
    m = load_tflite(w.build())
    assert json.loads(m.metadata["tflite.subgraphs"]) == ["main", "extra_0", "extra_1"]
    sigs = json.loads(m.metadata["tflite.signatures"])
    assert [(s["key"], s["subgraph"]) for s in sigs] == [("serving_default", 0), ("other", 2)]
    assert m.metadata["tflite.main_subgraph"] == "main"
    import tflite  # the signature defs read from the vtables: the tflite package's answers
    ref = tflite.Model.GetRootAs(w.build(), 0)
    assert [{"key": ref.SignatureDefs(i).SignatureKey().decode(), "subgraph": ref.SignatureDefs(i).SubgraphIndex(),
             "inputs": [ref.SignatureDefs(i).Inputs(j).Name().decode()
                        for j in range(ref.SignatureDefs(i).InputsLength())],
             "outputs": [ref.SignatureDefs(i).Outputs(j).Name().decode()
                         for j in range(ref.SignatureDefs(i).OutputsLength())]}
            for i in range(ref.SignatureDefsLength())] == sigs
    assert sigs[0]["inputs"] == ["in_x"] and sigs[0]["outputs"] == ["out_y", "out_z"]


def test_to_onnx_exports_an_imported_model():
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from nnrt_core.frontends import to_onnx
    w = TFLiteWriter()
    x = w.input("x", [1, 6, 6, 2])
    y = w.tensor("y", [1, 3, 3, 4])
    w.op("CONV_2D", [x, w.const("w", np.ones((4, 3, 3, 2), np.float32) / 9), w.const("b", np.zeros(4, np.float32))],
         [y], "Conv2DOptions", Padding=0, StrideW=2, StrideH=2, FusedActivationFunction=3)
    w.outputs = [y]
    proto = to_onnx(load_tflite(w.build()))
    onnx.checker.check_model(proto, full_check=True)
    feed = np.random.default_rng(1).standard_normal((1, 6, 6, 2)).astype(np.float32)
    got = ort.InferenceSession(proto.SerializeToString()).run(None, {"x": feed})[0]
    want = Session(w.build(), ScheduleConfig(backends=["numpy"])).run({"x": feed})["y"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("command", ["run", "partition", "bench", "compile", "check"])
def test_cli_commands_accept_tflite(tmp_path, command, capsys):
    from nnrt_core.tools.cli import main
    path = tmp_path / "fc.tflite"
    path.write_bytes(_fc_model().build())
    extra = {"compile": ["-o", str(tmp_path / "fc.nnrt")], "bench": ["--runs", "3", "--warmup", "1", "--in-flight", "1"]}.get(command, [])
    assert main([command, str(path), "--backends", "numpy", *extra]) == 0
    assert capsys.readouterr().out


def test_available_operations_and_the_model_cache_take_tflite(tmp_path):
    from nnrt_core.builder import available_operations
    data = _fc_model().build()
    rows = available_operations(data, "numpy")
    assert rows and all(r.supported for r in rows)
    cfg = ScheduleConfig(backends=["numpy"], cache_dir=str(tmp_path / "cache"))
    Session(data, cfg)
    assert Session(data, cfg).cache_hit


def test_the_lean_table_reader_agrees_with_the_tflite_package():
    """frontends/tflite/table.py reads the hot tables straight from the vtables: same answers as ``tflite``."""
    import tflite
    from nnrt_core.frontends.tflite.table import OPERATOR, QUANT, SUBGRAPH, TENSOR, root
    w = _fc_model()
    w.tensor("q", [2, 3], np.int8, quant=([0.5, 0.25, 0.125], [1, 2, 3], 1))
    data = w.build()
    ref = tflite.Model.GetRootAs(data, 0).Subgraphs(0)
    sg = root(data).tables(8)[0]
    tensors = sg.tables(SUBGRAPH.tensors)
    assert len(tensors) == ref.TensorsLength()
    for i, t in enumerate(tensors):
        r = ref.Tensors(i)
        assert t.string(TENSOR.name) == r.Name() and t.u8(TENSOR.type) == r.Type()
        assert t.numbers(TENSOR.shape, np.int32).tolist() == r.ShapeAsNumpy().tolist()
        assert list(t.i32s(TENSOR.shape)) == r.ShapeAsNumpy().tolist()
        assert t.u32(TENSOR.buffer) == r.Buffer()
        q, rq = t.table(TENSOR.quantization), r.Quantization()
        assert (q is None) == (rq is None)
        if q is not None:
            assert q.numbers(QUANT.scale, np.float32).tolist() == [rq.Scale(j) for j in range(rq.ScaleLength())]
            assert q.numbers(QUANT.zero_point, np.int64).tolist() == [rq.ZeroPoint(j) for j in range(rq.ZeroPointLength())]
            assert q.i32(QUANT.quantized_dimension) == rq.QuantizedDimension()
    op, rop = sg.tables(SUBGRAPH.operators)[0], ref.Operators(0)
    assert op.u32(OPERATOR.opcode_index) == rop.OpcodeIndex()
    assert op.numbers(OPERATOR.inputs, np.int32).tolist() == rop.InputsAsNumpy().tolist()
    assert list(op.i32s(OPERATOR.inputs)) == rop.InputsAsNumpy().tolist()
    assert list(op.i32s(OPERATOR.outputs)) == rop.OutputsAsNumpy().tolist()
    start, n = op.vector_position(OPERATOR.inputs)
    with pytest.raises(ValueError, match="outside the buffer"):  # a length running past the file
        op.buf = data[:start + 4 * n - 1]
        op.i32s(OPERATOR.inputs)
    assert op.u8(OPERATOR.builtin_options_type) == rop.BuiltinOptionsType()
    assert op.table(OPERATOR.builtin_options).pos == rop.BuiltinOptions().Pos
