"""Profiling one run of a session as a Chrome / Perfetto trace.

``Session.profile(feeds)`` runs the partitions in order through
``Executor.run_observed`` and records, on a timeline in microseconds:

* one slice for the run, one per partition (on its backend's track) and one
  per node inside it: partitions that offer ``run_profiled(inputs) ->
  (outputs, records, span)`` report their own kernels (ONNX Runtime's
  profiler; ``records`` are dicts with ``name``, ``op_type``, ``start`` and
  ``end`` in ``time.perf_counter`` seconds, ``span`` the run's own (start,
  end) or None);
  other host-memory partitions (NumPy) are run node by node through
  single-node programs compiled on the same backend; device partitions get a
  partition slice;
* the simulated time of partitions whose ``describe()`` carries a cost-model
  table (``per_op`` entries with ``time_us``, the emulated NPU): one slice per
  instruction on a "<backend> (simulated)" process, starting with the
  partition's host slice;
* every host<->device copy as a slice on the "transfers" track.

The trace also carries the run's projected latency (``Trace.projection``, and
``metadata["projection"]``; see :mod:`nnrt_core.profiling.projection`): per
partition host wall time and, for emulated devices, simulated device time;
host partitions are run once more without profiling for that figure (the
profiled run times them node by node).

The JSON written by ``Trace.save`` is the Trace Event Format
(``{"traceEvents": [...]}`` with complete ``"X"`` events and ``"M"`` metadata
naming processes and threads) that chrome://tracing and ui.perfetto.dev open.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
import weakref
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from nnrt_core.backend.base import Backend, CompiledPartition, describe_partition, estimated_seconds_of
from nnrt_core.errors import ExecutionError, InputError, NnrtError
from nnrt_core.compiler.model import CompiledModel
from nnrt_core.ir import Node
from nnrt_core.runtime.executor import ExecutionStep, StepObserver
from nnrt_core.runtime.output_check import OutputCheck
from nnrt_core.profiling.projection import LatencyProjection, RunSample, project


__all__ = ["Trace", "Profiler", "profile_run", "HOST_PID", "SIMULATED_PID"]

HOST_PID = 1  #: process of the host timeline (run, partitions, nodes, transfers)
SIMULATED_PID = 2  #: first process of simulated device timelines
_RUN_TID = 1
_TRANSFER_TID = 2


@dataclass
class Trace:
    """The events of one profiled run, plus its outputs."""

    events: list[dict[str, Any]]
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    wall_seconds: float = 0.0
    metadata: dict[str, Any] = field(default_factory=dict)
    #: host wall / simulated device time per partition and the projected end-to-end latency
    projection: LatencyProjection | None = None

    def slices(self, *, pid: int | None = None, track: str | None = None,
               cat: str | None = None) -> list[dict[str, Any]]:
        """The complete (``"X"``) events, optionally of one process, track
        (thread name) or category."""
        names = self.track_names()
        out = []
        for e in self.events:
            if e["ph"] != "X":
                continue
            if pid is not None and e["pid"] != pid:
                continue
            if track is not None and names.get((e["pid"], e["tid"])) != track:
                continue
            if cat is not None and e.get("cat") != cat:
                continue
            out.append(e)
        return out

    def track_names(self) -> dict[tuple[int, int], str]:
        """(pid, tid) -> thread name from the metadata events."""
        return {(e["pid"], e["tid"]): e["args"]["name"] for e in self.events
                if e["ph"] == "M" and e["name"] == "thread_name"}

    def to_dict(self) -> dict[str, Any]:
        return {"traceEvents": list(self.events), "displayTimeUnit": "ms", "otherData": dict(self.metadata)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), default=_json_default)

    def save(self, path: str | os.PathLike) -> Path:
        """Write the trace JSON to ``path`` (open it in ui.perfetto.dev)."""
        p = Path(path)
        try:
            p.write_text(self.to_json())
        except OSError as e:
            raise InputError(f"cannot write trace file {str(p)!r}: {e}") from e
        return p

    def summary(self) -> list[dict[str, Any]]:
        """Host time per (track, category): ``[{track, cat, slices, ms}]``."""
        names = self.track_names()
        acc: dict[tuple[str, str], list[float]] = {}
        for e in self.slices():
            key = (names.get((e["pid"], e["tid"]), "?"), e.get("cat", ""))
            acc.setdefault(key, []).append(e["dur"])
        return [{"track": t, "cat": c, "slices": len(d), "ms": sum(d) / 1e3} for (t, c), d in sorted(acc.items())]


def _json_default(x: Any) -> Any:
    if isinstance(x, np.generic):
        return x.item()
    return str(x)


#: single-node programs per compiled partition (None: not possible), kept as long as the partition lives
_NODE_PROGRAMS: "weakref.WeakKeyDictionary[CompiledPartition, list[tuple[str, str, CompiledPartition]] | None]" = \
    weakref.WeakKeyDictionary()


class Profiler:
    """A ``StepObserver`` building the trace of one run of ``model``."""

    def __init__(self, model: CompiledModel) -> None:
        self.model = model
        self.events: list[dict[str, Any]] = []
        self.sample = RunSample()  #: step and copy times for the projection
        self.profiling_seconds = 0.0  #: time spent in run_step besides running the steps
        self.origin = time.perf_counter()
        self._tids: dict[str, int] = {}
        self._sim_pids: dict[str, int] = {}
        #: id(compiled) -> (partition name, its nodes) when the graph has them (not for loaded models)
        self._parts: dict[int, tuple[str, list[Node]]] = {}
        #: id(compiled) -> (node names, op types of one-node partitions)
        self._meta: dict[int, tuple[tuple[str, ...], tuple[str, ...]]] = {}
        by_name = {n.name: n for n in model.graph.nodes}
        for info, step in zip(model.partitions, model.steps):
            nodes = [by_name[n] for n in info.nodes if n in by_name]
            self._meta[id(step.compiled)] = (info.nodes, info.op_types)
            if len(nodes) == len(info.nodes):
                self._parts[id(step.compiled)] = (f"p{info.index}_{info.backend}", nodes)
        self._metadata(HOST_PID, "process_name", {"name": f"nnrt: {model.graph.name or 'model'}"})
        self._metadata(HOST_PID, "process_sort_index", {"sort_index": 0})
        self._thread(HOST_PID, _RUN_TID, "run", 0)
        self._thread(HOST_PID, _TRANSFER_TID, "transfers", 1000)

    def _us(self, t: float) -> float:
        return round((t - self.origin) * 1e6, 3)

    def _metadata(self, pid: int, name: str, args: dict[str, Any], tid: int = 0) -> None:
        self.events.append({"name": name, "ph": "M", "pid": pid, "tid": tid, "args": args})

    def _thread(self, pid: int, tid: int, name: str, sort: int) -> None:
        self._metadata(pid, "thread_name", {"name": name}, tid)
        self._metadata(pid, "thread_sort_index", {"sort_index": sort}, tid)

    def _backend_tid(self, backend: Backend) -> int:
        tid = self._tids.get(backend.name)
        if tid is None:
            tid = self._tids[backend.name] = 10 + len(self._tids)
            self._thread(HOST_PID, tid, backend.name, tid)
        return tid

    def _sim_pid(self, backend: Backend, device: str) -> int:
        key = f"{backend.name} (simulated)"
        pid = self._sim_pids.get(key)
        if pid is None:
            pid = self._sim_pids[key] = SIMULATED_PID + len(self._sim_pids)
            self._metadata(pid, "process_name", {"name": key})
            self._metadata(pid, "process_sort_index", {"sort_index": pid})
            self._thread(pid, 1, device, 1)
        return pid

    def slice(self, name: str, cat: str, start: float, end: float, pid: int, tid: int,
              args: Mapping[str, Any] | None = None) -> None:
        """A complete event from ``start`` to ``end`` (``perf_counter`` seconds)."""
        ts = self._us(start)
        self.events.append({"name": name, "cat": cat, "ph": "X", "ts": ts, "dur": max(0.0, self._us(end) - ts),
                            "pid": pid, "tid": tid, "args": dict(args or {})})

    # ------------------------------------------------------- StepObserver
    def transfer(self, value: str, direction: str, backend: Backend, start: float, end: float,
                 tensor: Any) -> None:
        nbytes = getattr(tensor, "nbytes", None)
        self.sample.add_copy(value, direction, backend, tensor, end - start)
        self.slice(f"{direction} {value}", "transfer", start, end, HOST_PID, _TRANSFER_TID,
                   {"value": value, "backend": backend.name, "direction": direction,
                    "bytes": int(nbytes) if nbytes is not None else None,
                    "shape": list(getattr(tensor, "shape", ()) or ()), "dtype": str(getattr(tensor, "dtype", "?"))})

    def run_step(self, index: int, step: ExecutionStep, args: dict[str, Any]) -> Mapping[str, Any]:
        entered = time.perf_counter()
        compiled, backend = step.compiled, step.backend
        tid = self._backend_tid(backend)
        nodes, ops = self._meta.get(id(compiled), ((), ()))
        part_args = {"backend": backend.name, "partition": index, "nodes": len(nodes)}
        profiled = getattr(compiled, "run_profiled", None)
        per_node = self._node_programs_for(compiled, backend) if profiled is None and backend.host_memory else None
        t0 = time.perf_counter()
        if callable(profiled):
            outs, records, span = _profiled(profiled, args, compiled, backend)
            t1 = time.perf_counter()
            if span is not None:  # the run itself, without the backend's profiling set-up
                t0, t1 = span
            part_args["node_timing"] = "backend profiler"
        elif per_node:
            outs, records = self._run_node_by_node(per_node, args, step.outputs)
            t1 = time.perf_counter()
            part_args["node_timing"] = "single-node programs"
        else:
            outs = compiled.run(args)
            t1 = time.perf_counter()
            # a one-node partition is its node; larger ones get no node slices
            records = [{"name": nodes[0], "op_type": ops[0], "start": t0, "end": t1}] if len(nodes) == 1 else []
            part_args["node_timing"] = "partition" if records else "none"
        self.slice(compiled.name, "partition", t0, t1, HOST_PID, tid, part_args)
        self._time_for_projection(index, compiled, args, t1 - t0)
        self._node_slices(compiled, backend, tid, t0, t1, records)
        self._simulated(compiled, backend, t0)
        self.profiling_seconds += time.perf_counter() - entered - (t1 - t0)
        return outs

    def _node_slices(self, compiled: CompiledPartition, backend: Backend, tid: int, t0: float, t1: float,
                     records: list[dict[str, Any]]) -> None:
        for r in records:
            start, end = max(t0, r["start"]), min(t1, r["end"])
            extra = {k: v for k, v in r.items() if k not in ("name", "start", "end")}
            self.slice(r["name"], "node", start, max(start, end), HOST_PID, tid,
                       {"backend": backend.name, "partition": compiled.name, **extra})

    def _time_for_projection(self, index: int, compiled: CompiledPartition, args: Mapping[str, Any],
                             seconds: float) -> None:
        """Record the step for the projection; a host partition (no cost
        model) is run once more, plainly, and that time is its projected one."""
        self.sample.step_seconds[index] = seconds
        if estimated_seconds_of(compiled) is None:
            t0 = time.perf_counter()
            compiled.run(args)
            self.sample.warm_seconds[index] = time.perf_counter() - t0

    # --------------------------------------------------------- node timing
    def _node_programs_for(self, compiled: CompiledPartition,
                           backend: Backend) -> list[tuple[str, str, CompiledPartition]] | None:
        """Single-node partitions compiled on ``backend`` for every node of
        ``compiled`` (cached per compiled partition); None when not possible."""
        if compiled in _NODE_PROGRAMS:
            return _NODE_PROGRAMS[compiled]
        part = self._parts.get(id(compiled))
        programs: list[tuple[str, str, CompiledPartition]] | None = None
        if part is not None and len(part[1]) > 1:
            from nnrt_core.ir.clone import extract_subgraph

            name, nodes = part
            options = self.model.config.compile_options(backend.name)
            programs = []
            try:
                for node in nodes:
                    seen: dict[int, Any] = {}
                    for v in node.all_inputs():
                        if not (v.const is not None and v.producer is None):
                            seen.setdefault(id(v), v)
                    sub = extract_subgraph(self.model.graph, [node], list(seen.values()), list(node.outputs),
                                           name=f"{name}/{node.name}")
                    programs.append((node.name, node.qualified_op, backend.compile(sub, options)))
            except (NnrtError, KeyError):
                programs = None  # fall back to one slice for the partition
        _NODE_PROGRAMS[compiled] = programs
        return programs

    @staticmethod
    def _run_node_by_node(programs: Sequence[tuple[str, str, CompiledPartition]], args: Mapping[str, Any],
                          outputs: Sequence[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        env = dict(args)
        records = []
        for name, op, prog in programs:
            feeds = {n: env[n] for n in prog.input_names}
            start = time.perf_counter()
            env.update(OutputCheck(prog.backend.name, prog.name, prog.output_names, {})(prog.run(feeds)))
            records.append({"name": name, "op_type": op, "start": start, "end": time.perf_counter()})
        missing = [n for n in outputs if n not in env]
        if missing:
            raise ExecutionError(f"node-by-node profiling run did not produce {missing}")
        return {n: env[n] for n in outputs}, records

    # ------------------------------------------------------ simulated time
    def _simulated(self, compiled: CompiledPartition, backend: Backend, start: float) -> None:
        try:
            facts = describe_partition(compiled)
        except Exception:  # a report must not break the run
            return
        per_op = facts.get("per_op") if isinstance(facts, Mapping) else None
        if not per_op or not all(isinstance(p, Mapping) and "time_us" in p for p in per_op):
            return
        pid = self._sim_pid(backend, str(facts.get("device", facts.get("chip", "device"))))
        origin = self._us(start)
        total = sum(float(p["time_us"]) for p in per_op)
        self.events.append({"name": f"{compiled.name} (simulated)", "cat": "simulated_partition", "ph": "X",
                            "ts": origin, "dur": round(origin + total, 3) - origin, "pid": pid, "tid": 1,
                            "args": {"backend": backend.name, "cycles": facts.get("est_cycles"),
                                     "chip": facts.get("chip"), "est_time_ms": facts.get("est_time_ms")}})
        elapsed = 0.0
        for p in per_op:  # instructions back to back on the simulated device
            ts = round(origin + elapsed, 3)
            elapsed += float(p["time_us"])
            self.events.append({"name": str(p.get("node") or p.get("kernel")), "cat": "simulated", "ph": "X",
                                "ts": ts, "dur": round(origin + elapsed, 3) - ts, "pid": pid, "tid": 1,
                                "args": {"backend": backend.name, **{k: v for k, v in p.items() if k != "time_us"},
                                         "simulated_us": float(p["time_us"])}})


def profile_run(model: CompiledModel, run_observed: Callable[[Mapping[str, Any], StepObserver], dict[str, Any]],
                feeds: Mapping[str, Any]) -> Trace:
    """Run ``model`` once on ``feeds`` through ``run_observed`` (``Session.run_observed``)
    with profiling; see the module docstring."""
    prof = Profiler(model)
    t0 = time.perf_counter()
    outputs = run_observed(feeds, prof)
    t1 = time.perf_counter()
    prof.slice("run", "run", t0, t1, HOST_PID, _RUN_TID,
               {"partitions": len(model.steps), "outputs": list(outputs)})
    prof.sample.wall_seconds = t1 - t0 - prof.profiling_seconds  # the run without the profiler's own work
    projection = project(model, [prof.sample])
    meta = {"nnrt_graph": model.graph.name, "wall_ms": (t1 - t0) * 1e3,
            "backends": sorted({st.backend.name for st in model.steps}), "projection": projection.to_dict()}
    return Trace(prof.events, outputs, t1 - t0, meta, projection)


def _profiled(profiled: Any, args: Mapping[str, Any], compiled: CompiledPartition,
              backend: Backend) -> tuple[Any, list[dict[str, Any]], Any]:
    """``compiled.run_profiled(args)`` as (outputs, records, span);
    :class:`ExecutionError` when the backend fails or answers otherwise."""
    try:
        answer = profiled(args)
    except NnrtError:
        raise
    except Exception as e:
        raise ExecutionError(f"partition {compiled.name!r} on backend {backend.name!r} failed in run_profiled: "
                             f"{type(e).__name__}: {e}") from e
    if not (isinstance(answer, tuple) and len(answer) == 3 and isinstance(answer[1], list)):
        raise ExecutionError(f"backend {backend.name!r} partition {compiled.name!r} run_profiled returned "
                             f"{type(answer).__name__}; expected (outputs, records, span)")
    return answer
