"""``Session``: a facade over a compiled model — run, run_async, stream,
profile, stats, save.  The build itself is :func:`nnrt_core.compiler.compile_model`."""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from nnrt_core.backend.warming import prepare_thread_budget
from nnrt_core.compiler import CompiledModel, EventLog, PartitionInfo, compile_model
from nnrt_core.compiler.image import to_image
from nnrt_core.compiler.specialize import Specializations, check_shapes, free_inputs, wants_specialization
from nnrt_core.config import ScheduleConfig
from nnrt_core.errors import ConfigError, InputError, SessionFileError
from nnrt_core.ir import Graph
from nnrt_core.placement.context import PlacementEvent
from nnrt_core.registry import Registry, default_registry
from nnrt_core.control import RunControl, for_run
from nnrt_core.runtime import activity
from nnrt_core.runtime.executor import Executor, StepObserver
from nnrt_core.runtime.feeds import FeedValidator, TensorInfo, allocate_input, split_tensors, tensor_info
from nnrt_core.runtime.memory_plan import MemoryPlan
from nnrt_core.compiler.plan import RunPlan
from nnrt_core.runtime.tensor import Tensor
from nnrt_core.storage.files import write_atomic
from nnrt_core.storage.session_file import SessionImage, encode, looks_like_session_file

if TYPE_CHECKING:  # streams (concurrent.futures, logging): imported by the async methods that use them
    from nnrt_core.runtime.streams import RunFuture, RunPool, Stream
    from nnrt_core.profiling.profiler import Trace

__all__ = ["Session", "TensorInfo", "PartitionInfo"]


def _from_plan(name: str, doc: str) -> property:
    """A read-only view of the current plan's ``CompiledModel.<name>``."""
    return property(lambda self: getattr(self.compiled_model, name), doc=doc)


class Session:
    """A model compiled across backends, ready to run.

    >>> sess = Session("model.onnx", ScheduleConfig(backends=["onnxruntime"], backup="numpy"))
    >>> outputs = sess.run({"x": x})
    """

    _async_pool_lock = threading.Lock()

    def __init__(self, model: Any, config: ScheduleConfig | None = None, *,
                 registry: Registry | None = None, isolate: bool = False) -> None:
        t0 = time.perf_counter()
        self.registry = registry if registry is not None else default_registry()
        generic = compile_model(model, config, self.registry, isolate=isolate)  # isolate: see compile_model
        self.config: ScheduleConfig = generic.config
        #: the plan every run starts from (the dynamic one when inputs have free dimensions)
        self.generic_plan = self._plan = RunPlan.of(generic)
        self._validator = FeedValidator(generic.graph.inputs)
        #: ``validate_feeds(feeds)``: the checked feeds (``feeds`` itself when already right) or InputError
        self.validate_feeds = self._validator.validate
        #: shape specialization: visible events of this session (specialized, evicted, failed)
        self.session_events = EventLog()
        self.specializations = self._specializations(model, generic)
        #: streams' measured concurrency, per ``max_in_flight``, remembered for the next stream
        self.concurrency_choices: dict[int, int] = {}
        self._thread_budgets: set[int] = set()
        self._async_pool: RunPool | None = None
        #: the control of runs given no timeout: the memory budget (None: NNRT_MAX_TENSOR_BYTES)
        self.default_control = RunControl.budget_only(self.config.max_tensor_bytes)
        self.build_seconds = time.perf_counter() - t0

    def _specializations(self, source: Any, generic: CompiledModel) -> Specializations[RunPlan] | None:
        names = free_inputs(generic.graph.inputs)
        if not names or not wants_specialization(self.config, self.registry):
            return None
        if looks_like_session_file(source):  # a compiled file: no source model to plan again
            self.session_events.add("specialization_unavailable", "-", "inputs have free dimensions but this "
                                    "session was loaded from a compiled file; it runs its stored plan")
            return None
        return Specializations(source, self.config, self.registry, names, self._new_plan, self.session_events)

    def _new_plan(self, model: CompiledModel) -> RunPlan:
        plan = RunPlan.of(model)
        for threads in sorted(self._thread_budgets):
            for st in plan.executor.steps:
                prepare_thread_budget(st.compiled, threads)
        return plan

    def _plan_for(self, feeds: Mapping[str, Any]) -> RunPlan:
        """The plan for validated ``feeds``: their signature's specialization (built on first sight)."""
        self._plan = plan = self.specializations.plan_for(feeds) or self.generic_plan
        return plan

    def reshape(self, shapes: Mapping[str, Sequence[int]]) -> None:
        """Plan for these input shapes now (MNN's resize): the plan becomes the
        one :attr:`placement` / :attr:`partitions` describe and runs with these
        shapes use it.  Needs free input dimensions and specialization on."""
        if self.specializations is None:
            raise ConfigError("reshape needs a model with free input dimensions and specialize_shapes not "
                              "'never' (or 'always' when no selected backend needs static shapes)")
        sig = check_shapes(self.specializations.names, shapes)
        self._validator.check_shapes(dict(zip(self.specializations.names, sig)))
        self._plan = self.specializations.specialize(sig) or self.generic_plan

    def wait_for_specializations(self, timeout: float | None = None) -> bool:
        """Block until the plans built in the background are swapped in (``True``) or ``timeout`` passed."""
        return True if self.specializations is None else self.specializations.wait(timeout)

    # ---------------------------------------------------------------- views
    @property
    def compiled_model(self) -> CompiledModel:
        """The plan of the latest run's input signature (see nnrt_core.compiler)."""
        return self._plan.model

    @property
    def executor(self) -> Executor:
        """Runs the current plan's steps (advanced use: tests and tools observe or wrap it)."""
        return self._plan.executor

    @property
    def graph(self) -> Graph:
        """The optimized graph (inputs and outputs only for a loaded compiled model)."""
        return self._plan.model.graph

    @property
    def events(self) -> list[PlacementEvent]:
        """Fallbacks and decisions of the current plan, then this session's specialization events."""
        return [*self._plan.model.events, *self.session_events]

    @property
    def fallbacks(self) -> list[PlacementEvent]:
        return self.events

    placement_report = _from_plan("placement", "Where every node of the current plan runs and why.")
    considered_plans = _from_plan("considered_plans", "Candidate placements a cost scheduler weighed, chosen first.")
    pass_report = _from_plan("pass_report", "What the graph passes changed.")
    folded_nodes = _from_plan("folded_nodes", "Nodes constant-folded at build.")
    weight_sharing = _from_plan("weight_sharing", "Constants this session shares with other sessions.")
    cache_hit = _from_plan("cache_hit", "Whether the plan came from the model cache.")
    cache_path = _from_plan("cache_path", "The cache entry used or written.")

    @property
    def inputs(self) -> list[TensorInfo]:
        return [tensor_info(v) for v in self.generic_plan.model.graph.inputs]

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
            "build_seconds": self.build_seconds, "build": dict(cm.build_times),  # stage -> s (compiler.timing)
            "passes": {"level": report.level, "nodes_before": report.nodes_before, "nodes_after": report.nodes_after,
                       "rewrites": {k: v.rewrites for k, v in report.passes.items() if v.rewrites}},
            **cm.memory_plans.stats(),
            # the NumPy backend's kernels write Conv/fused-chain outputs into planned arenas
            "host_arena_bytes": sum(int(p.details.get("arena_bytes", 0) or 0) for p in cm.partition_infos()),
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
            keep_on_device: bool = False, timeout: float | None = None,
            control: RunControl | None = None) -> dict[str, Any]:
        """Run the model.  Returns outputs in graph-output order (or in the
        order of ``output_names``).  Feeds are numpy arrays or :class:`Tensor` s (e.g. from
        :meth:`allocate_input`: a tensor already in the reading backend's
        memory is used without a copy).  With ``keep_on_device`` outputs a
        device backend produced stay there, returned as ``Tensor`` s.  ``timeout`` (seconds) or ``control``
        (a :class:`RunControl` another thread may cancel) stop the run: ``RunTimeoutError`` / ``RunCancelledError``."""
        plain = timeout is None and control is None and output_names is None and not keep_on_device
        direct = self._plan.executor.direct if plain and self.specializations is None else None
        out = direct(feeds) if direct is not None and self.default_control.max_tensor_bytes is None else None
        if out is not None:  # one partition with nothing to convert, plain feeds: see Executor.direct
            return out
        d = self.default_control  # for_run's common case inline: the session's budget, or no control at all
        ctl = (d if d.max_tensor_bytes is not None else None) if timeout is None and control is None \
            else for_run(d, timeout, control)
        checked = self.validate_feeds(feeds)
        with activity.RUNNING:  # a background build pauses meanwhile (nnrt_core.compiler.background)
            executor = (self._plan_for(checked) if self.specializations is not None else self._plan).executor
            if checked is feeds and not keep_on_device:  # plain host arrays: the fast path
                results = executor.run(checked) if ctl is None else executor.run(checked, None, False, ctl)
            else:
                raw, owners = split_tensors(checked)
                results = executor.run(raw, owners, keep_on_device, ctl)
        return dict(zip(executor.graph_outputs, results)) if output_names is None else self._named(results, output_names)

    def run_observed(self, feeds: Mapping[str, Any], observer: StepObserver) -> dict[str, Any]:
        """Run once with ``observer`` seeing every step and transfer (the
        profiler and the accuracy check use it); outputs as :meth:`run`."""
        checked = self.validate_feeds(feeds)
        with activity.RUNNING:
            if self.specializations is not None:
                self._plan_for(checked)
            return self._named(self.executor.run_observed(checked, observer), None)

    def _named(self, results: list[Any], output_names: Sequence[str] | None) -> dict[str, Any]:
        out = dict(zip(self.executor.graph_outputs, results))
        if output_names is None:
            return out
        if unknown := [n for n in output_names if n not in out]:
            raise InputError(f"unknown output(s) {unknown}; outputs: {list(out)}")
        return {n: out[n] for n in output_names}

    def allocate_input(self, name: str, shape: Sequence[int] | None = None) -> Tensor:
        """A tensor for input ``name`` in the memory of the backend that reads
        it (host memory when several backends or a host backend read it).
        Fill it through ``tensor.numpy()`` (a view where device memory is
        mapped) or ``tensor.copy_from(array)``; feeding it costs no copy."""
        return allocate_input(self.generic_plan.model.graph.inputs, self.executor.steps, name, shape)

    # ------------------------------------------------- async, streams, profiling
    def run_async(self, feeds: Mapping[str, Any], output_names: Sequence[str] | None = None, *,
                  timeout: float | None = None) -> RunFuture:
        """Start a run on the session's worker threads (one per core).  The outputs, or the error (bad
        feeds included), arrive through the future; ``future.cancel()`` stops a running run.  ``timeout``
        counts from this call.  The feed arrays must stay unchanged until the run ends."""
        try:
            checked = dict(self.validate_feeds(feeds))
        except Exception as e:
            from nnrt_core.runtime.streams import RunFuture
            fut = RunFuture()
            fut.set_exception(e)
            return fut
        return self.run_pool().submit(checked, output_names, timeout=timeout)

    def run_pool(self) -> RunPool:
        """The worker pool of :meth:`run_async`, started on first use."""
        pool = self._async_pool
        if pool is None:
            with Session._async_pool_lock:
                if (pool := self._async_pool) is None:
                    from nnrt_core.runtime.streams import RunPool, default_workers
                    pool = self._async_pool = RunPool(self.run, default_workers())
        return pool

    def prepare_thread_budgets(self, budgets: Iterable[int]) -> None:
        """Let every partition prepare for runs with these thread budgets."""
        self._thread_budgets |= set(budgets)
        for st in self.executor.steps:
            for threads in sorted(self._thread_budgets):
                prepare_thread_budget(st.compiled, threads)

    def stream(self, max_in_flight: int = 2, callback: Any = None,
               output_names: Sequence[str] | None = None, concurrency: int | str = "auto") -> Stream:
        """A :class:`~nnrt_core.runtime.streams.Stream` keeping up to ``max_in_flight`` runs of this session
        going, reporting each to ``callback(completion)``; ``concurrency`` ("auto" or a number): how many at once."""
        from nnrt_core.runtime.streams import Stream
        return Stream(self, max_in_flight, callback, output_names, concurrency)

    def profile(self, feeds: Mapping[str, Any]) -> "Trace":
        """Run once with timing of every partition, node and transfer; returns
        a :class:`~nnrt_core.profiling.profiler.Trace` (``.save(path)`` writes Chrome /
        Perfetto trace JSON, ``.outputs`` holds the run's outputs)."""
        from nnrt_core.profiling.profiler import profile_run

        return profile_run(self.compiled_model, self.run_observed, feeds)
