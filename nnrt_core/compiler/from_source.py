"""The build of a source model (ONNX, TFLite, IR): load -> scheduler ->
(measure) -> optimize -> place and compile -> explain.  Imported on the first
build from a source model only: loading a compiled session file
(:func:`nnrt_core.compiler.build.load_compiled`) needs none of these stages."""
from __future__ import annotations

from typing import Any

from nnrt_core.backend.base import describe_partition
from nnrt_core.compiler.backends import BackendSelection, host_evaluator
from nnrt_core.compiler.budget import build_budget, check_static_sizes
from nnrt_core.compiler.explain import explain
from nnrt_core.compiler.load import load_model
from nnrt_core.compiler.measure import AUTO, build_measured, engines_of, resolve_scheduler
from nnrt_core.compiler.model import CompiledModel, EventLog
from nnrt_core.compiler.optimize import optimize
from nnrt_core.compiler.place import place_and_compile
from nnrt_core.compiler.timing import stage
from nnrt_core.config import ScheduleConfig
from nnrt_core.errors import ConfigError, PluginError
from nnrt_core.ir import Graph
from nnrt_core.logs import INFO
from nnrt_core.placement import Scheduler
from nnrt_core.registry import Registry
from nnrt_core.storage.weights import share_graph_weights

__all__ = ["build_from_source", "report_declared_outputs"]


def build_from_source(model: Any, config: ScheduleConfig, registry: Registry, selection: BackendSelection,
                      events: EventLog) -> CompiledModel:
    """Stages 1-6 on a source model: load, choose the scheduler (measuring its
    candidate plans when it offers several), optimize, place and compile, explain."""
    with stage("load"):
        graph = load_model(model, config.input_shapes, registry.tflite_custom_ops).graph
        graph.topological_sort()
        report_declared_outputs(graph, events)
    with stage("select"):
        scheduler = _scheduler(registry, resolve_scheduler(config, selection))
        engines = [b.name for b in engines_of(selection)]
        candidates = scheduler.candidate_plans(engines)
        if config.precision == AUTO and not candidates:
            raise ConfigError(f"precision='auto' needs a scheduler that measures; {scheduler.name!r} offered no "
                              f"plan to measure for backends {engines}")
    measuring = len(candidates) > 1 or (candidates and config.precision == AUTO)
    if config.measure_feeds is not None and measuring:  # ConfigError naming a feed that does not fit the model
        config.measure_feeds.check(graph.inputs)
    elif config.measure_feeds is not None and (config.scheduler in (AUTO, "measured") or config.precision == AUTO):
        events.add("plan_measured", "measurement inputs", f"measure_feeds given, but scheduler {scheduler.name!r} "
                   f"has no plans to measure for backends {engines}: the feeds are not used", level=INFO)
    if measuring:  # time the plans, keep the fastest
        with stage("measure"):
            return build_measured(graph, config, selection, events, candidates,
                                  lambda name: _scheduler(registry, name),
                                  lambda g, c, s, e, sch: _build_graph(registry, g, c, s, e, sch))
    return _build_graph(registry, graph, config, selection, events, scheduler)


def _build_graph(registry: Registry, graph: Any, config: ScheduleConfig, selection: BackendSelection,
                 events: EventLog, scheduler: Scheduler) -> CompiledModel:
    """Stages 2-6 on a loaded graph: optimize, place and compile, explain."""
    with stage("optimize"), build_budget(config.max_tensor_bytes):  # folding allocates under the session's budget
        pass_report = optimize(graph, config, selection.candidates, host_evaluator(selection, registry),
                               selection.options)
        check_static_sizes(graph, config.max_tensor_bytes)
        sharing = share_graph_weights(graph)  # one copy of the (folded) weights per process
    with stage("place"):
        placement = place_and_compile(graph, config, selection, scheduler, events)
    with stage("explain"):
        built = explain(graph, config, selection, scheduler, placement, events, pass_report, sharing)
        if any(st.backend.emulated or "precision" in st.backend.supported_options for st in built.steps):
            _note_precision(built)
        return built


def _note_precision(built: CompiledModel) -> None:
    """A ``reduced_precision`` event per partition that computes floats in
    fp16/bf16 (its backend's ``describe()`` says so): the placement report
    tells where results are not fp32, and a device that computes in less than
    the config asked (an fp16-only chip given ``precision="fp32"``) is a warning."""
    asked = built.config.precision
    for info, step in zip(built.partitions, built.steps):  # describe() only: the estimates stay deferred
        got = describe_partition(step.compiled).get("precision")
        if got not in ("fp16", "bf16"):
            continue
        if got == asked:
            built.events.add("reduced_precision", info.backend,
                             f"partition {info.index} on {info.backend!r} computes in {got} (precision={asked!r} "
                             f"asked): its float results carry {got} rounding, not fp32's", info.nodes, level=INFO)
        elif asked in ("fp32", "auto"):
            built.events.add("reduced_precision", info.backend,
                             f"partition {info.index} on {info.backend!r} computes in {got} although "
                             f"precision={asked!r} was asked: its device has no fp32; its float results carry {got} "
                             "rounding (leave the backend out, or ask for it knowingly with precision='fp16')",
                             info.nodes)


def report_declared_outputs(graph: Graph, events: EventLog) -> None:
    """A ``declared_shape_corrected`` event per graph output whose declared
    shape the frontend corrected to the computed one (``Graph.declared_outputs``)."""
    for name, d in graph.declared_outputs.items():
        if d.corrected:
            producer = next((v.producer.name for v in graph.outputs if v.name == name and v.producer), None)
            events.add("declared_shape_corrected", "-",
                       f"graph output {name!r}: the model declares {d.declared} but its graph computes {d.computed}; "
                       "the computed shape is used (ONNX Runtime merges such declarations leniently too)",
                       [producer] if producer else [])


def _scheduler(registry: Registry, name: str) -> Scheduler:
    """An instance of scheduler ``name``; :class:`PluginError` when the plugin's class fails."""
    cls = registry.scheduler(name).cls
    try:
        scheduler = cls()
    except (Exception, SystemExit) as e:
        raise PluginError(f"scheduler {name!r} failed to initialize: {type(e).__name__}: {e}") from e
    if not isinstance(scheduler, Scheduler):
        raise PluginError(f"scheduler {name!r} is a {type(scheduler).__name__}, not a nnrt_core.placement.Scheduler")
    return scheduler
