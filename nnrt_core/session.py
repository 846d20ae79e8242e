"""``Session``: load -> select backends -> place -> partition -> compile -> run."""
from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import numpy as np

from nnrt_core.backend.base import Backend, Capability, CompiledPartition
from nnrt_core.config import ScheduleConfig
from nnrt_core.errors import CompileError, ConfigError, InputError, NnrtError, SessionFileError
from nnrt_core.executor import ExecutionStep, Executor
from nnrt_core.frontends import load_onnx
from nnrt_core.ir.clone import clone_graph
from nnrt_core.ir import Dim, Graph, Model, SequenceType, OptionalType, TensorType, Value
from nnrt_core.memory_plan import MemoryPlan, plan_graph, static_value_sizes
from nnrt_core.model_cache import ModelCache, model_digest
from nnrt_core.partitioning import PartitionPlan
from nnrt_core.passes import BackendSupport, PassContext, PassManager, PassReport
from nnrt_core.registry import Registry, default_registry
from nnrt_core.streams import RunFuture, RunPool, Stream, default_workers
from nnrt_core.scheduling import NodePlacement, PlacementContext, PlacementEvent, with_backup
from nnrt_core.weights import SharingReport, share_graph_weights
from nnrt_core.tensor import Tensor
from nnrt_core.session_file import (PartitionRecord, SessionImage, decode, encode, looks_like_session_file,
                                    read_session_file, write_atomic)

if TYPE_CHECKING:
    from nnrt_core.profiler import Trace

__all__ = ["Session", "TensorInfo", "PartitionInfo", "load_model"]

log = logging.getLogger("nnrt.session")


@dataclass(frozen=True)
class TensorInfo:
    """Name, element type and shape of a session input or output."""

    name: str
    dtype: np.dtype | None
    shape: tuple[Dim, ...] | None
    kind: str = "tensor"  #: tensor | sequence | optional

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": str(self.dtype) if self.dtype is not None else None,
                "shape": list(self.shape) if self.shape is not None else None, "kind": self.kind}


@dataclass(frozen=True)
class PartitionInfo:
    """One compiled partition as the user sees it."""

    index: int
    backend: str
    nodes: tuple[str, ...]
    op_types: tuple[str, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    details: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        for k in ("nodes", "op_types", "inputs", "outputs"):
            d[k] = list(d[k])
        d["details"] = dict(self.details)
        return d


def load_model(model: Any, input_shapes: Mapping[str, Sequence[int]] | None = None) -> Model:
    """A path, bytes, ``onnx.ModelProto``, IR ``Model`` or IR ``Graph`` as a
    Model the caller may transform (IR inputs are copied, weights shared).
    ``input_shapes`` fixes free input dimensions before shape inference
    (``ScheduleConfig.input_shapes``; IR models go through ONNX for it)."""
    if input_shapes and isinstance(model, (Model, Graph)):
        from nnrt_core.frontends import to_onnx

        src = model if isinstance(model, Model) else Model(graph=model)
        loaded = load_onnx(to_onnx(src), check=False, input_shapes=input_shapes)
        loaded.base_dir = getattr(src, "base_dir", None)
        return loaded
    if isinstance(model, Model):
        return dataclasses.replace(model, graph=clone_graph(model.graph), metadata=dict(model.metadata))
    if isinstance(model, Graph):
        return Model(graph=clone_graph(model))
    return load_onnx(model, input_shapes=input_shapes or None)


class Session:
    """A model compiled across backends, ready to run.

    >>> sess = Session("model.onnx", ScheduleConfig(backends=["onnxruntime"], backup="numpy"))
    >>> outputs = sess.run({"x": x})
    """

    def __init__(self, model: Any, config: ScheduleConfig | None = None, *,
                 registry: Registry | None = None) -> None:
        t0 = time.perf_counter()
        self.config = config if config is not None else ScheduleConfig()
        if not isinstance(self.config, ScheduleConfig):
            raise ConfigError(f"config must be a ScheduleConfig, got {type(self.config).__name__}")
        self.registry = registry if registry is not None else default_registry()
        self.events: list[PlacementEvent] = []
        self.cache_hit = False
        self.cache_path: str | None = None  #: the cache entry used or written
        self.folded_nodes = 0
        self._memory_plans: dict[tuple, MemoryPlan] = {}  #: per input-shape key
        self._concurrency_choice: dict[int, int] = {}  #: streams' measured choice, per max_in_flight
        #: the candidate placements the scheduler evaluated (cost-based schedulers), chosen first
        self.considered_plans: list[dict[str, Any]] = []
        self.weight_sharing = SharingReport()  #: constants this session shares with other sessions
        self._last_plan: MemoryPlan | None = None
        self._stored_memory_stats: dict[str, Any] | None = None  #: figures read from a session file
        self.pass_report = PassReport(self.config.optimization_level)  #: what the graph passes changed
        if looks_like_session_file(model):  # an offline model from ``nnrt compile`` / ``Session.save``
            what = "session bytes" if isinstance(model, (bytes, bytearray, memoryview)) else f"session file {str(model)!r}"
            image = decode(model, what=what) if isinstance(model, (bytes, bytearray, memoryview)) \
                else read_session_file(model)
            if config is None:
                self.config = ScheduleConfig.from_dict({**image.config, "cache_dir": None})
            self._load_image(image)
            self.build_seconds = time.perf_counter() - t0
            return
        self._backends, self._backup = self._select_backends()
        cache, key = self._open_cache(model)
        if cache is not None and self._load_cached(cache, key):
            self.build_seconds = time.perf_counter() - t0
            return
        self.model = load_model(model, self.config.input_shapes)
        self.graph = self.model.graph
        self.graph.topological_sort()
        self._scheduler = self._make_scheduler()
        self.folded_nodes = self._optimize()
        self.weight_sharing = share_graph_weights(self.graph)  # one copy of the (folded) weights per process
        self._build()
        if cache is not None:
            self._store_cached(cache, key)
        self.build_seconds = time.perf_counter() - t0

    # ------------------------------------------------------------- building
    def _event(self, kind: str, backend: str, message: str, nodes: Sequence[str] = ()) -> None:
        self.events.append(PlacementEvent(kind, backend, message, list(nodes)))
        log.warning("%s", message)

    def _select_backends(self) -> tuple[list[Backend], Backend | None]:
        cfg, reg = self.config, self.registry
        backup: Backend | None = None
        if cfg.backup is not None:
            rec = reg.backend(cfg.backup)
            if not rec.available:
                raise ConfigError(f"backup backend {cfg.backup!r} is unavailable: {rec.reason}")
            backup = rec.backend
        if cfg.backends == "auto":
            records = reg.available_backends()
            for r in reg.backends.values():
                if not r.available:
                    self._event("backend_unavailable", r.name,
                                f"backend {r.name!r} skipped (auto): {r.reason}")
        else:
            records = []
            for name in cfg.backends:
                rec = reg.backend(name)  # unknown name -> ConfigError listing installed ones
                if rec.available:
                    records.append(rec)
                else:
                    target = f"falling back to {cfg.backup!r}" if cfg.backup else "no backup configured"
                    self._event("backend_unavailable", name,
                                f"backend {name!r} is unavailable ({rec.reason}); {target}")
        backends = [r.backend for r in records if r.backend is not None]
        if not backends and backup is None:
            raise ConfigError("no usable backend: every selected backend is unavailable and no backup is set")
        for b in with_backup(backends, backup):
            ignored = sorted(cfg.requested_options() - b.supported_options)
            if ignored:
                msg = f"backend {b.name!r} does not support option(s) {ignored}"
                if cfg.strict:
                    raise ConfigError(msg + " (strict=True)")
                self._event("option_ignored", b.name, msg + "; ignored")
        return backends, backup

    def _optimize(self) -> int:
        """Graph passes of ``optimization_level`` before placement (see
        docs/passes.md); the report lands in ``pass_report``.  Returns the
        number of constant-folded nodes."""
        rec = self.registry.backends.get("numpy")
        ctx = PassContext(evaluator=rec.backend if rec is not None and rec.available else None,
                          supports=BackendSupport(self._candidates(), self.config.compile_options),
                          protected=frozenset(self.config.pins))
        self.pass_report = PassManager(self.config.optimization_level).run(self.graph, ctx)
        if self.config.input_shapes or all(isinstance(v.type, TensorType) and v.type.is_static
                                           for v in self.graph.inputs):
            self._refine_shapes(ctx)  # static inputs: types behind folded Shape chains become static too
        if self.pass_report.nodes_after != self.pass_report.nodes_before:
            log.info("%s", self.pass_report.summary())
        return self.pass_report.rewrites("constant_folding")

    def _refine_shapes(self, ctx: PassContext) -> None:
        """Re-infer static types once the passes folded what hid them (e.g. a
        Reshape target computed from Shape), then run the passes again; a few
        rounds at most.  Their changes are added to ``pass_report``."""
        from nnrt_core.frontends import refine_static_shapes

        report = self.pass_report
        for _ in range(4):
            if not refine_static_shapes(self.graph) or not report.passes:
                break
            more = PassManager(self.config.optimization_level).run(self.graph, ctx)
            for name, s in more.passes.items():
                mine = report.passes.setdefault(name, dataclasses.replace(s, rewrites=0, nodes_removed=0,
                                                                          nodes_added=0, seconds=0.0, notes=[]))
                mine.rewrites += s.rewrites
                mine.nodes_removed += s.nodes_removed
                mine.nodes_added += s.nodes_added
                mine.seconds += s.seconds
            report.iterations += more.iterations
            report.seconds += more.seconds
            report.nodes_after, report.ops_after = more.nodes_after, more.ops_after
            if not any(s.rewrites for s in more.passes.values()):
                break

    def _make_scheduler(self):
        rec = self.registry.scheduler(self.config.scheduler)
        return rec.cls()

    def _candidates(self) -> list[Backend]:
        return with_backup(self._backends, self._backup)

    def _build(self) -> None:
        cfg = self.config
        caps: dict[str, Capability] = {}
        for b in self._candidates():
            caps[b.name] = b.capability(self.graph, cfg.compile_options(b.name))
        compiled_cache: dict[tuple[str, tuple[str, ...]], CompiledPartition] = {}
        max_attempts = 1 + len(self.graph.nodes) * max(1, len(caps))
        for _attempt in range(max_attempts):
            ctx = PlacementContext(self.graph, self._backends, self._backup, caps, cfg, cfg.pins,
                                   compiled=compiled_cache)
            assignment = self._scheduler.place(ctx)
            plans = self._scheduler.partition(self.graph, assignment)
            failed = self._compile_all(plans, compiled_cache)
            if failed is None:
                break
            plan, err = failed
            cap = caps[plan.backend]
            names = plan.node_names()
            for n in names:
                cap.supported.discard(n)
                cap.rejected[n] = f"partition failed to compile: {err}"
            self._event("compile_fallback", plan.backend,
                        f"backend {plan.backend!r} failed to compile partition {plan.name} "
                        f"({len(names)} nodes): {err}; re-placing its nodes", names)
        else:  # pragma: no cover - each attempt removes at least one (node, backend) pair
            raise CompileError("placement did not converge")
        self._finish(ctx, assignment, plans)

    def _compile_all(self, plans: list[PartitionPlan], cache: dict) -> tuple[PartitionPlan, Exception] | None:
        self._compiled: list[CompiledPartition] = []
        for plan in plans:
            key = (plan.backend, tuple(plan.node_names()))
            compiled = cache.get(key)
            if compiled is None:
                backend = self._backend_named(plan.backend)
                try:
                    compiled = backend.compile(plan.to_graph(self.graph), self.config.compile_options(backend.name))
                except CompileError as e:
                    return plan, e
                cache[key] = compiled
            self._compiled.append(compiled)
        return None

    def _backend_named(self, name: str) -> Backend:
        for b in self._candidates():
            if b.name == name:
                return b
        raise ConfigError(f"backend {name!r} is not selected")

    def _finish(self, ctx: PlacementContext, assignment: dict[str, str], plans: list[PartitionPlan]) -> None:
        self.plans = plans
        self.considered_plans = [dict(p) for p in ctx.considered]
        part_of = {n.name: p.index for p in plans for n in p.nodes}
        first = ctx.backends[0].name if ctx.backends else None
        self.placement_report: list[NodePlacement] = []
        fallback_nodes: dict[str, list[str]] = {}
        for n in self.graph.nodes:
            b = assignment[n.name]
            rejected = ctx.rejections(n)
            if n.name in ctx.pins:
                reason = "pinned by config"
            elif (self._backup is not None and b == self._backup.name and b not in {x.name for x in ctx.backends}
                  and not any(ctx.capabilities[x.name].supports(n.name) for x in ctx.backends)):
                reason = "backup: no selected backend supports it"
                fallback_nodes.setdefault(b, []).append(n.name)
            elif n.name in ctx.reasons:
                reason = ctx.reasons[n.name]
            elif b != first and first is not None:
                reason = f"{first} rejected it" if first in rejected else f"chosen by {self._scheduler.name}"
            else:
                reason = f"chosen by {self._scheduler.name}"
            self.placement_report.append(NodePlacement(n.name, n.qualified_op, b, part_of[n.name], reason, rejected))
        for b, nodes in fallback_nodes.items():
            if ctx.backends:
                self._event("node_fallback", b, f"{len(nodes)} node(s) fall back to backup {b!r}", nodes)
        for e in ctx.events:  # scheduler decisions (island merges...), visible like fallbacks
            self._event(e.kind, e.backend, e.message, e.nodes)
        self._estimates = self._scheduler.estimate_partitions(ctx, plans, self._compiled)
        steps = []
        for plan, compiled in zip(plans, self._compiled):
            steps.append(ExecutionStep(compiled, self._backend_named(plan.backend),
                                       [v.name for v in plan.inputs], [v.name for v in plan.outputs]))
        consts = {v.name: v.const for v in self.graph.outputs if v.const is not None and v.producer is None}
        self._part_meta = [_PartitionMeta(p.index, p.backend, tuple(p.node_names()),
                                          tuple(n.qualified_op for n in p.nodes),
                                          tuple(v.name for v in p.inputs), tuple(v.name for v in p.outputs))
                           for p in plans]
        self._start_executor(steps, consts)

    def _start_executor(self, steps: list[ExecutionStep], consts: dict[str, np.ndarray]) -> None:
        self._constants = consts
        self._executor = Executor(steps, [v.name for v in self.graph.outputs], consts,
                                  [v.name for v in self.graph.inputs])
        self._fast_feed_specs = _fast_feed_specs(self.graph.inputs)

    # ------------------------------------------- offline models and the cache
    def save(self, path: str | os.PathLike) -> Path:
        """Write this compiled session as one file that ``Session(path)``
        loads and runs without the source model (an offline model)."""
        return write_atomic(path, encode(self.to_image()))

    def to_image(self) -> SessionImage:
        """The session's compiled form; :class:`SessionFileError` when a
        backend cannot serialize its partitions."""
        parts = []
        for meta, compiled in zip(self._part_meta, self._compiled):
            blob = compiled.serialize()
            if blob is None:
                raise SessionFileError(f"backend {meta.backend!r} cannot serialize compiled partitions "
                                       f"(partition {meta.index}), so this session cannot be saved")
            parts.append(PartitionRecord(meta.index, meta.backend, str(self._backend_named(meta.backend).version),
                                         compiled.name, list(zip(meta.nodes, meta.op_types)), list(meta.inputs),
                                         list(meta.outputs), blob))
        from nnrt_core import __version__

        return SessionImage(
            config=self.config.to_dict(),
            inputs=[(v.name, v.type) for v in self.graph.inputs],
            outputs=[(v.name, v.type) for v in self.graph.outputs],
            partitions=parts, placement=[p.to_dict() for p in self.placement_report],
            events=[e.to_dict() for e in self.events], constants=dict(self._constants),
            meta={"nnrt_version": __version__, "graph_name": self.graph.name, "folded_nodes": self.folded_nodes,
                  "memory": self._memory_stats(), "passes": self.pass_report.to_dict(),
                  "considered_plans": self.considered_plans})

    def _load_image(self, image: SessionImage) -> None:
        """Become the session ``image`` describes (no source model needed)."""
        self.graph = Graph(str(image.meta.get("graph_name", "offline")),
                           inputs=[Value(n, t) for n, t in image.inputs],
                           outputs=[Value(n, t) for n, t in image.outputs])
        self.model = Model(graph=self.graph)
        self.folded_nodes = int(image.meta.get("folded_nodes", 0) or 0)
        if isinstance(image.meta.get("passes"), dict):
            self.pass_report = PassReport.from_dict(image.meta["passes"])
        memory = image.meta.get("memory")
        self._stored_memory_stats = {k: memory.get(k) for k in ("planned_peak_bytes", "naive_bytes",
                                                                "lower_bound_bytes")} \
            if isinstance(memory, dict) else None
        self.events = [PlacementEvent(**e) for e in image.events]
        self.placement_report = [NodePlacement(**p) for p in image.placement]
        plans = image.meta.get("considered_plans")
        self.considered_plans = [dict(p) for p in plans if isinstance(p, dict)] if isinstance(plans, list) else []
        steps, compiled, used = [], [], []
        for rec in image.partitions:
            reg = self.registry.backend(rec.backend)  # ConfigError listing installed backends
            if not reg.available or reg.backend is None:
                raise SessionFileError(f"the compiled session needs backend {rec.backend!r}, which is unavailable "
                                       f"here: {reg.reason}")
            backend = reg.backend
            part = backend.load_compiled(rec.blob, self.config.compile_options(rec.backend))
            compiled.append(part)
            if backend not in used:
                used.append(backend)
            steps.append(ExecutionStep(part, backend, list(rec.inputs), list(rec.outputs)))
        self._backends, self._backup = used, None
        self._compiled = compiled
        self._part_meta = [_PartitionMeta(r.index, r.backend, tuple(n for n, _ in r.nodes),
                                          tuple(op for _, op in r.nodes), tuple(r.inputs), tuple(r.outputs))
                           for r in image.partitions]
        self._start_executor(steps, dict(image.constants))

    def _open_cache(self, model: Any) -> tuple[ModelCache | None, str]:
        if self.config.cache_dir is None:
            return None, ""
        cache = ModelCache(self.config.cache_dir, self.config.cache_version)  # ConfigError if unusable
        digest = model_digest(model)
        if digest is None:
            self._event("cache_disabled", "-", "model cache skipped: this model cannot be keyed")
            return None, ""
        backends = [b.cache_fingerprint() for b in self._candidates()]
        return cache, cache.key(digest, self.config.to_dict(), backends)

    def _load_cached(self, cache: ModelCache, key: str) -> bool:
        image, why = cache.load(key)
        self.cache_path = str(cache.path(key))
        if image is None:
            log.info("model cache %s: %s", self.cache_path, why)
            return False
        try:
            self._load_image(image)
        except NnrtError as e:  # e.g. a device blob the backend now refuses: rebuild
            log.warning("model cache: cannot load %s (%s); rebuilding", self.cache_path, e)
            self.events = []
            return False
        self.cache_hit = True
        return True

    def _store_cached(self, cache: ModelCache, key: str) -> None:
        try:
            image = self.to_image()
        except SessionFileError as e:
            self._event("cache_disabled", "-", f"model cache not written: {e}")
            return
        problem = cache.store(key, image)
        if problem is not None:
            self._event("cache_disabled", "-", f"model cache not written ({problem}); running without a cache")

    # ---------------------------------------------------------------- views
    @property
    def inputs(self) -> list[TensorInfo]:
        return [_info(v) for v in self.graph.inputs]

    @property
    def outputs(self) -> list[TensorInfo]:
        return [_info(v) for v in self.graph.outputs]

    @property
    def placement(self) -> dict[str, str]:
        """node name -> backend name."""
        return {p.node: p.backend for p in self.placement_report}

    @property
    def partitions(self) -> list[PartitionInfo]:
        out = []
        for meta, compiled in zip(self._part_meta, self._compiled):
            details = compiled.describe()
            est = getattr(self, "_estimates", {}).get(meta.index)
            if est is not None:  # estimated cost of one run (see nnrt_core.scheduling.CostModel)
                details = {**details, "estimated_ms": est[0] * 1e3, "estimate_source": est[1]}
            out.append(PartitionInfo(meta.index, meta.backend, meta.nodes, tuple(sorted(set(meta.op_types))),
                                     meta.inputs, meta.outputs, details))
        return out

    @property
    def fallbacks(self) -> list[PlacementEvent]:
        return list(self.events)

    def stats(self) -> dict[str, Any]:
        """Counters and figures of this session: host<->device copies, cache
        hit, build time and the static memory plan of its intermediates
        (``planned_peak_bytes``, ``naive_bytes``, ``lower_bound_bytes``;
        ``None`` while shapes are dynamic and no run has fixed them), and the
        constants' ``weight_bytes``, of which ``shared_weight_bytes`` were
        identical arrays already held (by another session of the process, or
        elsewhere in this model) and are not held twice."""
        return {
            "host_device_copies": self._executor.host_device_copies,
            "partitions": len(self._compiled),
            "cache_hit": self.cache_hit,
            "build_seconds": self.build_seconds,
            "passes": {"level": self.pass_report.level, "nodes_before": self.pass_report.nodes_before,
                       "nodes_after": self.pass_report.nodes_after,
                       "rewrites": {k: v.rewrites for k, v in self.pass_report.passes.items() if v.rewrites}},
            **self._memory_stats(),
            # the NumPy backend's kernels write Conv/fused-chain outputs into planned arenas
            "host_arena_bytes": sum(int(c.describe().get("arena_bytes", 0) or 0) for c in self._compiled),
            "weight_bytes": self.weight_sharing.bytes,
            "shared_weight_bytes": self.weight_sharing.shared_bytes,
        }

    def memory_plan(self, input_shapes: Mapping[str, Sequence[int]] | None = None) -> MemoryPlan:
        """The lifetime-based arena plan of every intermediate tensor in
        execution order.  Graphs with dynamic shapes need ``input_shapes``;
        plans are cached per shape."""
        if not self.graph.nodes:
            raise SessionFileError("a session loaded from a compiled file has no graph to plan; "
                                   "see stats() for the plan stored with it")
        key = tuple(sorted((k, tuple(int(d) for d in v)) for k, v in (input_shapes or {}).items()))
        plans = self._memory_plans
        if key not in plans:
            sizes = static_value_sizes(self.graph, dict(key)) if key else None
            plans[key] = plan_graph(self.graph, sizes)
            self._last_plan = plans[key]
        return plans[key]

    def _memory_stats(self) -> dict[str, Any]:
        stored = self._stored_memory_stats
        if stored is not None:
            return dict(stored)
        plan = self._last_plan
        if plan is None and self.graph.nodes:
            plan = self.memory_plan()
        if plan is None or plan.unplanned:
            return {"planned_peak_bytes": None, "naive_bytes": None, "lower_bound_bytes": None}
        return {k: v for k, v in plan.as_stats().items() if k != "unplanned_values"}

    # ------------------------------------------------------------------ run
    def run(self, feeds: Mapping[str, Any], output_names: Sequence[str] | None = None, *,
            keep_on_device: bool = False) -> dict[str, Any]:
        """Run the model.  Returns outputs in graph-output order (or in the
        order of ``output_names``).

        Feeds are numpy arrays or :class:`Tensor` s (e.g. from
        :meth:`allocate_input`: a tensor already in the reading backend's
        memory is used without a copy).  With ``keep_on_device`` outputs a
        device backend produced stay there, returned as ``Tensor`` s."""
        checked = self._check_feeds(feeds)
        if checked is feeds and not keep_on_device:  # plain host arrays: the fast path
            results = self._executor.run(checked)
        else:
            raw, owners = {}, {}
            for name, x in checked.items():
                if type(x) is Tensor:
                    raw[name] = x.data
                    if x.on_device:
                        owners[name] = x.backend
                else:
                    raw[name] = x
            results = self._executor.run(raw, owners, keep_on_device)
        out = dict(zip(self._executor.graph_outputs, results))
        if output_names is None:
            return out
        unknown = [n for n in output_names if n not in out]
        if unknown:
            raise InputError(f"unknown output(s) {unknown}; outputs: {list(out)}")
        return {n: out[n] for n in output_names}

    def allocate_input(self, name: str, shape: Sequence[int] | None = None) -> Tensor:
        """A tensor for input ``name`` in the memory of the backend that reads
        it (host memory when several backends or a host backend read it).
        Fill it through ``tensor.numpy()`` (a view where device memory is
        mapped) or ``tensor.copy_from(array)``; feeding it costs no copy."""
        spec = next((v for v in self.graph.inputs if v.name == name), None)
        if spec is None:
            raise InputError(f"unknown input {name!r}; the model's inputs are {[v.name for v in self.graph.inputs]}")
        t = spec.type
        if not isinstance(t, TensorType) or t.shape is None:
            raise InputError(f"input {name!r} is not a tensor of known rank; it cannot be allocated")
        dims = list(t.shape)
        if shape is not None:
            shape = tuple(int(d) for d in shape)
            if len(shape) != len(dims) or any(isinstance(d, int) and d != s for d, s in zip(dims, shape)) \
                    or any(s < 0 for s in shape):
                raise InputError(f"input {name!r} has shape {_shape_str(t.shape)}; cannot allocate {list(shape)}")
        elif all(isinstance(d, int) for d in dims):
            shape = tuple(dims)
        else:
            raise InputError(f"input {name!r} has dynamic shape {_shape_str(t.shape)}; pass shape=")
        dtype = t.dtype.numpy
        readers = {id(st.backend): st.backend for st in self._executor.steps if name in st.inputs}
        backend = next(iter(readers.values())) if len(readers) == 1 else None
        if backend is None or backend.host_memory:
            return Tensor(np.empty(shape, dtype), None, shape, dtype)
        return Tensor(backend.allocate(shape, dtype), backend, shape, dtype)

    # ------------------------------------------------- async, streams, profiling
    _async_pool_lock = threading.Lock()

    def run_async(self, feeds: Mapping[str, Any], output_names: Sequence[str] | None = None) -> RunFuture:
        """Start a run on the session's worker threads (one per core).  The
        outputs, or the error (bad feeds included), arrive through the future.
        The feed arrays must stay unchanged until the future is done."""
        try:
            checked = dict(self._check_feeds(feeds))
        except Exception as e:
            fut = RunFuture()
            fut.set_exception(e)
            return fut
        return self._run_pool().submit(checked, output_names)

    def _run_pool(self) -> RunPool:
        pool = self.__dict__.get("_async_pool")
        if pool is None:
            with Session._async_pool_lock:
                pool = self.__dict__.get("_async_pool")
                if pool is None:
                    pool = self._async_pool = RunPool(self.run, default_workers())
        return pool

    def _prepare_thread_budgets(self, budgets: Iterable[int]) -> None:
        """Let every partition prepare for runs with these thread budgets."""
        budgets = sorted(set(budgets))
        for st in self._executor.steps:
            for threads in budgets:
                st.compiled.prepare_thread_budget(threads)

    def stream(self, max_in_flight: int = 2, callback: Any = None,
               output_names: Sequence[str] | None = None, concurrency: int | str = "auto") -> Stream:
        """A :class:`~nnrt_core.streams.Stream` keeping up to ``max_in_flight``
        runs of this session going, reporting each to ``callback(completion)``;
        ``concurrency`` ("auto" or a number) is how many execute at once."""
        return Stream(self, max_in_flight, callback, output_names, concurrency)

    def profile(self, feeds: Mapping[str, Any]) -> "Trace":
        """Run once with timing of every partition, node and transfer; returns
        a :class:`~nnrt_core.profiler.Trace` (``.save(path)`` writes Chrome /
        Perfetto trace JSON, ``.outputs`` holds the run's outputs)."""
        from nnrt_core.profiler import profile_session

        return profile_session(self, feeds)

    def _check_feeds(self, feeds: Mapping[str, Any]) -> Mapping[str, Any]:
        fast = self._fast_feed_specs
        if fast is not None and type(feeds) is dict and len(feeds) == len(fast):
            for name, dtype, ndim, fixed, static in fast:  # the common case, checked cheaply
                x = feeds.get(name)
                if type(x) is not np.ndarray or (x.dtype is not dtype and x.dtype != dtype):
                    break
                shape = x.shape
                if static is not None:
                    if shape != static:
                        break
                elif len(shape) != ndim or any(shape[i] != d for i, d in fixed):
                    break
            else:
                return feeds
        return self._check_feeds_slow(feeds)

    def _check_feeds_slow(self, feeds: Mapping[str, Any]) -> dict[str, Any]:
        """Full validation with a precise error for whatever is wrong."""
        if not isinstance(feeds, Mapping):
            raise InputError(f"feeds must be a mapping of input name -> array, got {type(feeds).__name__}")
        expected = {v.name: v for v in self.graph.inputs}
        unknown = sorted(set(feeds) - set(expected))
        if unknown:
            raise InputError(f"unknown input(s) {unknown}; the model's inputs are {list(expected)}")
        missing = [n for n in expected if n not in feeds]
        if missing:
            raise InputError(f"missing input(s) {missing}; expected {[str(_info(expected[n]).to_dict()) for n in missing]}")
        out: dict[str, Any] = {}
        for name, v in expected.items():
            out[name] = _check_one(name, v, feeds[name])
        return out


@dataclass(frozen=True)
class _PartitionMeta:
    """What the session remembers of a partition's plan (also for loaded sessions)."""

    index: int
    backend: str
    nodes: tuple[str, ...]
    op_types: tuple[str, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


def _fast_feed_specs(inputs: list[Value]) -> list[tuple[str, np.dtype, int, tuple, tuple | None]] | None:
    """(name, dtype, rank, fixed dims, the shape when all dims are fixed) per input when every input is a tensor
    of known dtype and rank; None otherwise (then every run takes the slow check)."""
    specs = []
    for v in inputs:
        t = v.type
        if not isinstance(t, TensorType) or t.shape is None:
            return None
        try:
            dtype = t.dtype.numpy
        except TypeError:
            return None
        if dtype == np.dtype(object):
            return None
        fixed = tuple((i, d) for i, d in enumerate(t.shape) if isinstance(d, int))
        static = tuple(t.shape) if len(fixed) == len(t.shape) else None  # one tuple compare
        specs.append((v.name, dtype, len(t.shape), fixed, static))
    return specs


def _info(v: Value) -> TensorInfo:
    if isinstance(v.type, TensorType):
        try:
            dt = v.type.dtype.numpy
        except TypeError:
            dt = None
        return TensorInfo(v.name, dt, v.type.shape)
    kind = "sequence" if isinstance(v.type, SequenceType) else "optional" if isinstance(v.type, OptionalType) else "unknown"
    return TensorInfo(v.name, None, None, kind)


def _check_one(name: str, v: Value, x: Any) -> Any:
    t = v.type
    if isinstance(t, SequenceType):
        if not isinstance(x, list):
            raise InputError(f"input {name!r} expects a sequence (list of arrays), got {type(x).__name__}")
        return x
    if isinstance(t, OptionalType):
        return x
    if not isinstance(t, TensorType):
        return x
    if isinstance(x, Tensor):  # zero-copy tensor: check what it holds, never copy it
        want = t.dtype.numpy
        if x.dtype != want or (t.shape is not None and (
                len(x.shape) != len(t.shape)
                or any(isinstance(d, int) and d != g for d, g in zip(t.shape, x.shape)))):
            raise InputError(f"tensor fed to input {name!r} holds {x.dtype}{list(x.shape)}; the input expects "
                             f"{want}{_shape_str(t.shape) if t.shape is not None else '[?]'}")
        return x
    if isinstance(x, np.generic):  # numpy scalar -> 0-d array
        x = np.asarray(x)
    if not isinstance(x, np.ndarray):
        if np.isscalar(x) or isinstance(x, (list, tuple)):
            raise InputError(f"input {name!r} expects a numpy array of {t}, got {type(x).__name__}")
        if hasattr(x, "__array__"):
            x = np.asarray(x)
        else:
            raise InputError(f"input {name!r} expects a numpy array of {t}, got {type(x).__name__}")
    try:
        want = t.dtype.numpy
    except TypeError:
        want = None
    if want is not None:
        ok = x.dtype == want or (want == np.dtype(object) and x.dtype.kind in "OU")
        if not ok:
            raise InputError(f"input {name!r} expects dtype {want}, got {x.dtype}")
        if want == np.dtype(object) and x.dtype.kind == "U":
            x = x.astype(object)
    if t.shape is not None:
        if x.ndim != len(t.shape):
            raise InputError(f"input {name!r} expects rank {len(t.shape)} (shape {_shape_str(t.shape)}), "
                             f"got shape {tuple(x.shape)}")
        for i, (d, got) in enumerate(zip(t.shape, x.shape)):
            if isinstance(d, int) and d != got:
                raise InputError(f"input {name!r} expects dimension {i} to be {d} "
                                 f"(shape {_shape_str(t.shape)}), got shape {tuple(x.shape)}")
    return x


def _shape_str(shape: tuple) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"

