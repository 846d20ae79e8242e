"""The NumPy backend's stored partitions (offline files, the model cache,
Ray's shipped sessions), format 1: a small ONNX model plus a weights region
that loading views in place (still written for graphs format 2 does not
hold, and files of earlier versions); the older plain-ONNX form still loads;
malformed headers and regions are refused with our errors.  Format 2 (the
graph as data): ``test_numpy_stored_graph.py``."""
from __future__ import annotations

import json
import struct

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from nnrt_core import ScheduleConfig, Session
from nnrt_core.errors import CompileError, ModelLoadError, SessionFileError
from nnrt_core.frontends import load_onnx
from nnrt_core.frontends.onnx import load as onnx_load
from nnrt_core.storage.session_file import encode
from nnrt_numpy.backend import NumpyBackend
from nnrt_numpy.stored import MAGIC, WEIGHTS, pack_onnx, unpack

NUMPY = ScheduleConfig(backends=["numpy"])


def _model(seed: int = 0) -> bytes:
    """x [2, 64] @ w [64, 256] (64 KiB: stored in the region) + b [256] (1 KiB: stays in the model) -> Relu."""
    rng = np.random.default_rng(seed)
    w = numpy_helper.from_array(rng.standard_normal((64, 256)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(256).astype(np.float32), "b")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Add", ["h", "b"], ["hb"], name="add"),
             helper.make_node("Relu", ["hb"], ["y"], name="relu")]
    g = helper.make_graph(nodes, "mm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 256])], [w, b])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    return m.SerializeToString()


def _x() -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(1).standard_normal((2, 64)).astype(np.float32)}


def _partition_graph(sess: Session):
    [step] = sess.executor.steps
    return step.compiled.graph


def test_weights_are_views_of_the_loaded_bytes_and_outputs_match():
    sess = Session(_model(), NUMPY)
    want = sess.run(_x())["y"]
    blob = pack_onnx(_partition_graph(sess))
    assert bytes(blob[:len(MAGIC)]) == MAGIC
    file = np.frombuffer(_file_with(sess, blob), np.uint8)  # read-only, as from Ray's object store
    loaded = Session(memoryview(file))
    assert loaded.run(_x())["y"].tobytes() == want.tobytes()
    w = _partition_graph(loaded).initializers["w"].const
    assert np.shares_memory(w, file) and not w.flags.writeable  # viewed in place, never copied or written
    assert not np.shares_memory(_partition_graph(loaded).initializers["b"].const, file)  # small: in the model


def test_plain_onnx_partitions_of_older_files_still_load():
    part = NumpyBackend().load_compiled(_model(), NUMPY.compile_options("numpy"))
    got = part.run(_x())["y"]
    np.testing.assert_allclose(got, Session(_model(), NUMPY).run(_x())["y"], rtol=1e-6)


def _blob_parts(blob: bytes) -> tuple[dict, bytes, bytes]:
    (n,) = struct.unpack_from("<I", blob, len(MAGIC))
    start = len(MAGIC) + 4
    head = json.loads(blob[start:start + n])
    body = blob[start + n:]
    return head, body[:head["model_length"]], body[head["model_length"]:]


def _repack(head: object, model: bytes, region: bytes) -> bytes:
    h = json.dumps(head).encode()
    return MAGIC + struct.pack("<I", len(h)) + h + model + region


@pytest.mark.parametrize("head", [[1], {"format": 3, "model_length": 0, "weights": WEIGHTS},
                                  {"format": 1, "model_length": -1, "weights": WEIGHTS},
                                  {"format": 1, "model_length": 10**9, "weights": WEIGHTS},
                                  {"format": 1, "model_length": "12", "weights": WEIGHTS},
                                  {"format": 1, "model_length": 0, "weights": "../x.bin"}])
def test_malformed_headers_are_refused(head):
    with pytest.raises(CompileError, match="stored numpy partition has a malformed header"):
        unpack(_repack(head, b"", b""))
    with pytest.raises(CompileError, match="truncated"):
        unpack(MAGIC + b"\x01")


def test_a_region_too_short_for_a_tensor_is_refused():
    graph = load_onnx(_model()).graph
    head, model, region = _blob_parts(pack_onnx(graph))
    with pytest.raises(ModelLoadError, match=r"tensor 'w': external data range .* is outside 'weights.bin'"):
        unpack(_repack(head, model, region[:-8]))


def test_a_writable_region_is_copied_so_later_writes_change_nothing():
    graph = load_onnx(_model()).graph
    head, model, region = _blob_parts(pack_onnx(graph))
    buf = bytearray(region)
    g = load_onnx(model, weights={WEIGHTS: buf}).graph
    before = g.initializers["w"].const.copy()
    buf[:] = bytes(len(buf))
    assert np.array_equal(g.initializers["w"].const, before)
    proto = onnx.load_model_from_string(model)
    assert [t.name for t in proto.graph.initializer if t.data_location == TensorProto.EXTERNAL] == ["w"]


def _gemm_model(shared: bool) -> bytes:
    """x [3, 64] -> Gemm(w [128, 64], transB=1) -> y; ``shared``: a second Gemm reads w too."""
    rng = np.random.default_rng(2)
    w = numpy_helper.from_array(rng.standard_normal((128, 64)).astype(np.float32), "w")  # 32 KiB: in the region
    small = numpy_helper.from_array(rng.standard_normal((8, 64)).astype(np.float32), "small")  # 2 KiB: inline
    nodes = [helper.make_node("Gemm", ["x", "w"], ["y"], transB=1, alpha=0.5, name="fc"),
             helper.make_node("Gemm", ["x", "small"], ["z"], transB=1, name="fc_small")]
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 128]),
            helper.make_tensor_value_info("z", TensorProto.FLOAT, [3, 8])]
    if shared:
        nodes.append(helper.make_node("Gemm", ["x", "w"], ["y2"], transB=1, name="fc2"))
        outs.append(helper.make_tensor_value_info("y2", TensorProto.FLOAT, [3, 128]))
    g = helper.make_graph(nodes, "gemm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 64])], outs,
                          [w, small])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    return m.SerializeToString()


@pytest.mark.parametrize("shared", [False, True])
def test_gemm_weights_are_stored_transposed_when_only_that_gemm_reads_them(shared):
    x = {"x": np.random.default_rng(3).standard_normal((3, 64)).astype(np.float32)}
    sess = Session(_gemm_model(shared), NUMPY)
    want = sess.run(x)
    blob = pack_onnx(_partition_graph(sess))
    proto = onnx.load_model_from_string(_blob_parts(bytes(blob))[1])
    trans = {n.name: next(a.i for a in n.attribute if a.name == "transB") for n in proto.graph.node}
    dims = {t.name: list(t.dims) for t in proto.graph.initializer}
    if shared:  # w has two readers: stored as it is
        assert trans["fc"] == trans["fc2"] == 1 and dims["w"] == [128, 64]
    else:
        assert trans["fc"] == 0 and dims["w"] == [64, 128]
    assert trans["fc_small"] == 1 and dims["small"] == [8, 64]  # inline weights are left alone
    # the live session's graph is not touched, and the stored one computes the same (bit for bit)
    assert _partition_graph(sess).initializers["w"].const.shape == (128, 64)
    file = np.frombuffer(_file_with(sess, blob), np.uint8)
    loaded = Session(memoryview(file))
    got = loaded.run(x)
    assert all(got[k].tobytes() == want[k].tobytes() for k in want)
    if not shared:  # the kernel uses the stored bytes as they are: no transposed copy at load
        w = _partition_graph(loaded).initializers["w"].const
        assert np.shares_memory(w, file) and w.shape == (64, 128)


# ------------------------------------------------ loading our own stored form
def _edited(blob, edit) -> bytes:
    """``blob`` (a stored partition) with its model edited by ``edit(proto)``, the region unchanged."""
    head, model, region = _blob_parts(bytes(blob))
    proto = onnx.load_model_from_string(model)
    edit(proto)
    model = proto.SerializeToString()
    return _repack({**head, "model_length": len(model)}, model, region)


def _stored_session() -> tuple[Session, bytes]:
    sess = Session(_model(), NUMPY)
    return sess, pack_onnx(_partition_graph(sess))


def _file_with(sess: Session, blob: bytes) -> bytes:
    """A session file of ``sess`` holding ``blob`` as its partition, checksums valid (a crafted file)."""
    image = sess.to_image()
    image.partitions[0].blob = blob
    return encode(image)


def test_a_fully_typed_stored_partition_loads_without_shape_inference(monkeypatch):
    sess, blob = _stored_session()
    from nnrt_core.frontends.onnx import onnx_api  # what the loader calls, onnx package or not
    calls = []
    real = onnx_api.infer_shapes
    monkeypatch.setattr(onnx_api, "infer_shapes", lambda *a, **k: calls.append(1) or real(*a, **k))
    loaded = Session(_file_with(sess, blob))
    assert calls == []  # every value's type is stored: nothing to infer
    assert loaded.run(_x())["y"].tobytes() == sess.run(_x())["y"].tobytes()

    def untyped(proto):
        del proto.graph.value_info[:]

    again = Session(_file_with(sess, _edited(blob, untyped)))  # types missing: inferred as for any model
    assert calls == [1]
    assert again.run(_x())["y"].tobytes() == sess.run(_x())["y"].tobytes()


def test_crafted_stored_partitions_get_a_session_file_error():
    """Valid checksums, a crafted model: the checks the warm load keeps name the problem."""
    sess, blob = _stored_session()

    def unsorted(proto):
        nodes = list(proto.graph.node)[::-1]
        del proto.graph.node[:]
        proto.graph.node.extend(nodes)

    def wrong_type(proto):  # the MatMul's output declared int64: Add(int64, float) breaks its type constraint
        [vi] = [v for v in proto.graph.value_info if v.name == "h"]
        vi.type.tensor_type.elem_type = TensorProto.INT64

    def bad_arity(proto):
        del proto.graph.node[0].input[1]

    for edit, msg in [(unsorted, r"ONNX model is invalid: .*topologically sorted"),
                      (wrong_type, r"node 'add' \(Add\): input 1 .*has element type float but input 0 has int64"),
                      (bad_arity, r"ONNX model is invalid: Node\(mm\) .*has input size 1")]:
        with pytest.raises(SessionFileError, match=r"stored numpy partition is invalid: " + msg):
            Session(_file_with(sess, _edited(blob, edit)))
    with pytest.raises(SessionFileError, match="stored numpy partition is invalid: stored numpy partition is "
                                               "truncated"):
        Session(_file_with(sess, MAGIC + b"\x01"))


def test_load_onnx_sort_false_refuses_an_unsorted_model_that_the_default_sorts():
    proto = onnx.load_model_from_string(_model())
    nodes = list(proto.graph.node)[::-1]
    del proto.graph.node[:]
    proto.graph.node.extend(nodes)
    assert [n.name for n in load_onnx(proto).graph.nodes] == ["mm", "add", "relu"]
    with pytest.raises(ModelLoadError, match="topologically sorted"):
        onnx_load.load_onnx(proto, sort=False)
