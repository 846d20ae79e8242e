"""Offline session files (``Session.save`` / ``nnrt compile``) and the model cache."""
from __future__ import annotations

import errno
import json
import logging
import os
import struct
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import nnrt_core.storage.model_cache as model_cache_mod
from nnrt_core import ConfigError, ScheduleConfig, Session, SessionFileError
from nnrt_core.storage import session_file
from nnrt_core.errors import CompileError
from nnrt_core.storage.model_cache import ModelCache
from conftest import make_registry
from fakes import fake_plugin, make_fake_backend


def small_cnn(seed: int = 0) -> bytes:
    """Conv -> Relu -> Flatten -> Gemm -> CumSum: the NPU takes all but CumSum."""
    rng = np.random.default_rng(seed)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    fc = numpy_helper.from_array(rng.standard_normal((4 * 6 * 6, 5)).astype(np.float32) * 0.1, "fc")
    axis = numpy_helper.from_array(np.array(1, np.int64), "axis")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Flatten", ["r"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "fc"], ["g"], name="gemm"),
             helper.make_node("CumSum", ["g", "axis"], ["y"], name="cumsum")]
    g = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])], [w, fc, axis])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    return m.SerializeToString()


@pytest.fixture
def x() -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)}


@pytest.mark.parametrize("backends", [["numpy"], ["onnxruntime"], ["npu_emu"], ["npu_emu", "onnxruntime"]])
def test_saved_session_runs_without_the_model(tmp_path, x, backends):
    sess = Session(small_cnn(), ScheduleConfig(backends=backends, precision="fp16" if "npu_emu" in backends else "fp32"))
    want = sess.run(x)["y"]
    path = sess.save(tmp_path / "model.nnrt")
    loaded = Session(path)
    assert loaded.run(x)["y"].tobytes() == want.tobytes()
    assert loaded.placement == sess.placement
    assert [(p.backend, p.nodes, p.inputs, p.outputs) for p in loaded.partitions] == \
        [(p.backend, p.nodes, p.inputs, p.outputs) for p in sess.partitions]
    assert [e.to_dict() for e in loaded.events] == [e.to_dict() for e in sess.events]
    assert [i.to_dict() for i in loaded.inputs] == [i.to_dict() for i in sess.inputs]
    assert Session(path.read_bytes()).run(x)["y"].tobytes() == want.tobytes()
    if backends == ["npu_emu", "onnxruntime"]:  # heterogeneous: NPU plus the ORT fallback for CumSum
        assert {p.backend for p in loaded.partitions} == {"npu_emu", "onnxruntime"}
        assert loaded.placement["cumsum"] == "onnxruntime"


def test_read_only_views_are_decoded_in_place_and_writable_buffers_copied(x):
    sess = Session(small_cnn(), ScheduleConfig(backends=["numpy"]))
    want = sess.run(x)["y"]
    data = session_file.encode(sess.to_image())
    frozen = np.frombuffer(data, np.uint8)  # read-only, as Ray's object store hands it out
    image = session_file.decode(memoryview(frozen))
    [part] = image.partitions
    assert part.blob.obj is frozen  # a view of the caller's buffer: no copy of the file
    assert Session(memoryview(frozen)).run(x)["y"].tobytes() == want.tobytes()
    buf = bytearray(data)  # writable: decoded from a copy, so changing it afterwards changes nothing
    [part] = session_file.decode(buf).partitions
    before = bytes(part.blob)
    buf[:] = bytes(len(buf))
    assert bytes(part.blob) == before
    bad = np.frombuffer(data, np.uint8).copy()
    bad[-1] ^= 0xFF
    bad.flags.writeable = False
    with pytest.raises(SessionFileError, match="checksum mismatch"):
        session_file.decode(memoryview(bad))  # the checksum is checked on the view too


def test_loaded_session_validates_feeds(tmp_path, x):
    path = Session(small_cnn(), ScheduleConfig(backends=["numpy"])).save(tmp_path / "m.nnrt")
    loaded = Session(path)
    from nnrt_core import InputError

    with pytest.raises(InputError, match="expects dimension 2 to be 8"):
        loaded.run({"x": np.zeros((1, 3, 9, 8), np.float32)})
    with pytest.raises(InputError, match="missing input"):
        loaded.run({})


def test_cli_compile_then_run_in_a_new_process(tmp_path, x):
    model = tmp_path / "cnn.onnx"
    model.write_bytes(small_cnn())
    out = tmp_path / "cnn.nnrt"
    r = subprocess.run([sys.executable, "-m", "nnrt_core.tools.cli", "compile", str(model), "--backend", "npu_emu",
                        "--precision", "fp16",
                        "-o", str(out), "--json"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["output"] == str(out) and info["bytes"] == out.stat().st_size
    assert {p["backend"] for p in info["partitions"]} == {"npu_emu", "numpy"}  # CumSum falls back
    model.unlink()  # the offline file must not need it
    np.save(tmp_path / "x.npy", x["x"])
    code = ("import sys, numpy as np; from nnrt_core import Session; s = Session(sys.argv[1]); "
            "np.save(sys.argv[2], s.run({'x': np.load(sys.argv[3])})['y'])")
    r = subprocess.run([sys.executable, "-c", code, str(out), str(tmp_path / "y.npy"), str(tmp_path / "x.npy")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    want = Session(small_cnn(), ScheduleConfig(precision="fp16", backends=["npu_emu"])).run(x)["y"]
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), want)


def test_corrupted_truncated_and_newer_files_are_refused(tmp_path, x):
    data = Session(small_cnn(), ScheduleConfig(backends=["numpy"])).save(tmp_path / "m.nnrt").read_bytes()
    flipped = bytearray(data)
    flipped[-10] ^= 0xFF
    with pytest.raises(SessionFileError, match="checksum mismatch"):
        Session(bytes(flipped))
    head = bytearray(data)
    head[60] ^= 0xFF
    with pytest.raises(SessionFileError, match="header checksum"):
        Session(bytes(head))
    with pytest.raises(SessionFileError, match="truncated"):
        Session(data[:-100])
    with pytest.raises(SessionFileError, match="truncated"):
        Session(data[:20])
    newer = bytearray(data)
    struct.pack_into("<I", newer, 8, session_file.FORMAT_VERSION + 1)
    with pytest.raises(SessionFileError, match="newer than this nnrt"):
        Session(bytes(newer))
    with pytest.raises(SessionFileError, match="trailing bytes"):
        Session(data + b"\0")


def test_offline_model_on_the_wrong_chip_is_refused(tmp_path):
    # an fp16-chip program, loaded onto the int8 chip
    sess = Session(small_cnn(), ScheduleConfig(precision="fp16", backends=["npu_emu"], devices={"npu_emu": "emu-npu-f16"}))
    path = sess.save(tmp_path / "m.nnrt")
    with pytest.raises(CompileError, match="compiled for chip"):
        Session(path, ScheduleConfig(precision="fp16", backends=["npu_emu"], devices={"npu_emu": "emu-npu-i8"}))


def test_backend_missing_for_a_saved_partition(tmp_path):
    path = Session(small_cnn(), ScheduleConfig(backends=["numpy"])).save(tmp_path / "m.nnrt")
    reg = make_registry(env={"NNRT_BLOCK_PLUGINS": "numpy"})
    with pytest.raises(ConfigError, match="numpy"):
        Session(path, ScheduleConfig(backends=["numpy"]), registry=reg)


def test_backend_that_cannot_serialize(tmp_path):
    reg = make_registry(fake_plugin(make_fake_backend("fake", {"Conv", "Relu"}, priority=50)))
    sess = Session(small_cnn(), ScheduleConfig(backends=["fake"]), registry=reg)
    with pytest.raises(SessionFileError, match="backend 'fake' cannot serialize"):
        sess.save(tmp_path / "m.nnrt")
    cached = Session(small_cnn(), ScheduleConfig(backends=["fake"], cache_dir=str(tmp_path / "c")), registry=reg)
    assert any(e.kind == "cache_disabled" and "cannot serialize" in e.message for e in cached.events)
    assert not list((tmp_path / "c").iterdir())


# ------------------------------------------------------------------ cache
def _cache_files(d) -> list:
    return sorted(p for p in d.iterdir() if p.suffix == ".nnrtc")


def test_cache_cold_then_warm(tmp_path, x):
    cfg = ScheduleConfig(precision="fp16", backends=["npu_emu", "onnxruntime"], cache_dir=str(tmp_path))
    cold = Session(small_cnn(), cfg)
    assert not cold.cache_hit and cold.stats()["cache_hit"] is False
    files = _cache_files(tmp_path)
    assert len(files) == 1 and str(files[0]) == cold.cache_path
    warm = Session(small_cnn(), cfg)
    assert warm.cache_hit and warm.stats()["cache_hit"] is True
    assert warm.run(x)["y"].tobytes() == cold.run(x)["y"].tobytes()
    assert warm.placement == cold.placement
    # another model, another config: other keys
    assert not Session(small_cnn(seed=1), cfg).cache_hit
    assert not Session(small_cnn(), cfg.replace(backends=["onnxruntime"])).cache_hit
    assert len(_cache_files(tmp_path)) == 3


def test_cache_version_rules(tmp_path, x):
    cfg = ScheduleConfig(backends=["numpy"], cache_dir=str(tmp_path), cache_version=1)
    Session(small_cnn(), cfg)
    newer = Session(small_cnn(), cfg.replace(cache_version=2))
    assert not newer.cache_hit  # older cache: rebuilt and rewritten
    assert Session(small_cnn(), cfg.replace(cache_version=2)).cache_hit
    # a newer entry is left alone: the session builds without the cache and says so
    older = Session(small_cnn(), cfg)
    assert not older.cache_hit
    (event,) = [e for e in older.events if e.kind == "cache_disabled"]
    assert "newer than the configured cache_version 1" in event.message and "left as it is" in event.message
    assert Session(small_cnn(), cfg.replace(cache_version=2)).cache_hit  # the entry was not overwritten


def test_cache_entry_in_a_newer_format_is_left_alone(tmp_path, x):
    cfg = ScheduleConfig(backends=["numpy"], cache_dir=str(tmp_path))
    want = Session(small_cnn(), cfg).run(x)["y"]
    (entry,) = _cache_files(tmp_path)
    data = bytearray(entry.read_bytes())
    struct.pack_into("<I", data, 8, session_file.FORMAT_VERSION + 1)
    entry.write_bytes(bytes(data))
    s = Session(small_cnn(), cfg)
    assert not s.cache_hit and np.array_equal(s.run(x)["y"], want)
    (event,) = [e for e in s.events if e.kind == "cache_disabled"]
    assert "newer than this nnrt" in event.message
    assert entry.read_bytes() == bytes(data)


def test_corrupted_cache_is_rebuilt(tmp_path, x, caplog):
    cfg = ScheduleConfig(backends=["numpy"], cache_dir=str(tmp_path))
    want = Session(small_cnn(), cfg).run(x)["y"]
    (entry,) = _cache_files(tmp_path)
    data = bytearray(entry.read_bytes())
    data[-5] ^= 0x55
    entry.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="nnrt.cache"):
        again = Session(small_cnn(), cfg)
    assert not again.cache_hit and "checksum mismatch" in caplog.text
    np.testing.assert_array_equal(again.run(x)["y"], want)
    assert Session(small_cnn(), cfg).cache_hit  # rewritten
    entry.write_bytes(entry.read_bytes()[:1000])  # truncated
    assert not Session(small_cnn(), cfg).cache_hit
    assert Session(small_cnn(), cfg).cache_hit


def test_bad_cache_dirs(tmp_path, monkeypatch):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(ConfigError, match="is a file"):
        Session(small_cnn(), ScheduleConfig(backends=["numpy"], cache_dir=str(f)))
    under_a_file = f / "cache"  # cannot be created: like a full disk, the session runs without writing
    sess = Session(small_cnn(), ScheduleConfig(backends=["numpy"], cache_dir=str(under_a_file)))
    assert any(e.kind == "cache_disabled" and "cannot be created" in e.message for e in sess.events)
    assert sess.run({"x": np.zeros((1, 3, 8, 8), np.float32)})["y"].shape == (1, 5)


def test_read_only_cache_dir_is_read_not_written_like_a_full_disk(tmp_path, monkeypatch):
    """Issue #35: a read-only cache_dir was a ConfigError while a full disk only warned."""
    ro = tmp_path / "ro"
    cfg = ScheduleConfig(backends=["numpy"], cache_dir=str(ro))
    Session(small_cnn(), cfg)  # an entry, written while it was writable
    (entry,) = _cache_files(ro)
    real_access = os.access
    monkeypatch.setattr(model_cache_mod.os, "access", lambda p, mode: False if str(p) == str(ro) else real_access(p, mode))
    assert Session(small_cnn(), cfg).cache_hit  # a read-only cache still gives its entries
    other = ScheduleConfig(backends=["numpy"], cache_dir=str(ro), cache_version=2)  # a miss: built, not written
    sess = Session(small_cnn(), other)
    assert not sess.cache_hit
    assert any(e.kind == "cache_disabled" and "is not writable" in e.message and "running without a cache"
               in e.message for e in sess.events), sess.events
    assert _cache_files(ro) == [entry]
    assert sess.run({"x": np.zeros((1, 3, 8, 8), np.float32)})["y"].shape == (1, 5)


def test_stale_temporary_files_of_killed_writers_are_removed_on_open(tmp_path, monkeypatch):
    """A writer killed mid-write leaves ``.<entry>.<random>.tmp``; the next process opening the
    directory removes those older than STALE_TMP_SECONDS and never a fresh one (a write in progress)."""
    monkeypatch.setattr(model_cache_mod, "_cleaned", set())  # a new process
    stale = tmp_path / ".0123abcd.nnrtc.k1ll3d.tmp"
    fresh = tmp_path / ".4567ef01.nnrtc.wr1t3.tmp"
    foreign = tmp_path / ".notes.txt.old.tmp"  # not ours: left alone, whatever its age
    for p in (stale, fresh, foreign):
        p.write_bytes(b"partial")
    old = time.time() - model_cache_mod.STALE_TMP_SECONDS - 60
    os.utime(stale, (old, old))
    os.utime(foreign, (old, old))
    Session(small_cnn(), ScheduleConfig(backends=["numpy"], cache_dir=str(tmp_path)))
    assert not stale.exists() and fresh.exists() and foreign.exists()


def test_full_disk_degrades_to_no_cache(tmp_path, monkeypatch, x):
    def full(path, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(model_cache_mod, "write_atomic", full)
    sess = Session(small_cnn(), ScheduleConfig(backends=["numpy"], cache_dir=str(tmp_path)))
    assert any(e.kind == "cache_disabled" and "No space left" in e.message for e in sess.events)
    assert sess.run(x)["y"].shape == (1, 5)
    assert not _cache_files(tmp_path)


def test_concurrent_writers_leave_a_valid_entry(tmp_path, x):
    cfg = ScheduleConfig(backends=["numpy"], cache_dir=str(tmp_path))
    results, errors = [], []

    def build():
        try:
            results.append(Session(small_cnn(), cfg).run(x)["y"])
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=build) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert all(r.tobytes() == results[0].tobytes() for r in results)
    (entry,) = _cache_files(tmp_path)  # no stray temporary files either
    assert not [p for p in tmp_path.iterdir() if p.suffix == ".tmp"]
    session_file.decode(entry.read_bytes())
    assert Session(small_cnn(), cfg).cache_hit


def test_cache_key_covers_config_and_backend_versions():
    base = {"backends": ["numpy"], "precision": "fp32"}
    fp = [{"name": "numpy", "version": "1"}]
    k = ModelCache.key("abc", base, fp)
    assert k == ModelCache.key("abc", dict(base), fp)
    assert k == ModelCache.key("abc", {**base, "cache_dir": "/elsewhere"}, fp)
    assert k != ModelCache.key("abd", base, fp)
    assert k != ModelCache.key("abc", {**base, "precision": "fp16"}, fp)
    assert k != ModelCache.key("abc", base, [{"name": "numpy", "version": "2"}])


# ------------------------------------------------------ checksums and formats
def _as_format_1(data: bytes) -> bytes:
    """Rewrite a session file as format 1 wrote it (sha256 per entry)."""
    import hashlib

    fixed = struct.Struct("<8sIIQ32s")
    _, _, _, hlen, _ = fixed.unpack_from(data)
    head = json.loads(data[fixed.size:fixed.size + hlen])
    payload = data[fixed.size + hlen:]
    for e in head["entries"]:
        chunk = payload[e["offset"]:e["offset"] + e["length"]]
        assert e.pop("xxh3_128") == __import__("xxhash").xxh3_128(chunk).hexdigest()
        e["sha256"] = hashlib.sha256(chunk).hexdigest()
    hb = json.dumps(head).encode()
    return fixed.pack(session_file.MAGIC, 1, 0, len(hb), hashlib.sha256(hb).digest()) + hb + payload


def test_format_2_files_with_a_sha256_header_still_load(tmp_path, x):
    import hashlib

    sess = Session(small_cnn(), ScheduleConfig(backends=["numpy"]))
    data = session_file.encode(sess.to_image())
    fixed = struct.Struct("<8sIIQ32s")
    magic, version, flags, hlen, hsum = fixed.unpack_from(data)
    hb = data[fixed.size:fixed.size + hlen]
    assert version == 3 and hsum == __import__("xxhash").xxh3_128(hb).digest().ljust(32, b"\0")
    old = fixed.pack(magic, 2, flags, hlen, hashlib.sha256(hb).digest()) + data[fixed.size:]
    assert Session(old).run(x)["y"].tobytes() == sess.run(x)["y"].tobytes()
    # the version decides the header checksum: an xxh3 header under format 2 is corruption
    with pytest.raises(SessionFileError, match="header checksum mismatch"):
        session_file.decode(fixed.pack(magic, 2, flags, hlen, hsum) + data[fixed.size:])
    flipped = bytearray(data)
    flipped[fixed.size + 5] ^= 0x01
    with pytest.raises(SessionFileError, match="header checksum mismatch"):
        session_file.decode(bytes(flipped))


def test_reading_a_session_file_imports_no_openssl_and_no_build_stages(tmp_path):
    """The deployment path: a compiled file loads without hashlib (sha256), the
    frontends or the build stages of a source model (time to first inference)."""
    import subprocess
    import sys

    path = tmp_path / "m.nnrt"  # ORT partitions (a NumPy partition's nodes are checked against onnx's schemas)
    Session(small_cnn(), ScheduleConfig(backends=["onnxruntime"])).save(path)
    code = ("import sys, numpy as np; from nnrt_core import Session; s = Session(sys.argv[1]); "
            "s.run({'x': np.zeros((1, 3, 8, 8), np.float32)}); "
            "print(' '.join(m for m in ('hashlib', 'tempfile', 'statistics', 'onnx', 'nnrt_core.frontends.onnx.load', "
            "'nnrt_core.compiler.from_source', 'nnrt_core.compiler.measure', 'nnrt_core.passes.manager') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    assert out.stdout.split() == []


def test_format_1_files_with_sha256_entries_still_load(tmp_path, x):
    sess = Session(small_cnn(), ScheduleConfig(backends=["numpy"]))
    old = tmp_path / "old.nnrt"
    old.write_bytes(_as_format_1(session_file.encode(sess.to_image())))
    assert Session(old).run(x)["y"].tobytes() == sess.run(x)["y"].tobytes()
    # a flipped payload byte is caught by the sha256 of format 1 too
    data = bytearray(old.read_bytes())
    data[-3] ^= 0xFF
    with pytest.raises(SessionFileError, match="checksum mismatch"):
        session_file.decode(bytes(data))


def test_entry_without_checksum_is_refused():
    data = session_file.encode(session_file.SessionImage(config={}, inputs=[], outputs=[], partitions=[],
                                                         constants={"c": np.arange(3.0)}))
    fixed = struct.Struct("<8sIIQ32s")
    _, _, _, hlen, _ = fixed.unpack_from(data)
    head = json.loads(data[fixed.size:fixed.size + hlen])
    del head["entries"][0]["xxh3_128"]
    hb = json.dumps(head).encode()
    bad = fixed.pack(session_file.MAGIC, session_file.FORMAT_VERSION, 0, len(hb), session_file.header_digest(hb))
    with pytest.raises(SessionFileError, match=r"field .entries\[0\]. has no checksum"):
        session_file.decode(bad + hb + data[fixed.size + hlen:])


def test_npu_blob_of_format_1_still_loads():
    import hashlib

    from nnrt_npu_emu import blob as npu_blob

    sess = Session(small_cnn(), ScheduleConfig(precision="fp16", backends=["npu_emu"]))
    part = next(s.compiled for s in sess.executor.steps if s.backend.name == "npu_emu")
    new = part.serialize()
    fixed = struct.Struct("<8sIIQQ32s")
    magic, _, flags, hlen, wlen, _ = fixed.unpack_from(new)
    body = new[fixed.size:]
    old = fixed.pack(magic, 1, flags, hlen, wlen, hashlib.sha256(body).digest()) + body
    meta, program, weights = npu_blob.decode(old)
    assert bytes(weights) == bytes(npu_blob.decode(new)[2])
    bad = bytearray(old)
    bad[-1] ^= 1
    with pytest.raises(npu_blob.OfflineModelError, match="checksum mismatch"):
        npu_blob.decode(bytes(bad))


# ------------------------------------------ onnxruntime: optimized partitions
def _ort_partition(sess):
    return next(s.compiled for s in sess.executor.steps if s.backend.name == "onnxruntime")


def test_cached_onnxruntime_partition_loads_pre_optimized(tmp_path, x):
    cfg = ScheduleConfig(backends=["onnxruntime"], cache_dir=str(tmp_path))
    cold = Session(small_cnn(), cfg)
    assert _ort_partition(cold).describe()["stored_form"] == "optimized"
    warm = Session(small_cnn(), cfg)
    assert warm.cache_hit
    info = _ort_partition(warm).describe()
    assert info["stored_form"] == "optimized"
    assert warm.run(x)["y"].tobytes() == cold.run(x)["y"].tobytes()
    # the warm session's ORT ran no optimizer: the graph it holds is ORT's own output
    assert _ort_partition(warm).session.get_session_options().graph_optimization_level.name == "ORT_DISABLE_ALL"
    # its profile (a second session over the same stored weights) runs too
    assert warm.profile(x).to_dict()["traceEvents"]


def test_offline_files_keep_the_portable_onnx_partition(tmp_path, x):
    sess = Session(small_cnn(), ScheduleConfig(backends=["onnxruntime"]))
    assert _ort_partition(sess).describe()["stored_form"] == "onnx"
    loaded = Session(sess.save(tmp_path / "m.nnrt"))
    assert _ort_partition(loaded).describe()["stored_form"] == "onnx"
    assert loaded.run(x)["y"].tobytes() == sess.run(x)["y"].tobytes()


def test_optimized_partition_from_another_machine_is_refused(tmp_path, monkeypatch):
    from nnrt_onnxruntime import backend as ort_backend_mod

    cfg = ScheduleConfig(backends=["onnxruntime"], cache_dir=str(tmp_path))
    blob = _ort_partition(Session(small_cnn(), cfg)).serialize()
    other = {"onnxruntime": "0.0", "arch": "riscv64", "features": []}
    monkeypatch.setattr(ort_backend_mod, "machine_fingerprint", lambda: other)
    from nnrt_onnxruntime.backend import OnnxRuntimeBackend
    from nnrt_core import CompileOptions

    with pytest.raises(CompileError, match="optimized for another machine"):
        OnnxRuntimeBackend().load_compiled(blob, CompileOptions())


def test_optimized_partition_with_bad_weight_offsets_is_refused(tmp_path):
    import onnx

    from nnrt_core import CompileOptions
    from nnrt_onnxruntime.backend import OnnxRuntimeBackend
    from nnrt_onnxruntime.partition import pack_blob, unpack_blob

    cfg = ScheduleConfig(backends=["onnxruntime"], cache_dir=str(tmp_path))
    header, model, weights = unpack_blob(_ort_partition(Session(small_cnn(), cfg)).serialize())
    proto = onnx.load_model_from_string(model)
    ext = next(t for t in proto.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL)
    for e in ext.external_data:
        if e.key == "offset":
            e.value = str(len(weights) * 4)
    header.pop("model_length")
    bad = pack_blob(header, proto.SerializeToString(), bytes(weights))
    with pytest.raises(CompileError, match="does not fit the stored weights"):
        OnnxRuntimeBackend().load_compiled(bad, CompileOptions())
    header["format"] = 99
    with pytest.raises(CompileError, match="newer than this plugin reads"):
        OnnxRuntimeBackend().load_compiled(pack_blob(header, model, bytes(weights)), CompileOptions())
