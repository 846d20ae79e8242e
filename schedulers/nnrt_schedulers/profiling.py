"""Measured costs for the ``cost`` scheduler: partition timing and its cache.

Timing a partition needs real input values, so a *reference run* computes
every tensor of the graph once (on the most trustworthy host backend, with
every value exposed as a partition output) from synthesized feeds.  Each
partition of a candidate plan is then compiled (into the session's shared
compile cache) and run on those values: one warm-up run, then repeated runs;
the median is its cost (the statistic ``nnrt bench`` projects with).  Backends
with a cost model (``estimated_seconds``) are not timed: their simulated device
time is used.

Timings are cached per machine in ``<cache dir>/schedule_profiles-v<N>-<machine>.json``
(cache dir: ``ScheduleConfig.cache_dir``, else ``$NNRT_CACHE_DIR``, else
``~/.cache/nnrt``), keyed by backend, version, compile options and a signature
of the partition (op types, attributes, tensor types), so a second session of
the same model measures nothing.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import statistics
import threading
import time
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from nnrt_core.plugin_api import Backend, CompiledPartition, estimated_seconds_of
from nnrt_core.errors import InputError, NnrtError
from nnrt_core.ir import AttrKind, Graph, Node, Value
from nnrt_core.plugin_api import PartitionKey, PartitionPlan, PlacementContext, partition_graph
from nnrt_core.plugin_api import random_feeds, tensor_info
from nnrt_core.plugin_api import write_atomic

__all__ = ["ProfileCache", "Profiler", "partition_signature", "machine_id", "cache_directory",
           "synthesize_feeds"]

log = logging.getLogger("nnrt.schedulers.cost")

ENV_CACHE_DIR = "NNRT_CACHE_DIR"
#: bump when what is measured changes (old files are then ignored)
PROFILE_VERSION = 3
#: timing budget per partition (seconds of repeated runs after the warm-up)
TIME_BUDGET_SECONDS = 0.25
MIN_RUNS, MAX_RUNS = 3, 25
#: interleaved whole-plan rounds (the median per plan is kept)
PLAN_MIN_ROUNDS = 5
#: pause before each timed whole-plan run (lets spinning worker threads of the previous run go idle)
PAUSE_SECONDS = 0.01


def cache_directory(config_dir: str | None) -> Path:
    """Where measured profiles live (see the module docstring)."""
    if config_dir:
        return Path(config_dir)
    env = os.environ.get(ENV_CACHE_DIR)
    return Path(env) if env else Path.home() / ".cache" / "nnrt"


def machine_id() -> str:
    """A short stable id of this machine's CPU (timings do not transfer between machines)."""
    text = "|".join([platform.node(), platform.machine(), platform.processor(), str(os.cpu_count())])
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _type_sig(v: Value | None) -> str:
    if v is None:
        return "-"
    return ("c" if v.const is not None else "") + str(v.type)


def _attr_sig(a: Any) -> str:
    if a.kind == AttrKind.GRAPH:
        return _graph_sig(a.value)
    if a.kind == AttrKind.GRAPHS:
        return "[" + ",".join(_graph_sig(g) for g in a.value) + "]"
    if a.kind == AttrKind.TENSOR and isinstance(a.value, np.ndarray):
        return f"T{a.value.dtype}{a.value.shape}"
    return repr(a.value)[:200]


def _node_sig(n: Node) -> str:
    attrs = ";".join(f"{k}={_attr_sig(a)}" for k, a in sorted(n.attributes.items()))
    ins = ",".join(_type_sig(v) for v in n.inputs)
    outs = ",".join(_type_sig(v) for v in n.outputs)
    return f"{n.domain}::{n.op_type}@{n.opset}({ins})->({outs}){{{attrs}}}"


def _graph_sig(g: Graph) -> str:
    return "{" + "|".join(_node_sig(n) for n in g.nodes) + "}"


def partition_signature(nodes: list[Node], inputs: list[Value], outputs: list[Value]) -> str:
    """A hash of what a partition computes (types and attributes, not weights)."""
    text = "|".join(_node_sig(n) for n in nodes)
    text += "#" + ",".join(_type_sig(v) for v in inputs) + "#" + ",".join(_type_sig(v) for v in outputs)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


class ProfileCache:
    """Measured seconds keyed by (backend, version, options, signature), one
    JSON file per machine; written atomically, merged with concurrent writers."""

    _lock = threading.Lock()

    def __init__(self, directory: Path) -> None:
        self.path = directory / f"schedule_profiles-v{PROFILE_VERSION}-{machine_id()}.json"
        self._data: dict[str, float] = {}
        self._dirty = False
        try:
            raw = json.loads(self.path.read_text())
            if isinstance(raw, dict):
                self._data = {k: float(v) for k, v in raw.items() if isinstance(v, (int, float))}
        except (OSError, ValueError):
            pass  # missing or corrupt: start empty, rewrite on save

    def get(self, key: str) -> float | None:
        return self._data.get(key)

    def put(self, key: str, seconds: float) -> None:
        self._data[key] = float(seconds)
        self._dirty = True

    def save(self) -> None:
        if not self._dirty:
            return
        with self._lock:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                try:
                    merged = json.loads(self.path.read_text())
                    if not isinstance(merged, dict):
                        merged = {}
                except (OSError, ValueError):
                    merged = {}
                merged.update(self._data)
                write_atomic(self.path, json.dumps(merged, sort_keys=True).encode())
                self._dirty = False
            except OSError as e:  # a read-only cache only costs re-measuring
                log.warning("cannot write schedule profile cache %s: %s", self.path, e)


def synthesize_feeds(graph: Graph, seed: int = 0) -> dict[str, Any] | None:
    """Deterministic feeds for timing: normal floats, zero integers (valid
    indices), False booleans; symbolic dims become 1.  None when an input is
    not a tensor of known rank."""
    try:
        return random_feeds([tensor_info(v) for v in graph.inputs], seed, floats="normal", int_high=1)
    except InputError:
        return None


class Profiler:
    """Times partitions of one graph (see the module docstring)."""

    def __init__(self, ctx: PlacementContext, cache: ProfileCache) -> None:
        self.ctx = ctx
        self.cache = cache
        self._values: dict[str, Any] | None = None
        self._values_error: str | None = None
        self._memo: dict[PartitionKey, tuple[float, str] | None] = {}
        self._probes: dict[PartitionKey, CompiledPartition] = {}
        self.measured = 0  #: partitions actually timed (not from the cache)
        self.errors: list[str] = []

    # ------------------------------------------------------------- values
    def values(self) -> dict[str, Any] | None:
        """Every tensor of the graph from one reference run (None if impossible)."""
        if self._values is None and self._values_error is None:
            try:
                self._values = self._reference_run()
            except (NnrtError, KeyError, ValueError, TypeError) as e:
                self._values_error = f"{type(e).__name__}: {e}"
                self.errors.append(f"reference run failed: {self._values_error}")
        return self._values

    def _reference_run(self) -> dict[str, Any]:
        ctx = self.ctx
        feeds = synthesize_feeds(ctx.graph)
        if feeds is None:
            raise ValueError("the model has inputs that cannot be synthesized for timing")
        backends = _reference_order(ctx)
        assignment = {}
        for n in ctx.graph.nodes:
            for b in backends:
                if ctx.capabilities[b.name].supports(n.name):
                    assignment[n.name] = b.name
                    break
            else:
                assignment[n.name] = ctx.candidates(n)[0].name if ctx.candidates(n) else ctx.pins[n.name]
        env: dict[str, Any] = dict(feeds)
        for plan in partition_graph(ctx.graph, assignment):
            backend = ctx.backend(plan.backend)
            outs = [v for n in plan.nodes for v in n.outputs if v.name]
            from nnrt_core.ir.clone import extract_subgraph

            sub = extract_subgraph(ctx.graph, plan.nodes, plan.inputs, outs, name=f"reference_{plan.name}")
            part = backend.compile(sub, ctx.compile_options(backend.name))
            args = {v.name: _to(backend, env[v.name]) for v in plan.inputs}
            result = part.run(args)
            for name, x in result.items():
                env[name] = x if backend.host_memory else backend.to_host(x)
        return env

    # ------------------------------------------------------------- timing
    def partition_seconds(self, plan: PartitionPlan) -> tuple[float, str] | None:
        """(seconds per run, "measured" | "cost model") of ``plan``, or None when
        it cannot be compiled or run here."""
        key: PartitionKey = (plan.backend, tuple(plan.node_names()))
        if key not in self._memo:
            self._memo[key] = self._partition_seconds(plan, key)
        return self._memo[key]

    def cache_key(self, plan: PartitionPlan, backend: Backend) -> str:
        opts = self.ctx.compile_options(backend.name)
        sig = partition_signature(plan.nodes, plan.inputs, plan.outputs)
        return (f"{backend.name}@{backend.version}|{opts.precision},{opts.num_threads},{opts.device},"
                f"{sorted(opts.extra.items())!r}|{sig}")

    def _partition_seconds(self, plan: PartitionPlan, key: PartitionKey) -> tuple[float, str] | None:
        ctx = self.ctx
        backend = ctx.backend(plan.backend)
        ckey = self.cache_key(plan, backend)
        cached = self.cache.get(ckey)
        if cached is not None:
            return cached, "measured"
        part = self.compiled(plan, key)
        if part is None:
            return None
        est = estimated_seconds_of(part)
        if est is not None:
            return float(est), "cost model"
        env = self.values()
        if env is None or any(v.name not in env for v in plan.inputs):
            return None
        try:
            args = {v.name: _to(backend, env[v.name]) for v in plan.inputs}
            seconds = _time_runs(part, args)
        except (NnrtError, ValueError, TypeError) as e:
            self.errors.append(f"{plan.name}: {e}")
            return None
        self.measured += 1
        self.cache.put(ckey, seconds)
        return seconds, "measured"

    def compiled(self, plan: PartitionPlan, key: PartitionKey) -> CompiledPartition | None:
        """``plan`` compiled once.  Real partitions (index >= 0) are shared with
        the session through ``ctx.compiled``; probes (index < 0, e.g. one node
        with all its outputs) are kept apart since their boundary may differ."""
        store = self.ctx.compiled if plan.index >= 0 else self._probes
        part = store.get(key)
        if part is None:
            backend = self.ctx.backend(plan.backend)
            try:
                part = backend.compile(plan.to_graph(self.ctx.graph), self.ctx.compile_options(backend.name))
            except NnrtError as e:
                self.errors.append(f"{plan.name} does not compile: {e}")
                return None
            store[key] = part
        return part

    def node_seconds(self, node: Node, backend: str) -> tuple[float, str] | None:
        """Cost of ``node`` alone on ``backend`` (a one-node probe partition)."""
        inputs = [v for v in node.all_inputs() if not (v.const is not None and v.producer is None)]
        probe = PartitionPlan(-1, backend, [node], list(dict.fromkeys(inputs)),
                              [v for v in node.outputs if v.name])
        key: PartitionKey = (f"probe:{backend}", (node.name,))
        if key not in self._memo:
            self._memo[key] = self._partition_seconds(probe, (backend, (node.name,)))
        return self._memo[key]


    def time_plans(self, plans: list[list[PartitionPlan]]) -> list[float | None]:
        """End-to-end seconds per run of each plan, run as the session's
        executor would and interleaved round-robin (so load changes hit every
        plan alike); the median per plan.  Catches what per-partition timings
        miss (e.g. one runtime's spinning threads slowing the next partition).
        Cached like partition timings; None for a plan that cannot run."""
        from nnrt_core.plugin_api import ExecutionStep, Executor

        graph = self.ctx.graph
        keys = ["plan|" + hashlib.sha256("\n".join(
            self.cache_key(p, self.ctx.backend(p.backend)) for p in plan).encode()).hexdigest()[:24]
                for plan in plans]
        out: list[float | None] = [self.cache.get(k) for k in keys]
        todo = [i for i, v in enumerate(out) if v is None]
        if not todo:
            return out
        feeds = synthesize_feeds(graph)
        if feeds is None:
            return out
        consts = {v.name: v.const for v in graph.outputs if v.const is not None and v.producer is None}
        executors: dict[int, Executor] = {}
        for i in todo:
            steps = []
            for p in plans[i]:
                part = self.compiled(p, (p.backend, tuple(p.node_names())))
                if part is None:
                    break
                steps.append(ExecutionStep(part, self.ctx.backend(p.backend), [v.name for v in p.inputs],
                                           [v.name for v in p.outputs], types={v.name: v.type for v in p.outputs}))
            else:
                ex = Executor(steps, [v.name for v in graph.outputs], consts, [v.name for v in graph.inputs])
                try:
                    ex.run(feeds)  # warm-up
                except (NnrtError, ValueError, TypeError, KeyError) as e:
                    self.errors.append(f"plan {i} does not run: {e}")
                    continue
                executors[i] = ex
        times: dict[int, list[float]] = {i: [] for i in executors}
        spent = 0.0
        rounds = 0
        order = list(executors.items())
        while executors and (rounds < PLAN_MIN_ROUNDS or (spent < 4 * TIME_BUDGET_SECONDS and rounds < MAX_RUNS)):
            # rotate the order and pause between plans: a runtime whose worker
            # threads spin after a run (ONNX Runtime) must not slow the next plan
            for i, ex in order[rounds % len(order):] + order[:rounds % len(order)]:
                time.sleep(PAUSE_SECONDS)
                t0 = time.perf_counter()
                ex.run(feeds)
                dt = time.perf_counter() - t0
                times[i].append(dt)
                spent += dt
            rounds += 1
        for i, runs in times.items():
            out[i] = seconds = statistics.median(runs)
            self.cache.put(keys[i], seconds)
            self.measured += 1
        return out


def _reference_order(ctx: PlacementContext) -> list[Backend]:
    """Backends for the reference run: numpy (the reference) first, then other
    host backends, then the rest."""
    cands = list(ctx.backends) + ([ctx.backup] if ctx.backup is not None else [])
    seen: dict[str, Backend] = {}
    for b in cands:
        seen.setdefault(b.name, b)
    return sorted(seen.values(), key=lambda b: (b.name != "numpy", not b.host_memory))


def _to(backend: Backend, x: Any) -> Any:
    return x if backend.host_memory else backend.to_device(x)


def _time_runs(part: CompiledPartition, args: Mapping[str, Any]) -> float:
    part.run(args)  # warm-up (lazy initialisation, caches)
    times: list[float] = []
    spent = 0.0
    while len(times) < MIN_RUNS or (spent < TIME_BUDGET_SECONDS and len(times) < MAX_RUNS):
        t0 = time.perf_counter()
        part.run(args)
        dt = time.perf_counter() - t0
        times.append(dt)
        spent += dt
        if dt > TIME_BUDGET_SECONDS and len(times) >= 2:
            break  # slow partitions: two timed runs are enough
    return statistics.median(times)
