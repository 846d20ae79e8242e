"""Projected device latency of a session: host partitions measured, emulated device partitions simulated.

An emulated device (``npu_emu``) runs its program on the host, so the wall
time of a heterogeneous run on this machine says nothing about the device.
The *projected* end-to-end latency of one run is

* every partition without a cost model: its measured host wall time;
* every partition with a cost model (``CompiledPartition.estimated_seconds()``,
  e.g. the emulated NPU): its **simulated device time**;
* every host<->device copy the executor made: modelled as bytes / link
  bandwidth + latency from the device's properties
  (:func:`nnrt_core.placement.link_copy_seconds`, as ``CostModel`` does);
* the runtime's own host time (run wall - partitions - copies), measured.

In a session with emulated partitions, each host partition is run once more
right after its run and that *warm* time is projected: the emulator's own host
work just before (evicted caches, idle thread pools) is not what the partition
would cost next to a real device.  Both times are reported.

Partitions run one after another here (no overlap is assumed).  For one run
of a session on host backends only the projection is its measured wall time
(over several runs each part is a median).  The ``cost``
scheduler minimises the same figure (measured host partitions, simulated
device partitions, modelled transfers).
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from nnrt_core.backend.base import Backend, DeviceInfo, estimated_seconds_of
from nnrt_core.compiler.model import CompiledModel
from nnrt_core.placement.cost_model import link_copy_seconds
from nnrt_core.runtime.executor import ExecutionStep

__all__ = ["SIMULATED", "MEASURED", "PartitionLatency", "TransferLatency", "LatencyProjection", "RunSample",
           "StepTimer", "has_simulated", "sample_run", "measure_projection", "project"]

SIMULATED = "simulated device time"  #: label of figures from a backend's cost model
MEASURED = "host wall"  #: label of figures measured on this machine


@dataclass
class PartitionLatency:
    """One partition: host wall time here and, with a cost model, simulated device time."""

    index: int
    backend: str
    nodes: int
    wall_ms: float  #: host wall time on this machine (an emulated device: the emulator's own time)
    simulated_ms: float | None = None  #: the backend's cost model (simulated device time), if it has one
    warm_ms: float | None = None  #: host wall time of an immediate second run (sessions with emulated parts)

    @property
    def projected_ms(self) -> float:
        if self.simulated_ms is not None:
            return self.simulated_ms
        return self.warm_ms if self.warm_ms is not None else self.wall_ms

    @property
    def source(self) -> str:
        return SIMULATED if self.simulated_ms is not None else MEASURED

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "backend": self.backend, "nodes": self.nodes, "wall_ms": self.wall_ms,
                "warm_ms": self.warm_ms, "simulated_ms": self.simulated_ms, "projected_ms": self.projected_ms, "source": self.source}


@dataclass
class TransferLatency:
    """One host<->device copy: measured here, modelled over the device's link."""

    value: str
    direction: str  #: "to_host" or "to_device"
    backend: str
    nbytes: int
    wall_ms: float
    modelled_ms: float

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class RunSample:
    """What one observed run measured: seconds per step, copies, the run's wall time."""

    step_seconds: dict[int, float] = field(default_factory=dict)
    warm_seconds: dict[int, float] = field(default_factory=dict)  #: host steps run again at once
    #: (value, direction, backend, bytes, seconds) per copy, in order
    copies: list[tuple[str, str, Backend, int, float]] = field(default_factory=list)
    wall_seconds: float = 0.0

    def add_copy(self, value: str, direction: str, backend: Backend, tensor: Any, seconds: float) -> None:
        nbytes = getattr(tensor, "nbytes", None)
        self.copies.append((value, direction, backend, int(nbytes) if nbytes is not None else 0, seconds))


@dataclass
class LatencyProjection:
    """Projected end-to-end latency of one run (see the module docstring)."""

    partitions: list[PartitionLatency]
    transfers: list[TransferLatency]
    wall_ms: float  #: host wall time of the whole run on this machine
    runtime_ms: float  #: the runtime's own host time (wall - partitions - copies)
    runs: int = 1  #: runs the figures are medians of

    @property
    def host_ms(self) -> float:
        """Partitions without a cost model, measured."""
        return sum(p.projected_ms for p in self.partitions if p.simulated_ms is None)

    @property
    def simulated_ms(self) -> float:
        """Partitions with a cost model: simulated device time."""
        return sum(p.simulated_ms for p in self.partitions if p.simulated_ms is not None)

    @property
    def transfer_ms(self) -> float:
        """Host<->device copies, modelled."""
        return sum(t.modelled_ms for t in self.transfers)

    @property
    def projected_ms(self) -> float:
        return self.host_ms + self.simulated_ms + self.transfer_ms + self.runtime_ms

    @property
    def emulated(self) -> bool:
        """True when some figure is simulated device time."""
        return any(p.simulated_ms is not None for p in self.partitions)

    def to_dict(self) -> dict[str, Any]:
        return {"projected_ms": self.projected_ms, "host_ms": self.host_ms, "simulated_ms": self.simulated_ms,
                "transfer_ms": self.transfer_ms, "runtime_ms": self.runtime_ms, "wall_ms": self.wall_ms,
                "runs": self.runs, "emulated": self.emulated,
                "partitions": [p.to_dict() for p in self.partitions],
                "transfers": [t.to_dict() for t in self.transfers]}

    def format(self) -> str:
        """A table per partition and the projected end-to-end line."""
        lines = [f"{'partition':<10}{'backend':<14}{'nodes':>6}{'host wall ms':>14}{SIMULATED + ' ms':>26}"
                 f"{'projected ms':>14}"]
        for p in self.partitions:
            sim = f"{p.simulated_ms:.3f}" if p.simulated_ms is not None else "-"
            warm = f" (warm {p.warm_ms:.3f})" if p.warm_ms is not None else ""
            lines.append(f"{'p' + str(p.index):<10}{p.backend:<14}{p.nodes:>6}{p.wall_ms:>14.3f}{sim:>26}"
                         f"{p.projected_ms:>14.3f}{warm}")
        if self.transfers:
            mb = sum(t.nbytes for t in self.transfers) / 1e6
            lines.append(f"{'copies':<10}{len(self.transfers):>3} ({mb:.2f} MB){'':>7}"
                         f"{sum(t.wall_ms for t in self.transfers):>14.3f}{'modelled link':>26}"
                         f"{self.transfer_ms:>14.3f}")
        lines.append(f"{'runtime':<10}{'(host)':<20}{self.runtime_ms:>14.3f}{'':>26}{self.runtime_ms:>14.3f}")
        lines.append(self.summary_line())
        return "\n".join(lines)

    def summary_line(self) -> str:
        parts = [f"host partitions {self.host_ms:.3f} (measured)"]
        if self.emulated:
            parts.append(f"device partitions {self.simulated_ms:.3f} ({SIMULATED})")
        if self.transfers:
            parts.append(f"transfers {self.transfer_ms:.3f} (modelled)")
        parts.append(f"runtime {self.runtime_ms:.3f} (measured)")
        return (f"projected latency: {self.projected_ms:.3f} ms = " + " + ".join(parts)
                + f"; host wall of the run here: {self.wall_ms:.3f} ms")


class StepTimer:
    """A ``StepObserver`` recording each step's wall time and each copy into a
    :class:`RunSample`; with ``warm_host``, steps without a cost model are run
    a second time at once and that time is kept too."""

    def __init__(self, warm_host: bool = False) -> None:
        self.sample = RunSample()
        self.warm_host = warm_host

    def run_step(self, index: int, step: ExecutionStep, args: dict[str, Any]) -> Mapping[str, Any]:
        t0 = time.perf_counter()
        outs = step.compiled.run(args)
        t1 = time.perf_counter()
        self.sample.step_seconds[index] = t1 - t0
        if self.warm_host and estimated_seconds_of(step.compiled) is None:
            step.compiled.run(args)
            self.sample.warm_seconds[index] = time.perf_counter() - t1
        return outs

    def transfer(self, value: str, direction: str, backend: Backend, start: float, end: float,
                 tensor: Any) -> None:
        self.sample.add_copy(value, direction, backend, tensor, end - start)


def _device(model: CompiledModel, backend: Backend) -> DeviceInfo | None:
    try:
        return backend.find_device(model.config.devices.get(backend.name))
    except Exception:  # a backend that cannot name its device: the link defaults apply
        return None


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else 0.0


def project(model: CompiledModel, samples: Sequence[RunSample]) -> LatencyProjection:
    """The projection of ``model`` from observed runs (medians over ``samples``)."""
    partitions = []
    for i, (info, step) in enumerate(zip(model.partitions, model.steps)):
        est = estimated_seconds_of(step.compiled)
        walls = [s.step_seconds[i] for s in samples if i in s.step_seconds]
        warm = [s.warm_seconds[i] for s in samples if i in s.warm_seconds]
        partitions.append(PartitionLatency(info.index, info.backend, len(info.nodes), _median(walls) * 1e3,
                                           float(est) * 1e3 if est is not None else None,
                                           _median(warm) * 1e3 if warm else None))
    transfers = []
    devices: dict[str, DeviceInfo | None] = {}
    first = samples[0].copies if samples else []
    for k, (value, direction, backend, nbytes, _) in enumerate(first):
        if backend.name not in devices:
            devices[backend.name] = _device(model, backend)
        walls = [s.copies[k][4] for s in samples if len(s.copies) > k]
        transfers.append(TransferLatency(value, direction, backend.name, nbytes, _median(walls) * 1e3,
                                         link_copy_seconds(nbytes, devices[backend.name]) * 1e3))
    runtime = [max(0.0, s.wall_seconds - sum(s.step_seconds.values()) - sum(c[4] for c in s.copies))
               for s in samples]
    return LatencyProjection(partitions, transfers, _median([s.wall_seconds for s in samples]) * 1e3,
                             _median(runtime) * 1e3, len(samples))


RunObserved = Callable[[Mapping[str, Any], Any], Any]


def has_simulated(model: CompiledModel) -> bool:
    """True when some partition of ``model`` reports simulated device time."""
    return any(estimated_seconds_of(step.compiled) is not None for step in model.steps)


def sample_run(model: CompiledModel, run_observed: RunObserved, feeds: Mapping[str, Any]) -> RunSample:
    """One run of ``model`` through ``run_observed`` (``Session.run_observed``)
    with every step and copy timed (host steps also warm when some are emulated)."""
    timer = StepTimer(warm_host=has_simulated(model))
    t0 = time.perf_counter()
    run_observed(feeds, timer)
    # the run as it ran: without the warm second runs
    timer.sample.wall_seconds = time.perf_counter() - t0 - sum(timer.sample.warm_seconds.values())
    return timer.sample


def measure_projection(model: CompiledModel, run_observed: RunObserved, feeds: Mapping[str, Any],
                       runs: int = 5, warmup: int = 1) -> LatencyProjection:
    """Run ``model`` ``runs`` times through ``run_observed`` (``Session.run_observed``)
    after ``warmup`` runs, timing every partition and copy, and project its latency."""
    for _ in range(warmup):
        sample_run(model, run_observed, feeds)
    return project(model, [sample_run(model, run_observed, feeds) for _ in range(max(1, runs))])
