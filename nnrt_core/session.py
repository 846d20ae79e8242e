"""``Session``: a facade over a compiled model — run, run_async, stream,
profile, stats, save.  The build itself is :func:`nnrt_core.compiler.compile_model`."""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import numpy as np

from nnrt_core.compiler import CompiledModel, PartitionInfo, compile_model, load_model
from nnrt_core.compiler.image import to_image
from nnrt_core.config import ScheduleConfig
from nnrt_core.errors import InputError, SessionFileError
from nnrt_core.ir import Graph, TensorType
from nnrt_core.passes import PassReport
from nnrt_core.placement import NodePlacement, PlacementEvent
from nnrt_core.registry import Registry, default_registry
from nnrt_core.runtime.executor import Executor, StepObserver
from nnrt_core.runtime.feeds import FeedValidator, TensorInfo, shape_text, tensor_info
from nnrt_core.runtime.memory_plan import MemoryPlan
from nnrt_core.runtime.streams import RunFuture, RunPool, Stream, default_workers
from nnrt_core.runtime.tensor import Tensor
from nnrt_core.storage.files import write_atomic
from nnrt_core.storage.session_file import SessionImage, encode
from nnrt_core.storage.weights import SharingReport

if TYPE_CHECKING:
    from nnrt_core.tools.profiler import Trace

__all__ = ["Session", "TensorInfo", "PartitionInfo", "load_model"]


class Session:
    """A model compiled across backends, ready to run.

    >>> sess = Session("model.onnx", ScheduleConfig(backends=["onnxruntime"], backup="numpy"))
    >>> outputs = sess.run({"x": x})
    """

    _async_pool_lock = threading.Lock()

    def __init__(self, model: Any, config: ScheduleConfig | None = None, *,
                 registry: Registry | None = None) -> None:
        t0 = time.perf_counter()
        self.registry = registry if registry is not None else default_registry()
        #: the build: steps, partitions, placement report, events (see nnrt_core.compiler)
        self.compiled_model: CompiledModel = compile_model(model, config, self.registry)
        self.config: ScheduleConfig = self.compiled_model.config
        cm = self.compiled_model
        #: runs the compiled steps (advanced use: tests and tools observe or wrap it)
        self.executor = Executor(cm.steps, [v.name for v in cm.graph.outputs], cm.constants,
                                 [v.name for v in cm.graph.inputs])
        #: ``validate_feeds(feeds)``: the checked feeds (``feeds`` itself when already right) or InputError
        self.validate_feeds = FeedValidator(cm.graph.inputs).validate
        #: streams' measured concurrency, per ``max_in_flight``, remembered for the next stream
        self.concurrency_choices: dict[int, int] = {}
        self._async_pool: RunPool | None = None
        self.build_seconds = time.perf_counter() - t0

    # ---------------------------------------------------------------- views
    @property
    def graph(self) -> Graph:
        """The optimized graph (inputs and outputs only for a loaded compiled model)."""
        return self.compiled_model.graph

    @property
    def events(self) -> list[PlacementEvent]:
        return self.compiled_model.events

    @property
    def fallbacks(self) -> list[PlacementEvent]:
        return list(self.compiled_model.events)

    @property
    def placement_report(self) -> list[NodePlacement]:
        return self.compiled_model.placement

    @property
    def considered_plans(self) -> list[dict[str, Any]]:
        """The candidate placements a cost-based scheduler weighed, chosen first."""
        return self.compiled_model.considered_plans

    @property
    def pass_report(self) -> PassReport:
        return self.compiled_model.pass_report

    @property
    def folded_nodes(self) -> int:
        return self.compiled_model.folded_nodes

    @property
    def weight_sharing(self) -> SharingReport:
        """Constants this session shares with other sessions."""
        return self.compiled_model.weight_sharing

    @property
    def cache_hit(self) -> bool:
        return self.compiled_model.cache_hit

    @property
    def cache_path(self) -> str | None:
        """The cache entry used or written."""
        return self.compiled_model.cache_path

    @property
    def inputs(self) -> list[TensorInfo]:
        return [tensor_info(v) for v in self.graph.inputs]

    @property
    def outputs(self) -> list[TensorInfo]:
        return [tensor_info(v) for v in self.graph.outputs]

    @property
    def placement(self) -> dict[str, str]:
        """node name -> backend name."""
        return {p.node: p.backend for p in self.compiled_model.placement}

    @property
    def partitions(self) -> list[PartitionInfo]:
        return self.compiled_model.partition_infos()

    def stats(self) -> dict[str, Any]:
        """Counters and figures of this session: host<->device copies, cache
        hit, build time and the static memory plan of its intermediates
        (``planned_peak_bytes``, ``naive_bytes``, ``lower_bound_bytes``;
        ``None`` while shapes are dynamic and no run has fixed them), and the
        constants' ``weight_bytes``, of which ``shared_weight_bytes`` were
        identical arrays already held (by another session of the process, or
        elsewhere in this model) and are not held twice."""
        cm, report = self.compiled_model, self.compiled_model.pass_report
        return {
            "host_device_copies": self.executor.host_device_copies,
            "partitions": len(cm.steps),
            "cache_hit": cm.cache_hit,
            "build_seconds": self.build_seconds,
            "passes": {"level": report.level, "nodes_before": report.nodes_before, "nodes_after": report.nodes_after,
                       "rewrites": {k: v.rewrites for k, v in report.passes.items() if v.rewrites}},
            **cm.memory_plans.stats(),
            # the NumPy backend's kernels write Conv/fused-chain outputs into planned arenas
            "host_arena_bytes": sum(int(c.describe().get("arena_bytes", 0) or 0) for c in cm.compiled),
            "weight_bytes": cm.weight_sharing.bytes,
            "shared_weight_bytes": cm.weight_sharing.shared_bytes,
        }

    def memory_plan(self, input_shapes: Mapping[str, Sequence[int]] | None = None) -> MemoryPlan:
        """The lifetime-based arena plan of every intermediate tensor in
        execution order.  Graphs with dynamic shapes need ``input_shapes``;
        plans are cached per shape."""
        if not self.graph.nodes:
            raise SessionFileError("a session loaded from a compiled file has no graph to plan; "
                                   "see stats() for the plan stored with it")
        return self.compiled_model.memory_plans.plan(input_shapes)

    # ------------------------------------------- offline models and the cache
    def save(self, path: str | os.PathLike) -> Path:
        """Write this compiled session as one file that ``Session(path)``
        loads and runs without the source model (an offline model)."""
        return write_atomic(path, encode(self.to_image()))

    def to_image(self) -> SessionImage:
        """The session's compiled form; :class:`SessionFileError` when a
        backend cannot serialize its partitions."""
        return to_image(self.compiled_model)

    # ------------------------------------------------------------------ run
    def run(self, feeds: Mapping[str, Any], output_names: Sequence[str] | None = None, *,
            keep_on_device: bool = False) -> dict[str, Any]:
        """Run the model.  Returns outputs in graph-output order (or in the
        order of ``output_names``).

        Feeds are numpy arrays or :class:`Tensor` s (e.g. from
        :meth:`allocate_input`: a tensor already in the reading backend's
        memory is used without a copy).  With ``keep_on_device`` outputs a
        device backend produced stay there, returned as ``Tensor`` s."""
        checked = self.validate_feeds(feeds)
        if checked is feeds and not keep_on_device:  # plain host arrays: the fast path
            results = self.executor.run(checked)
        else:
            raw, owners = {}, {}
            for name, x in checked.items():
                if type(x) is Tensor:
                    raw[name] = x.data
                    if x.on_device:
                        owners[name] = x.backend
                else:
                    raw[name] = x
            results = self.executor.run(raw, owners, keep_on_device)
        if output_names is None:
            return dict(zip(self.executor.graph_outputs, results))
        return self._named(results, output_names)

    def run_observed(self, feeds: Mapping[str, Any], observer: StepObserver) -> dict[str, Any]:
        """Run once with ``observer`` seeing every step and transfer (the
        profiler and the accuracy check use it); outputs as :meth:`run`."""
        return self._named(self.executor.run_observed(self.validate_feeds(feeds), observer), None)

    def _named(self, results: list[Any], output_names: Sequence[str] | None) -> dict[str, Any]:
        out = dict(zip(self.executor.graph_outputs, results))
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
                raise InputError(f"input {name!r} has shape {shape_text(t.shape)}; cannot allocate {list(shape)}")
        elif all(isinstance(d, int) for d in dims):
            shape = tuple(dims)
        else:
            raise InputError(f"input {name!r} has dynamic shape {shape_text(t.shape)}; pass shape=")
        dtype = t.dtype.numpy
        readers = {id(st.backend): st.backend for st in self.executor.steps if name in st.inputs}
        backend = next(iter(readers.values())) if len(readers) == 1 else None
        if backend is None or backend.host_memory:
            return Tensor(np.empty(shape, dtype), None, shape, dtype)
        return Tensor(backend.allocate(shape, dtype), backend, shape, dtype)

    # ------------------------------------------------- async, streams, profiling
    def run_async(self, feeds: Mapping[str, Any], output_names: Sequence[str] | None = None) -> RunFuture:
        """Start a run on the session's worker threads (one per core).  The
        outputs, or the error (bad feeds included), arrive through the future.
        The feed arrays must stay unchanged until the future is done."""
        try:
            checked = dict(self.validate_feeds(feeds))
        except Exception as e:
            fut = RunFuture()
            fut.set_exception(e)
            return fut
        return self.run_pool().submit(checked, output_names)

    def run_pool(self) -> RunPool:
        """The worker pool of :meth:`run_async`, started on first use."""
        pool = self._async_pool
        if pool is None:
            with Session._async_pool_lock:
                pool = self._async_pool
                if pool is None:
                    pool = self._async_pool = RunPool(self.run, default_workers())
        return pool

    def prepare_thread_budgets(self, budgets: Iterable[int]) -> None:
        """Let every partition prepare for runs with these thread budgets."""
        budgets = sorted(set(budgets))
        for st in self.executor.steps:
            for threads in budgets:
                st.compiled.prepare_thread_budget(threads)

    def stream(self, max_in_flight: int = 2, callback: Any = None,
               output_names: Sequence[str] | None = None, concurrency: int | str = "auto") -> Stream:
        """A :class:`~nnrt_core.runtime.streams.Stream` keeping up to ``max_in_flight``
        runs of this session going, reporting each to ``callback(completion)``;
        ``concurrency`` ("auto" or a number) is how many execute at once."""
        return Stream(self, max_in_flight, callback, output_names, concurrency)

    def profile(self, feeds: Mapping[str, Any]) -> "Trace":
        """Run once with timing of every partition, node and transfer; returns
        a :class:`~nnrt_core.tools.profiler.Trace` (``.save(path)`` writes Chrome /
        Perfetto trace JSON, ``.outputs`` holds the run's outputs)."""
        from nnrt_core.tools.profiler import profile_run

        return profile_run(self.compiled_model, self.run_observed, feeds)
