"""Benchmarking a session: latency percentiles and throughput with N runs in flight.

Used by ``nnrt bench`` and ``benchmarks/bench_async.py``.  Latency is measured
one run at a time on the calling thread; throughput with ``in_flight`` = 1 is
the same one-at-a-time loop, with N > 1 a :class:`~nnrt_core.runtime.streams.Stream`
keeping N requests going.

The report also carries the session's *projected latency*
(:mod:`nnrt_core.profiling.projection`): per partition the host wall time here and,
for emulated devices, the simulated device time, and the projected end-to-end
latency = host partitions measured + device partitions simulated + modelled
host<->device copies.  The emulator runs its program on the host, so for a
session with emulated partitions the measured percentiles are this host's
time, not the device's.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from nnrt_core.errors import ConfigError
from nnrt_core.profiling.projection import LatencyProjection, measure_projection

if TYPE_CHECKING:
    from nnrt_core.session import Session

__all__ = ["ProgressBar", "BenchReport", "percentiles", "measure_latency", "measure_throughput", "bench_session"]


class ProgressBar:
    """A one-line text progress bar (redrawn with ``\\r``); silent when disabled."""

    def __init__(self, total: int, label: str, stream: IO[str] | None = None, enabled: bool = True,
                 width: int = 30) -> None:
        self.total = max(1, int(total))
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.width = width
        self.count = 0
        self._last_draw = 0.0

    def advance(self, n: int = 1) -> None:
        self.count = min(self.total, self.count + n)
        now = time.monotonic()
        if self.enabled and (self.count == self.total or now - self._last_draw > 0.1):
            self._last_draw = now
            filled = int(self.width * self.count / self.total)
            self.stream.write(f"\r{self.label:<28} [{'#' * filled}{'.' * (self.width - filled)}] "
                              f"{self.count}/{self.total}")
            self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


def percentiles(seconds: Sequence[float]) -> dict[str, float]:
    """Latency summary in milliseconds: p50, p90, p99, mean, min, max."""
    if not seconds:
        raise ConfigError("no timings to summarize")
    ms = np.asarray(seconds, dtype=np.float64) * 1e3
    return {"p50": float(np.percentile(ms, 50)), "p90": float(np.percentile(ms, 90)),
            "p99": float(np.percentile(ms, 99)), "mean": float(ms.mean()), "min": float(ms.min()),
            "max": float(ms.max())}


def measure_latency(session: "Session", feeds: Mapping[str, Any], runs: int,
                    progress: ProgressBar | None = None) -> list[float]:
    """Seconds of each of ``runs`` one-at-a-time runs."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        session.run(feeds)
        times.append(time.perf_counter() - t0)
        if progress is not None:
            progress.advance()
    return times


def measure_throughput(session: "Session", feeds: Mapping[str, Any], in_flight: int, requests: int,
                       progress: ProgressBar | None = None, concurrency: int | str = "auto") -> float:
    """Inferences per second over ``requests`` runs with ``in_flight`` at once
    (1 = one at a time on the calling thread; ``concurrency`` as for
    ``Session.stream``).  Run errors are raised."""
    if in_flight < 1 or requests < 1:
        raise ConfigError(f"in_flight and requests must be positive, got {in_flight} and {requests}")
    if in_flight == 1:
        t0 = time.perf_counter()
        measure_latency(session, feeds, requests, progress)
        return requests / (time.perf_counter() - t0)
    errors: list[BaseException] = []
    measuring = False

    def done(c: Any) -> None:
        if c.error is not None:
            errors.append(c.error)
        if measuring and progress is not None:
            progress.advance()

    with session.stream(max_in_flight=in_flight, callback=done, concurrency=concurrency) as stream:
        for _ in range(in_flight):  # start every worker thread
            stream.submit(feeds)
        stream.wait_all()
        measuring = True
        t0 = time.perf_counter()
        for _ in range(requests):
            stream.submit(feeds)
        stream.wait_all()
        elapsed = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return requests / elapsed


@dataclass
class BenchReport:
    """What ``nnrt bench`` prints."""

    model: str
    backends: dict[str, int]  #: backend -> nodes placed on it
    runs: int
    warmup: int
    latency_ms: dict[str, float]
    throughput: dict[int, float] = field(default_factory=dict)  #: in flight -> inferences/s
    build_ms: float = 0.0
    #: per partition: backend, nodes and the backend's own cost figures (e.g. simulated NPU cycles)
    partitions: list[dict[str, Any]] = field(default_factory=list)
    #: host wall / simulated device time per partition and the projected end-to-end latency
    projection: LatencyProjection | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "backends": dict(self.backends), "runs": self.runs, "warmup": self.warmup,
                "build_ms": self.build_ms, "latency_ms": dict(self.latency_ms), "partitions": self.partitions,
                "throughput": [{"in_flight": n, "inferences_per_s": v,
                                "speedup": v / self.throughput[1] if 1 in self.throughput else None}
                               for n, v in sorted(self.throughput.items())],
                "projection": self.projection.to_dict() if self.projection is not None else None}

    def format(self) -> str:
        lat = self.latency_ms
        emulated = self.projection is not None and self.projection.emulated
        lines = [f"model: {self.model}",
                 "placement: " + ", ".join(f"{b}={n} nodes" for b, n in self.backends.items()),
                 f"build: {self.build_ms:.0f} ms; {self.runs} timed runs after {self.warmup} warm-up",
                 ("host wall " if emulated else "") + f"latency ms: p50 {lat['p50']:.2f}  p90 {lat['p90']:.2f}  p99 {lat['p99']:.2f}  "
                 f"mean {lat['mean']:.2f}  min {lat['min']:.2f}  max {lat['max']:.2f}"]
        for p in self.partitions:
            if "est_cycles" in p:
                lines.append(f"partition {p['index']} on {p['backend']}: simulated {p['est_cycles']:,} cycles "
                             f"= {p['est_time_ms']:.3f} ms per run on {p.get('chip', p['backend'])} "
                             "(simulated device time)")
        if self.projection is not None:
            lines.append(self.projection.format())
        base = self.throughput.get(1)
        for n, v in sorted(self.throughput.items()):
            ratio = f"  x{v / base:.2f} vs 1 in flight" if base and n != 1 else ""
            lines.append(f"throughput with {n} in flight: {v:.2f} inferences/s{ratio}")
        return "\n".join(lines)


def bench_session(session: "Session", feeds: Mapping[str, Any], *, runs: int = 20, warmup: int = 2,
                  in_flight: Sequence[int] = (1, 2), progress: bool = True, model: str = "",
                  stream: IO[str] | None = None, projection_runs: int = 5) -> BenchReport:
    """Warm up, measure latency over ``runs`` runs, project the latency from
    ``min(runs, projection_runs)`` observed runs (0: no projection), then
    throughput for every ``in_flight`` value (``runs`` requests each)."""
    if not isinstance(runs, int) or runs < 1:
        raise ConfigError(f"runs must be a positive integer, got {runs!r}")
    if not isinstance(warmup, int) or warmup < 0:
        raise ConfigError(f"warmup must be a non-negative integer, got {warmup!r}")
    bad = [n for n in in_flight if not isinstance(n, int) or n < 1]
    if bad or not in_flight:
        raise ConfigError(f"in-flight counts must be positive integers, got {list(in_flight)}")
    for _ in range(warmup):
        session.run(feeds)

    def bar(label: str) -> ProgressBar:
        return ProgressBar(runs, label, stream, enabled=progress)

    p = bar("latency")
    times = measure_latency(session, feeds, runs, p)
    p.close()
    counts: dict[str, int] = {}
    for backend in session.placement.values():
        counts[backend] = counts.get(backend, 0) + 1
    parts = []
    for info in session.partitions:
        row: dict[str, Any] = {"index": info.index, "backend": info.backend, "nodes": len(info.nodes)}
        for key in ("est_cycles", "est_time_ms", "chip", "estimated_ms"):
            if key in info.details:
                row[key] = info.details[key]
        parts.append(row)
    report = BenchReport(model, counts, runs, warmup, percentiles(times),
                         build_ms=session.build_seconds * 1e3, partitions=parts)
    if projection_runs > 0:
        report.projection = measure_projection(session.compiled_model, session.run_observed, feeds,
                                               runs=min(runs, projection_runs), warmup=0)
    for n in sorted(set(in_flight)):
        p = bar(f"throughput, {n} in flight")
        report.throughput[n] = measure_throughput(session, feeds, n, runs, p)
        p.close()
    return report
