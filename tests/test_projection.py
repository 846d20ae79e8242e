"""Projected device latency: host partitions measured, emulated ones simulated,
copies modelled; shown by bench, profile and ``run --trace``; optimised by the
``cost`` scheduler."""
from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import make_registry
from fakes import fake_plugin
from nnrt_core import ScheduleConfig, Session
from nnrt_core.backend import DeviceInfo
from nnrt_core.placement import link_copy_seconds
from nnrt_core.tools.bench import bench_session
from nnrt_core.profiling.projection import SIMULATED, measure_projection
from test_partitioning import X, chain, reference
from test_schedulers import ELEMENTWISE, registry, timed_backend

NODE_DELAY = 0.02  #: host seconds per node of the emulated device (slow, like an emulator)
NODE_ESTIMATE = 0.001  #: simulated device seconds per node


def emulated_device(name: str = "dev", ops=("Relu", "Neg"), *, bandwidth_gbps: float = 1.0,
                    latency_us: float = 100.0, delay: float = NODE_DELAY):
    """A device-memory fake backend that is slow on the host but has a cost
    model, and declares its host link."""
    base = timed_backend(name, ops, delay=delay, device_memory=True, device_type="npu", estimate=NODE_ESTIMATE)

    def devices(self):
        return [DeviceInfo("dev:0", f"{name} device", "npu",
                           {"host_bandwidth_gbps": bandwidth_gbps, "transfer_latency_us": latency_us})]

    return type(f"Emulated_{name}", (base,), {"devices": devices})


def test_projection_arithmetic_on_an_emulated_device():
    dev = emulated_device()
    sess = Session(chain("Relu", "Neg", "Abs"), ScheduleConfig(backends=["dev"], backup="numpy"),
                   registry=make_registry(fake_plugin(dev)))
    assert [p.backend for p in sess.partitions] == ["dev", "numpy"]
    pr = measure_projection(sess.compiled_model, sess.run_observed, X, runs=3)
    on_dev, on_host = pr.partitions
    # the device partition: simulated device time (2 nodes x 1 ms), not the emulator's host time
    assert on_dev.simulated_ms == pytest.approx(2 * NODE_ESTIMATE * 1e3)
    assert on_dev.wall_ms >= 2 * NODE_DELAY * 1e3 and on_dev.projected_ms == on_dev.simulated_ms
    assert on_dev.source == SIMULATED and on_dev.warm_ms is None
    # the host partition: measured (warm: run again right after the emulator)
    assert on_host.simulated_ms is None and on_host.warm_ms is not None
    assert on_host.projected_ms == on_host.warm_ms and on_host.source == "host wall"
    # copies: x to the device, the device's output back; each bytes / 1 GB/s + 100 us
    nbytes = X["x"].nbytes
    assert [(t.value, t.direction, t.nbytes) for t in pr.transfers] == [("x", "to_device", nbytes),
                                                                        ("t1", "to_host", nbytes)]
    for t in pr.transfers:
        assert t.modelled_ms == pytest.approx((nbytes / 1e9 + 100e-6) * 1e3)
    assert pr.transfer_ms == pytest.approx(2 * (nbytes / 1e9 + 100e-6) * 1e3)
    assert pr.host_ms == pytest.approx(on_host.warm_ms)
    assert pr.simulated_ms == pytest.approx(2.0)
    assert pr.projected_ms == pytest.approx(pr.host_ms + pr.simulated_ms + pr.transfer_ms + pr.runtime_ms)
    assert pr.emulated and pr.projected_ms < pr.wall_ms  # the emulator's host time is not projected
    assert 0 <= pr.runtime_ms < pr.wall_ms


def test_link_copy_seconds_reads_the_device_properties_and_defaults():
    dev = DeviceInfo("d", "d", "npu", {"host_bandwidth_gbps": 2.0, "transfer_latency_us": 50.0})
    assert link_copy_seconds(4_000_000, dev) == pytest.approx(4e6 / 2e9 + 50e-6)
    assert link_copy_seconds(8_000_000, None) == pytest.approx(8e6 / 8e9 + 20e-6)  # module defaults


def test_host_only_projection_is_the_measured_wall_time():
    sess = Session(chain("Relu", "Neg"), ScheduleConfig(backends=["numpy"]))
    pr = measure_projection(sess.compiled_model, sess.run_observed, X, runs=1)
    (part,) = pr.partitions
    assert part.simulated_ms is None and part.warm_ms is None and not pr.emulated and pr.transfers == []
    assert pr.projected_ms == pytest.approx(pr.wall_ms)  # one run: exactly (medians of parts otherwise)
    assert "simulated device time" not in pr.summary_line()


def test_bench_and_profile_show_wall_simulated_and_projected():
    dev = emulated_device()
    sess = Session(chain("Relu", "Neg", "Abs"), ScheduleConfig(backends=["dev"], backup="numpy"),
                   registry=make_registry(fake_plugin(dev)))
    report = bench_session(sess, X, runs=2, warmup=0, in_flight=[1], progress=False)
    text = report.format()
    for column in ("host wall ms", "simulated device time ms", "projected ms", "projected latency:",
                   "device partitions 2.000 (simulated device time)", "transfers"):
        assert column in text
    assert "host wall latency ms: p50" in text  # percentiles say they are this host's time
    proj = report.to_dict()["projection"]
    assert [p["backend"] for p in proj["partitions"]] == ["dev", "numpy"]
    assert proj["partitions"][0]["simulated_ms"] == pytest.approx(2.0) and proj["emulated"]
    assert proj["projected_ms"] == pytest.approx(report.projection.projected_ms)
    json.dumps(report.to_dict())  # serializable
    # profile: the trace's metadata and projection carry the same columns
    trace = sess.profile(X)
    np.testing.assert_allclose(trace.outputs["y"], reference(chain("Relu", "Neg", "Abs"), X)[0])
    meta = trace.metadata["projection"]
    assert meta["partitions"][0]["source"] == SIMULATED and meta["partitions"][1]["source"] == "host wall"
    assert meta["simulated_ms"] == pytest.approx(2.0) and meta["wall_ms"] >= 2 * NODE_DELAY * 1e3
    assert meta["projected_ms"] < meta["wall_ms"] and len(meta["transfers"]) == 2
    assert trace.projection is not None and "simulated device time" in trace.projection.format()
    json.loads(trace.to_json())["otherData"]["projection"]  # saved with the trace


def test_run_trace_prints_the_projection(tmp_path, capsys, light_dir):
    from nnrt_core.tools import cli

    trace = tmp_path / "t.json"
    # the light model's last convolutions exceed fp16: keep them on the chip (the projection is the subject)
    chip = ["--backends", "npu_emu", "--backup", "numpy", "--precision", "fp16", "--on-overflow", "warn"]
    code = cli.main(["run", str(light_dir / "light_squeezenet.onnx"), *chip, "--trace", str(trace)])
    out = capsys.readouterr().out
    assert code == 0 and trace.is_file()
    assert "simulated device time ms" in out and "projected latency:" in out
    assert "(simulated device time)" in out
    code = cli.main(["run", str(light_dir / "light_squeezenet.onnx"), *chip, "--trace", str(trace), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert data["projection"]["emulated"] and data["projection"]["partitions"][0]["backend"] == "npu_emu"


@pytest.mark.parametrize("latency_us, winner", [(100.0, "dev"), (200_000.0, "cpu")])
def test_cost_scheduler_picks_the_lowest_projected_plan(tmp_path, latency_us, winner):
    """The device is slow on the host (an emulator) but fast by its cost model:
    the cost scheduler takes it unless the modelled link makes it the slower plan."""
    dev = emulated_device(ops=ELEMENTWISE, latency_us=latency_us)
    cpu = timed_backend("cpu", ELEMENTWISE, delay=0.005)
    reg = registry(dev, cpu)
    m = chain("Relu", "Neg", "Abs", "Tanh")
    projected = {}
    for label, backends in (("dev", ["dev"]), ("cpu", ["cpu"])):
        single = Session(m, ScheduleConfig(backends=backends, backup=None), registry=reg)
        projected[label] = measure_projection(single.compiled_model, single.run_observed, X, runs=3).projected_ms
    assert min(projected, key=projected.get) == winner
    sess = Session(m, ScheduleConfig(backends=["dev", "cpu"], backup=None, scheduler="cost",
                                     cache_dir=str(tmp_path)), registry=reg)
    assert set(sess.placement.values()) == {winner}
    chosen = sess.considered_plans[0]
    assert chosen["chosen"] and chosen["label"] == f"{winner} only"
    got = measure_projection(sess.compiled_model, sess.run_observed, X, runs=3)
    assert got.projected_ms <= min(projected.values()) * 1.2 + 0.5
    # the scheduler's figure for its plan is that projection (host measured, device simulated, copies modelled)
    assert chosen["projected_ms"] == pytest.approx(got.projected_ms, rel=0.25, abs=1.0)
    if winner == "dev":
        assert chosen["simulated_ms"] == pytest.approx(4.0) and chosen["host_ms"] == 0.0
        assert chosen["transfer_ms"] == pytest.approx(got.transfer_ms)
    np.testing.assert_allclose(sess.run(X)["y"], reference(m, X)[0], rtol=1e-6)
