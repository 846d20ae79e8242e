"""External data is memory-mapped at load (issue #7): no copy of the weights,
read-only arrays over one map per file, the same outputs as the in-memory
model on every backend, and the same safety checks."""
from __future__ import annotations

import mmap
import os

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from nnrt_core import ScheduleConfig, Session
from nnrt_core.errors import ModelLoadError
from nnrt_core.frontends import load_onnx
from nnrt_core.frontends.onnx import MMAP_MIN_BYTES
from nnrt_core.storage.model_cache import model_digest

BIG = ("w1", "b1", "w2")  # initializers of MMAP_MIN_BYTES or more


def _mlp(seed: int) -> onnx.ModelProto:
    """MatMul+Add -> Relu -> Reshape (small int64 target) -> MatMul."""
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array(rng.standard_normal((64, 128)).astype(np.float32), "w1"),
             numpy_helper.from_array(rng.standard_normal((8, 128)).astype(np.float32), "b1"),
             numpy_helper.from_array(rng.standard_normal((128, 16)).astype(np.float32), "w2"),
             numpy_helper.from_array(np.array([-1, 128], np.int64), "shape")]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
             helper.make_node("Add", ["h", "b1"], ["hb"], name="bias"),
             helper.make_node("Relu", ["hb"], ["r"], name="relu"),
             helper.make_node("Reshape", ["r", "shape"], ["f"], name="flat"),
             helper.make_node("MatMul", ["f", "w2"], ["y"], name="fc2")]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 16])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    return m


def _save_external(model: onnx.ModelProto, folder, **kw) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    path = str(folder / "model.onnx")
    model = onnx.ModelProto.FromString(model.SerializeToString())  # save_model converts its argument
    onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location="model.data", size_threshold=0, **kw)
    return path


def _mapping(arr: np.ndarray):
    """The mmap.mmap (or np.memmap) under ``arr``, following ``.base`` and memoryviews."""
    obj = arr
    for _ in range(16):
        if isinstance(obj, (mmap.mmap, np.memmap)):
            return obj
        if isinstance(obj, memoryview):
            obj = obj.obj
        elif isinstance(obj, np.ndarray) and obj.base is not None:
            obj = obj.base
        else:
            return None
    return None


X = {"x": np.random.default_rng(3).standard_normal((8, 64)).astype(np.float32)}


@pytest.mark.parametrize("backend", ["numpy", "onnxruntime", "npu_emu"])
def test_external_data_model_runs_like_the_in_memory_model(tmp_path, backend):
    if backend == "npu_emu":
        pytest.importorskip("nnrt_npu_emu")
    if backend == "onnxruntime":
        pytest.importorskip("onnxruntime")
    m = _mlp(seed=700 + len(backend))
    cfg = ScheduleConfig(backends=[backend], backup="numpy")
    expected = Session(m.SerializeToString(), cfg).run(X)["y"]
    sess = Session(_save_external(m, tmp_path), cfg)
    assert backend in sess.placement.values()
    got = sess.run(X)["y"]
    assert got.shape == expected.shape == (8, 16)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_initializers_are_read_only_views_of_one_map(tmp_path):
    m = _mlp(seed=11)
    model = load_onnx(_save_external(m, tmp_path))  # check=True: the checker accepts mapped tensors
    inits = model.graph.initializers
    maps = set()
    for name in BIG:
        arr = inits[name].const
        mm = _mapping(arr)
        assert mm is not None, f"{name} was copied"
        maps.add(id(mm))
        assert not arr.flags.writeable and arr.flags.aligned
        with pytest.raises(ValueError, match="read-only"):
            arr[...] = 0
        want = numpy_helper.to_array(next(t for t in m.graph.initializer if t.name == name))
        assert arr.dtype == want.dtype and arr.shape == want.shape
        np.testing.assert_array_equal(arr, want)
    assert len(maps) == 1  # one map for the file all tensors share
    small = inits["shape"].const  # below MMAP_MIN_BYTES: read, so shape inference sees its values
    assert _mapping(small) is None and small.tolist() == [-1, 128]
    flat = next(n for n in model.graph.nodes if n.op_type == "Reshape").outputs[0]
    assert flat.type.shape == (8, 128)  # Reshape's target was known to shape inference


def test_unaligned_and_packed_tensors_are_copied_bfloat16_is_mapped(tmp_path):
    rng = np.random.default_rng(5)
    f32 = rng.standard_normal(2048).astype(np.float32)
    bf16 = rng.standard_normal(4096).astype(ml_dtypes.bfloat16)
    i4_bytes = numpy_helper.from_array((np.arange(9000) % 16 - 8).astype(ml_dtypes.int4)).raw_data
    assert len(i4_bytes) == 4500
    blob = b"\0" + f32.tobytes() + b"\0" * 7 + bf16.tobytes() + i4_bytes
    (tmp_path / "w.bin").write_bytes(blob)
    spans = {"f32": (1, f32.nbytes), "bf16": (1 + f32.nbytes + 7, bf16.nbytes),
             "i4": (1 + f32.nbytes + 7 + bf16.nbytes, len(i4_bytes))}
    types = {"f32": (TensorProto.FLOAT, [2048]), "bf16": (TensorProto.BFLOAT16, [4096]),
             "i4": (TensorProto.INT4, [9000])}
    inits = []
    for name, (off, n) in spans.items():
        t = TensorProto(name=name, data_type=types[name][0], dims=types[name][1])
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", "w.bin"), ("offset", str(off)), ("length", str(n))):
            t.external_data.add(key=k, value=v)
        inits.append(t)
    g = helper.make_graph([helper.make_node("Identity", [n], [n + "_out"]) for n in spans], "g", [],
                          [helper.make_tensor_value_info(n + "_out", types[n][0], types[n][1]) for n in spans],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    (tmp_path / "model.onnx").write_bytes(m.SerializeToString())
    model = load_onnx(str(tmp_path / "model.onnx"))
    got = {n: model.graph.initializers[n].const for n in spans}
    assert _mapping(got["f32"]) is None  # offset 1: not aligned to 4 bytes, copied
    np.testing.assert_array_equal(got["f32"], f32)
    assert _mapping(got["bf16"]) is not None and got["bf16"].dtype == bf16.dtype  # 2-aligned: mapped
    np.testing.assert_array_equal(got["bf16"].view(np.uint16), bf16.view(np.uint16))
    assert _mapping(got["i4"]) is None  # packed: decoded (a copy)
    np.testing.assert_array_equal(got["i4"].astype(np.int8), np.arange(9000) % 16 - 8)


def test_external_constant_attribute_is_mapped(tmp_path):
    c = np.random.default_rng(9).standard_normal((32, 64)).astype(np.float32)
    g = helper.make_graph([helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(c)),
                           helper.make_node("Add", ["x", "c"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [32, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [32, 64])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    path = _save_external(m, tmp_path, convert_attribute=True)
    assert onnx.load_model(path, load_external_data=False).graph.node[0].attribute[0].t.data_location == \
        TensorProto.EXTERNAL
    model = load_onnx(path)
    const = next(n for n in model.graph.nodes if n.op_type == "Constant")
    assert _mapping(const.attributes["value"].value) is not None
    x = np.ones((32, 64), np.float32)
    np.testing.assert_allclose(Session(path, ScheduleConfig(backends=["numpy"])).run({"x": x})["y"], x + c)


def test_sessions_intern_mapped_weights(tmp_path):
    path = _save_external(_mlp(seed=4242), tmp_path)  # weights no other test holds
    first = Session(path, ScheduleConfig(backends=["numpy"]))
    second = Session(path, ScheduleConfig(backends=["numpy"]))
    big = sum(first.graph.initializers[n].const.nbytes for n in BIG)
    assert first.stats()["shared_weight_bytes"] == 0
    assert second.stats()["shared_weight_bytes"] >= big
    for name in BIG:
        a, b = first.graph.initializers[name].const, second.graph.initializers[name].const
        assert np.shares_memory(a, b) and not b.flags.writeable
        assert _mapping(a) is not None  # interning keeps the mapped array (a read-only view)
    np.testing.assert_array_equal(first.run(X)["y"], second.run(X)["y"])


def test_model_digest_of_external_data_model(tmp_path):
    path = _save_external(_mlp(seed=12), tmp_path)
    d = model_digest(path)
    load_onnx(path)
    assert model_digest(path) == d  # loading (mapping) changes nothing
    data = tmp_path / "model.data"
    st = data.stat()
    os.utime(data, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert model_digest(path) != d  # the data file's time is part of the key
    cfg = ScheduleConfig(backends=["numpy"], cache_dir=str(tmp_path / "cache"))
    cold, warm = Session(path, cfg), Session(path, cfg)
    assert not cold.cache_hit and warm.cache_hit
    np.testing.assert_array_equal(cold.run(X)["y"], warm.run(X)["y"])


def _one_tensor_model(folder, offset: int, length: int, file_bytes: int) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "w.bin").write_bytes(b"\0" * file_bytes)
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[length // 4])
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "w.bin"), ("offset", str(offset)), ("length", str(length))):
        t.external_data.add(key=k, value=v)
    g = helper.make_graph([helper.make_node("Identity", ["w"], ["y"])], "g", [],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [length // 4])], [t])
    path = folder / "model.onnx"
    path.write_bytes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    return str(path)


@pytest.mark.parametrize("offset,length,file_bytes,match", [
    (4096, 8192, 8192, "is outside"),           # past the end of the file
    (-4096, 8192, 8192, "is outside"),          # negative offset
    (0, 8192, 0, "is outside"),                 # empty file (cannot be mapped)
])
def test_mapped_range_checks(tmp_path, offset, length, file_bytes, match):
    with pytest.raises(ModelLoadError, match=match):
        load_onnx(_one_tensor_model(tmp_path, offset, length, file_bytes), check=False)


def test_large_tensor_inside_the_file_is_mapped(tmp_path):
    model = load_onnx(_one_tensor_model(tmp_path, 4096, MMAP_MIN_BYTES * 2, MMAP_MIN_BYTES * 4), check=False)
    arr = model.graph.initializers["w"].const
    assert _mapping(arr) is not None and arr.shape == (MMAP_MIN_BYTES // 2,) and not arr.any()


def test_external_tensor_not_resolved_by_the_loader_is_refused():
    from nnrt_core.frontends.onnx import tensor_to_array

    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2])
    t.data_location = TensorProto.EXTERNAL
    t.external_data.add(key="location", value="w.bin")
    t.external_data.add(key="nnrt.mapped", value="0")
    with pytest.raises(ModelLoadError, match="not loaded"):
        tensor_to_array(t)


def test_nul_byte_in_external_location_is_a_model_load_error(tmp_path):
    w = numpy_helper.from_array(np.ones((2, 3), np.float32), "w")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "a\x00b"), ("offset", "0"), ("length", "24")):
        e = w.external_data.add()
        e.key, e.value = k, v
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [w])
    path = tmp_path / "m.onnx"
    path.write_bytes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    with pytest.raises(ModelLoadError, match="'w'.*NUL byte"):
        Session(str(path), ScheduleConfig(backends=["numpy"]))
