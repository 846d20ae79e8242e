"""nnrt_core.tools.bench and ``nnrt bench``."""
from __future__ import annotations

import io
import json

import numpy as np
import pytest

from nnrt_core import ScheduleConfig, Session
from nnrt_core.tools.bench import ProgressBar, bench_session, measure_throughput, percentiles
from nnrt_core.tools.cli import main
from nnrt_core.errors import ConfigError, NnrtError
from test_async import batches, pairs_model, small_cnn


def test_percentiles_in_milliseconds():
    p = percentiles([0.001 * i for i in range(1, 101)])
    assert p["min"] == pytest.approx(1.0) and p["max"] == pytest.approx(100.0)
    assert p["p50"] == pytest.approx(50.5) and p["p90"] == pytest.approx(90.1) and p["p99"] == pytest.approx(99.01)
    assert p["mean"] == pytest.approx(50.5)
    with pytest.raises(ConfigError):
        percentiles([])


def test_progress_bar_draws_to_its_stream_and_stays_silent_when_disabled():
    out = io.StringIO()
    bar = ProgressBar(4, "latency", out)
    for _ in range(4):
        bar.advance()
    bar.close()
    assert "[" + "#" * 30 + "] 4/4" in out.getvalue() and out.getvalue().endswith("\n")
    quiet = io.StringIO()
    bar = ProgressBar(4, "x", quiet, enabled=False)
    bar.advance()
    bar.close()
    assert quiet.getvalue() == ""


def test_bench_session_reports_latency_and_throughput_per_in_flight_count():
    sess = Session(small_cnn(), ScheduleConfig(backends=["numpy"]))
    err = io.StringIO()
    report = bench_session(sess, {"x": batches(1)[0]}, runs=6, warmup=1, in_flight=(1, 3), model="cnn", stream=err)
    assert set(report.latency_ms) == {"p50", "p90", "p99", "mean", "min", "max"}
    assert report.latency_ms["min"] <= report.latency_ms["p50"] <= report.latency_ms["max"]
    assert sorted(report.throughput) == [1, 3] and all(v > 0 for v in report.throughput.values())
    assert report.backends == {"numpy": 6}
    d = report.to_dict()
    assert [t["in_flight"] for t in d["throughput"]] == [1, 3] and d["throughput"][0]["speedup"] == 1.0
    assert "throughput with 3 in flight" in report.format()
    assert "throughput, 3 in flight" in err.getvalue()  # progress bar


def test_bench_rejects_bad_arguments():
    sess = Session(small_cnn(), ScheduleConfig(backends=["numpy"]))
    feeds = {"x": batches(1)[0]}
    with pytest.raises(ConfigError, match="runs"):
        bench_session(sess, feeds, runs=0)
    with pytest.raises(ConfigError, match="in-flight"):
        bench_session(sess, feeds, runs=1, in_flight=(0,), progress=False)
    with pytest.raises(ConfigError):
        measure_throughput(sess, feeds, 0, 1)


def test_throughput_raises_run_errors():
    sess = Session(pairs_model(), ScheduleConfig(backends=["numpy"]))
    with pytest.raises(NnrtError, match="cannot reshape"):
        measure_throughput(sess, {"x": np.zeros(3, np.float32)}, 2, 4)


def test_cli_bench_json(capsys, tmp_path):
    from onnx import save

    model = tmp_path / "cnn.onnx"
    save(small_cnn(), str(model))
    code = main(["bench", str(model), "--backends", "numpy", "--runs", "4", "--warmup", "1",
                 "--in-flight", "1,2", "--json", "--no-progress"])
    captured = capsys.readouterr()
    assert code == 0 and captured.err == ""
    data = json.loads(captured.out)
    assert data["runs"] == 4 and data["backends"] == {"numpy": 6}
    assert [t["in_flight"] for t in data["throughput"]] == [1, 2]
    assert data["latency_ms"]["p99"] >= data["latency_ms"]["p50"] > 0


def test_cli_bench_text_and_bad_in_flight(capsys, tmp_path):
    from onnx import save

    model = tmp_path / "cnn.onnx"
    save(small_cnn(), str(model))
    assert main(["bench", str(model), "--backends", "numpy", "--runs", "2", "--in-flight", "2"]) == 0
    out = capsys.readouterr().out
    assert "latency ms: p50" in out and "throughput with 2 in flight" in out
    assert main(["bench", str(model), "--in-flight", "1,zero"]) == 2
    assert "--in-flight expects comma-separated positive integers" in capsys.readouterr().err


def test_devices_lists_every_device_of_every_backend():
    import nnrt_core

    backends = nnrt_core.devices()
    assert {"numpy"} <= {b["name"] for b in backends}
    for b in backends:
        assert {"name", "available", "priority", "devices"} <= set(b)
        for d in b["devices"]:
            assert {"id", "type", "properties", "precisions", "available"} <= set(d)
    numpy_dev = next(b for b in backends if b["name"] == "numpy")["devices"][0]
    assert numpy_dev["type"] == "cpu" and "fp32" in numpy_dev["precisions"] and numpy_dev["available"]


def test_bench_reports_the_npu_cost_model(light_dir):
    # the light model's last convolutions exceed fp16 (its fallback would move them off the chip): keep them
    sess = Session(light_dir / "light_squeezenet.onnx", ScheduleConfig(precision="fp16", backends=["npu_emu"], on_overflow="warn"))
    feeds = {sess.inputs[0].name: np.zeros((1, 3, 224, 224), np.float32)}
    report = bench_session(sess, feeds, runs=1, warmup=0, in_flight=[1], progress=False)
    (part,) = report.partitions
    assert part["backend"] == "npu_emu" and part["est_cycles"] > 0 and part["est_time_ms"] > 0
    assert part["est_cycles"] == sess.partitions[0].details["est_cycles"]
    assert "simulated" in report.format() and report.to_dict()["partitions"] == [part]
