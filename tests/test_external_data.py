"""External data (issues #7, #16): read once into read-only arrays the model
owns, never through the protobuf and never mapped, so a data file truncated
or rewritten after the load changes nothing; the same outputs as the
in-memory model on every backend, and the same safety checks."""
from __future__ import annotations

import mmap
import os
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from nnrt_core import ScheduleConfig, Session
from nnrt_core.errors import ModelLoadError
from nnrt_core.frontends import load_onnx
from nnrt_core.frontends.onnx import MMAP_MIN_BYTES
from nnrt_core.frontends import model_digest


def _precision(backend) -> str:
    """The emulated NPU computes in fp16: asked for fp32 it declines its float nodes."""
    return "fp16" if backend == "npu_emu" else "fp32"

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


def _owned(arr: np.ndarray) -> bool:
    """True when ``arr``'s memory is a numpy allocation (no map, no proto bytes under it)."""
    base = arr
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    return isinstance(base, np.ndarray) and base.flags.owndata and _mapping(arr) is None


X = {"x": np.random.default_rng(3).standard_normal((8, 64)).astype(np.float32)}


@pytest.mark.parametrize("backend", ["numpy", "onnxruntime", "npu_emu"])
def test_external_data_model_runs_like_the_in_memory_model(tmp_path, backend):
    if backend == "npu_emu":
        pytest.importorskip("nnrt_npu_emu")
    if backend == "onnxruntime":
        pytest.importorskip("onnxruntime")
    m = _mlp(seed=700 + len(backend))
    cfg = ScheduleConfig(backends=[backend], backup="numpy", precision=_precision(backend))
    expected = Session(m.SerializeToString(), cfg).run(X)["y"]
    sess = Session(_save_external(m, tmp_path), cfg)
    assert backend in sess.placement.values()
    got = sess.run(X)["y"]
    assert got.shape == expected.shape == (8, 16)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_initializers_are_read_only_arrays_of_their_own(tmp_path):
    m = _mlp(seed=11)
    model = load_onnx(_save_external(m, tmp_path))  # check=True: the checker accepts them
    inits = model.graph.initializers
    for name in BIG:
        arr = inits[name].const
        assert _owned(arr), f"{name} is not an array of its own"
        assert not arr.flags.writeable and arr.flags.aligned
        with pytest.raises(ValueError, match="read-only"):
            arr[...] = 0
        want = numpy_helper.to_array(next(t for t in m.graph.initializer if t.name == name))
        assert arr.dtype == want.dtype and arr.shape == want.shape
        np.testing.assert_array_equal(arr, want)
    small = inits["shape"].const  # below MMAP_MIN_BYTES: read into the proto, so shape inference sees it
    assert small.tolist() == [-1, 128]
    flat = next(n for n in model.graph.nodes if n.op_type == "Reshape").outputs[0]
    assert flat.type.shape == (8, 128)  # Reshape's target was known to shape inference


def test_unaligned_packed_and_bfloat16_tensors(tmp_path):
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
    assert _owned(got["f32"]) and got["f32"].flags.aligned  # offset 1 in the file: read into an aligned array
    np.testing.assert_array_equal(got["f32"], f32)
    assert _owned(got["bf16"]) and got["bf16"].dtype == bf16.dtype
    np.testing.assert_array_equal(got["bf16"].view(np.uint16), bf16.view(np.uint16))
    assert _mapping(got["i4"]) is None  # packed: read into the proto and decoded
    np.testing.assert_array_equal(got["i4"].astype(np.int8), np.arange(9000) % 16 - 8)


def test_external_constant_attribute_is_read(tmp_path):
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
    assert _owned(const.attributes["value"].value)
    x = np.ones((32, 64), np.float32)
    np.testing.assert_allclose(Session(path, ScheduleConfig(backends=["numpy"])).run({"x": x})["y"], x + c)


def test_sessions_intern_external_weights(tmp_path):
    path = _save_external(_mlp(seed=4242), tmp_path)  # weights no other test holds
    first = Session(path, ScheduleConfig(backends=["numpy"]))
    second = Session(path, ScheduleConfig(backends=["numpy"]))
    big = sum(first.graph.initializers[n].const.nbytes for n in BIG)
    assert first.stats()["shared_weight_bytes"] == 0
    assert second.stats()["shared_weight_bytes"] >= big
    for name in BIG:
        a, b = first.graph.initializers[name].const, second.graph.initializers[name].const
        assert np.shares_memory(a, b) and not b.flags.writeable
        assert _owned(a)  # interning keeps the loaded array (a read-only view)
    np.testing.assert_array_equal(first.run(X)["y"], second.run(X)["y"])


def test_model_digest_of_external_data_model(tmp_path):
    path = _save_external(_mlp(seed=12), tmp_path)
    d = model_digest(path)
    load_onnx(path)
    assert model_digest(path) == d  # loading changes nothing
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
    (0, 8192, 0, "is outside"),                 # empty file
])
def test_external_range_checks(tmp_path, offset, length, file_bytes, match):
    with pytest.raises(ModelLoadError, match=match):
        load_onnx(_one_tensor_model(tmp_path, offset, length, file_bytes), check=False)


def test_large_tensor_inside_the_file_is_read(tmp_path):
    model = load_onnx(_one_tensor_model(tmp_path, 4096, MMAP_MIN_BYTES * 2, MMAP_MIN_BYTES * 4), check=False)
    arr = model.graph.initializers["w"].const
    assert _owned(arr) and arr.shape == (MMAP_MIN_BYTES // 2,) and not arr.any()


def test_external_tensor_not_resolved_by_the_loader_is_refused():
    from nnrt_core.frontends.onnx import tensor_to_array

    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2])
    t.data_location = TensorProto.EXTERNAL
    t.external_data.add(key="location", value="w.bin")
    t.external_data.add(key="nnrt.mapped", value="0")
    with pytest.raises(ModelLoadError, match="not loaded"):
        tensor_to_array(t)


def test_data_file_that_is_a_fifo_or_a_directory_is_refused(tmp_path):
    path = _one_tensor_model(tmp_path, 0, 8192, 8192)
    os.unlink(tmp_path / "w.bin")
    os.mkfifo(tmp_path / "w.bin")  # opening it for reading would block
    with pytest.raises(ModelLoadError, match="not a regular file"):
        load_onnx(path, check=False)
    os.unlink(tmp_path / "w.bin")
    os.mkdir(tmp_path / "w.bin")
    with pytest.raises(ModelLoadError, match="not a regular file"):
        load_onnx(path, check=False)


_CHANGED_AFTER_LOAD = textwrap.dedent("""
    import os, sys
    import numpy as np
    from nnrt_core import ScheduleConfig, Session
    path, backend, how = sys.argv[1:4]
    x = {"x": np.random.default_rng(3).standard_normal((8, 64)).astype(np.float32)}
    sess = Session(path, ScheduleConfig(backends=[backend], backup="numpy", precision="fp16" if backend == "npu_emu" else "fp32"))
    before = sess.run(x)["y"]
    data = os.path.join(os.path.dirname(path), "model.data")
    if how == "truncate":
        os.truncate(data, 0)
    else:  # rewrite in place with another model's weights (same layout and size)
        with open(sys.argv[4], "rb") as src, open(data, "r+b") as f:
            f.write(src.read())
    after = sess.run(x)["y"]
    again = Session(path, ScheduleConfig(backends=[backend], backup="numpy", precision="fp16" if backend == "npu_emu" else "fp32")) if how == "rewrite" else None
    print("same" if after.tobytes() == before.tobytes() else "changed",
          "reloaded-differs" if again is not None and again.run(x)["y"].tobytes() != before.tobytes() else "")
""")


@pytest.mark.parametrize("how", ["truncate", "rewrite"])
@pytest.mark.parametrize("backend", ["numpy", "onnxruntime", "npu_emu"])
def test_data_file_changed_after_load_changes_nothing(tmp_path, backend, how):
    """Issue #16: a mapped file truncated after the load killed the process
    with SIGBUS at the next run, and one rewritten in place silently changed
    the outputs.  Run in a child process, so a regression fails the test
    rather than killing pytest."""
    path = _save_external(_mlp(seed=900 + len(backend)), tmp_path / "a")
    _save_external(_mlp(seed=950 + len(backend)), tmp_path / "b")
    assert os.path.getsize(tmp_path / "a" / "model.data") == os.path.getsize(tmp_path / "b" / "model.data")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", _CHANGED_AFTER_LOAD, path, backend, how,
                           str(tmp_path / "b" / "model.data")], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"exit status {done.returncode}: {done.stderr[-2000:]}"
    words = done.stdout.split()
    assert words[0] == "same"
    if how == "rewrite":
        assert words[1:] == ["reloaded-differs"]  # a new session does see the new weights


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
