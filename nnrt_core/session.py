"""``Session``: load -> select backends -> place -> partition -> compile -> run."""
from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from nnrt_core.backend.base import Backend, Capability, CompiledPartition
from nnrt_core.config import ScheduleConfig
from nnrt_core.errors import CompileError, ConfigError, InputError
from nnrt_core.executor import ExecutionStep, Executor
from nnrt_core.frontends import load_onnx
from nnrt_core.ir.clone import clone_graph
from nnrt_core.ir import Dim, Graph, Model, SequenceType, OptionalType, TensorType, Value
from nnrt_core.partitioning import PartitionPlan
from nnrt_core.passes import fold_constants
from nnrt_core.registry import Registry, default_registry
from nnrt_core.scheduling import NodePlacement, PlacementContext, PlacementEvent, with_backup

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


def load_model(model: Any) -> Model:
    """A path, bytes, ``onnx.ModelProto``, IR ``Model`` or IR ``Graph`` as a
    Model the caller may transform (IR inputs are copied, weights shared)."""
    if isinstance(model, Model):
        return dataclasses.replace(model, graph=clone_graph(model.graph), metadata=dict(model.metadata))
    if isinstance(model, Graph):
        return Model(graph=clone_graph(model))
    return load_onnx(model)


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
        self.model = load_model(model)
        self.graph = self.model.graph
        self.graph.topological_sort()
        self.events: list[PlacementEvent] = []
        self._backends, self._backup = self._select_backends()
        self._scheduler = self._make_scheduler()
        self.folded_nodes = self._optimize()
        self._build()
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
        """Graph passes before placement (``optimization_level`` >= basic)."""
        if self.config.optimization_level == "none":
            return 0
        rec = self.registry.backends.get("numpy")
        if rec is None or not rec.available:
            return 0
        folded = fold_constants(self.graph, rec.backend)
        if folded:
            log.info("constant folding removed %d node(s)", folded)
        return folded

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
            ctx = PlacementContext(self.graph, self._backends, self._backup, caps, cfg, cfg.pins)
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
        part_of = {n.name: p.index for p in plans for n in p.nodes}
        first = ctx.backends[0].name if ctx.backends else None
        self.placement_report: list[NodePlacement] = []
        fallback_nodes: dict[str, list[str]] = {}
        for n in self.graph.nodes:
            b = assignment[n.name]
            rejected = ctx.rejections(n)
            if n.name in ctx.pins:
                reason = "pinned by config"
            elif self._backup is not None and b == self._backup.name and b not in {x.name for x in ctx.backends}:
                reason = "backup: no selected backend supports it"
                fallback_nodes.setdefault(b, []).append(n.name)
            elif b != first and first is not None:
                reason = f"{first} rejected it" if first in rejected else f"chosen by {self._scheduler.name}"
            else:
                reason = f"chosen by {self._scheduler.name}"
            self.placement_report.append(NodePlacement(n.name, n.qualified_op, b, part_of[n.name], reason, rejected))
        for b, nodes in fallback_nodes.items():
            if ctx.backends:
                self._event("node_fallback", b, f"{len(nodes)} node(s) fall back to backup {b!r}", nodes)
        steps = []
        for plan, compiled in zip(plans, self._compiled):
            steps.append(ExecutionStep(compiled, self._backend_named(plan.backend),
                                       [v.name for v in plan.inputs], [v.name for v in plan.outputs]))
        consts = {v.name: v.const for v in self.graph.outputs if v.const is not None and v.producer is None}
        self._executor = Executor(steps, [v.name for v in self.graph.outputs], consts,
                                  [v.name for v in self.graph.inputs])
        self._fast_feed_specs = _fast_feed_specs(self.graph.inputs)

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
        for plan, compiled in zip(self.plans, self._compiled):
            out.append(PartitionInfo(
                plan.index, plan.backend, tuple(plan.node_names()),
                tuple(sorted({n.qualified_op for n in plan.nodes})),
                tuple(v.name for v in plan.inputs), tuple(v.name for v in plan.outputs),
                compiled.describe(),
            ))
        return out

    @property
    def fallbacks(self) -> list[PlacementEvent]:
        return list(self.events)

    def stats(self) -> dict[str, Any]:
        return {
            "host_device_copies": self._executor.host_device_copies,
            "partitions": len(self.plans),
            "build_seconds": self.build_seconds,
        }

    # ------------------------------------------------------------------ run
    def run(self, feeds: Mapping[str, Any], output_names: Sequence[str] | None = None) -> dict[str, np.ndarray]:
        """Run the model.  Returns outputs in graph-output order (or in the
        order of ``output_names``)."""
        checked = self._check_feeds(feeds)
        results = self._executor.run(checked)
        out = dict(zip(self._executor.graph_outputs, results))
        if output_names is None:
            return out
        unknown = [n for n in output_names if n not in out]
        if unknown:
            raise InputError(f"unknown output(s) {unknown}; outputs: {list(out)}")
        return {n: out[n] for n in output_names}

    def _check_feeds(self, feeds: Mapping[str, Any]) -> Mapping[str, Any]:
        fast = self._fast_feed_specs
        if fast is not None and type(feeds) is dict and len(feeds) == len(fast):
            for name, dtype, ndim, fixed in fast:  # the common case, checked cheaply
                x = feeds.get(name)
                if type(x) is not np.ndarray or x.dtype != dtype or x.ndim != ndim:
                    break
                shape = x.shape
                if any(shape[i] != d for i, d in fixed):
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


def _fast_feed_specs(inputs: list[Value]) -> list[tuple[str, np.dtype, int, tuple]] | None:
    """(name, dtype, rank, fixed dims) per input when every input is a tensor
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
        specs.append((v.name, dtype, len(t.shape), fixed))
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

