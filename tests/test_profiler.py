"""Session.profile: Chrome / Perfetto trace JSON of one run."""
from __future__ import annotations

import json

import numpy as np
import pytest

from fakes import fake_plugin, make_fake_backend
from conftest import make_registry
from nnrt_core import ScheduleConfig, Session
from nnrt_core.tools.cli import main
from nnrt_core.errors import InputError
from nnrt_core.profiling.profiler import HOST_PID, Trace
from test_async import batches, small_cnn


def check_chrome_trace(doc: dict) -> None:
    """The Trace Event Format as chrome://tracing and Perfetto read it."""
    assert isinstance(doc["traceEvents"], list)
    named_threads = set()
    for e in doc["traceEvents"]:
        assert e["ph"] in ("X", "M")
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int) and isinstance(e["name"], str)
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "thread_name", "process_sort_index", "thread_sort_index")
            if e["name"] == "thread_name":
                named_threads.add((e["pid"], e["tid"]))
        else:
            assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float))
            assert e["ts"] >= 0 and e["dur"] >= 0 and isinstance(e["args"], dict) and e["cat"]
    for e in doc["traceEvents"]:
        if e["ph"] == "X":
            assert (e["pid"], e["tid"]) in named_threads


def inside(child: dict, parent: dict) -> bool:
    eps = 0.002
    return child["ts"] >= parent["ts"] - eps and child["ts"] + child["dur"] <= parent["ts"] + parent["dur"] + eps


def test_numpy_profile_has_one_slice_per_node_inside_its_partition():
    sess = Session(small_cnn(), ScheduleConfig(backends=["numpy"]))
    x = batches(1)[0]
    trace = sess.profile({"x": x})
    np.testing.assert_array_equal(trace.outputs["y"], sess.run({"x": x})["y"])
    doc = json.loads(trace.to_json())
    check_chrome_trace(doc)
    (run,) = trace.slices(cat="run")
    (part,) = trace.slices(track="numpy", cat="partition")
    nodes = trace.slices(track="numpy", cat="node")
    assert [n["name"] for n in nodes] == ["conv", "relu", "pool", "flatten", "fc", "softmax"]
    assert [n["args"]["op_type"] for n in nodes][:2] == ["Conv", "Relu"]
    assert all(n["args"]["backend"] == "numpy" and inside(n, part) for n in nodes)
    assert inside(part, run) and part["args"]["node_timing"] == "single-node programs"
    assert trace.wall_seconds > 0 and trace.metadata["backends"] == ["numpy"]
    # profiling twice reuses the per-node programs and still matches
    again = sess.profile({"x": x})
    assert len(again.slices(cat="node")) == 6


def test_profile_validates_feeds_and_save_reports_bad_paths(tmp_path):
    sess = Session(small_cnn(), ScheduleConfig(backends=["numpy"]))
    with pytest.raises(InputError, match="missing input"):
        sess.profile({})
    trace = sess.profile({"x": batches(1)[0]})
    path = trace.save(tmp_path / "t.json")
    check_chrome_trace(json.loads(path.read_text()))
    with pytest.raises(InputError, match="cannot write trace file"):
        trace.save(tmp_path / "missing-dir" / "t.json")


def test_onnxruntime_partitions_get_kernel_slices_from_ort_profiler():
    pytest.importorskip("onnxruntime")
    sess = Session(small_cnn(), ScheduleConfig(backends=["onnxruntime"], pins={"pool": "numpy"}))
    x = batches(1)[0]
    trace = sess.profile({"x": x})
    np.testing.assert_allclose(trace.outputs["y"], sess.run({"x": x})["y"], rtol=1e-6)
    check_chrome_trace(trace.to_dict())
    ort_parts = trace.slices(track="onnxruntime", cat="partition")
    assert len(ort_parts) == 2 and all(p["args"]["node_timing"] == "backend profiler" for p in ort_parts)
    ort_nodes = trace.slices(track="onnxruntime", cat="node")
    assert ort_nodes and all(n["args"]["provider"] == "CPUExecutionProvider" for n in ort_nodes)
    assert all(any(inside(n, p) for p in ort_parts) for n in ort_nodes)
    (pool,) = trace.slices(track="numpy", cat="node")  # one-node numpy partition
    assert pool["name"] == "pool" and pool["args"]["op_type"] == "MaxPool"


def test_device_partitions_record_transfers():
    dev = make_fake_backend("fakedev", {"Relu", "MaxPool"}, priority=100, device_memory=True)
    reg = make_registry(fake_plugin(dev))
    sess = Session(small_cnn(), ScheduleConfig(backends=["fakedev"], backup="numpy",
                                               pins={"relu": "fakedev", "pool": "fakedev"}), registry=reg)
    x = batches(1)[0]
    trace = sess.profile({"x": x})
    np.testing.assert_array_equal(trace.outputs["y"], sess.run({"x": x})["y"])
    transfers = trace.slices(track="transfers")
    assert [t["args"]["direction"] for t in transfers] == ["to_device", "to_host"]
    assert transfers[0]["args"]["backend"] == "fakedev" and transfers[0]["args"]["bytes"] == x.nbytes * 4 // 3
    assert [p["args"]["backend"] for p in trace.slices(cat="partition")] == ["numpy", "fakedev", "numpy"]
    assert sess.stats()["host_device_copies"] >= 2


def test_npu_emu_adds_simulated_timeline():
    pytest.importorskip("nnrt_npu_emu")
    sess = Session(small_cnn(batch=1), ScheduleConfig(precision="fp16", backends=["npu_emu"], backup="numpy"))
    npu_parts = [p for p in sess.partitions if p.backend == "npu_emu"]
    assert npu_parts
    x = batches(1)[0]
    trace = sess.profile({"x": x})
    np.testing.assert_allclose(trace.outputs["y"], sess.run({"x": x})["y"], rtol=1e-6)
    check_chrome_trace(trace.to_dict())
    sim = trace.slices(cat="simulated")
    sim_parts = trace.slices(cat="simulated_partition")
    assert len(sim_parts) == len(npu_parts)
    assert sim and all(e["pid"] != HOST_PID for e in sim)
    assert all(any(inside(e, p) for p in sim_parts) for e in sim)
    assert all(e["args"]["cycles"] > 0 for e in sim)
    procs = {e["args"]["name"] for e in trace.events if e["ph"] == "M" and e["name"] == "process_name"}
    assert "npu_emu (simulated)" in procs
    assert trace.slices(track="transfers")


def test_cli_run_trace_writes_a_trace_file(capsys, tmp_path):
    from onnx import save

    model = tmp_path / "cnn.onnx"
    save(small_cnn(), str(model))
    out = tmp_path / "trace.json"
    code = main(["run", str(model), "--backends", "numpy", "--trace", str(out), "--json"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert data["trace"] == str(out)
    doc = json.loads(out.read_text())
    check_chrome_trace(doc)
    assert sum(1 for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "node") == 6


def test_trace_summary_totals_per_track():
    trace = Session(small_cnn(), ScheduleConfig(backends=["numpy"])).profile({"x": batches(1)[0]})
    rows = {(r["track"], r["cat"]): r for r in trace.summary()}
    assert rows[("numpy", "node")]["slices"] == 6 and rows[("run", "run")]["slices"] == 1
    assert rows[("numpy", "node")]["ms"] <= rows[("numpy", "partition")]["ms"] + 1e-3
    assert isinstance(trace, Trace)


def test_offline_session_without_graph_gets_partition_slices(tmp_path):
    sess = Session(small_cnn(), ScheduleConfig(backends=["numpy"]))
    offline = Session(str(sess.save(tmp_path / "cnn.nnrt")))
    x = batches(1)[0]
    trace = offline.profile({"x": x})
    np.testing.assert_array_equal(trace.outputs["y"], sess.run({"x": x})["y"])
    (part,) = trace.slices(cat="partition")
    assert part["args"] == {"backend": "numpy", "partition": 0, "nodes": 6, "node_timing": "none"}
    assert trace.slices(cat="node") == []
