"""A :class:`CompiledModel` as a storable :class:`SessionImage` and back
(offline files and the model cache store this form)."""
from __future__ import annotations

from typing import Any

from nnrt_core.backend.base import Backend, CompiledPartition, CompileOptions
from nnrt_core.compiler.model import CompiledModel, EventLog, PartitionInfo
from nnrt_core.compiler.stored_fallback import backup_records
from nnrt_core.config import ScheduleConfig
from nnrt_core.errors import ConfigError, NnrtError, SessionFileError
from nnrt_core.ir import Graph, Value
from nnrt_core.passes.report import PassReport
from nnrt_core.placement.context import NodePlacement, PlacementEvent
from nnrt_core.registry import Registry
from nnrt_core.runtime.executor import ExecutionStep
from nnrt_core.storage.session_file import PartitionRecord, SessionImage
from nnrt_core.version import __version__

__all__ = ["to_image", "from_image", "stored_config", "load_partition"]

_MEMORY_STATS = ("planned_peak_bytes", "naive_bytes", "lower_bound_bytes")


def to_image(model: CompiledModel) -> SessionImage:
    """The storable form of ``model``; :class:`SessionFileError` when a
    backend cannot serialize its partitions."""
    op_of = {p.node: p.op_type for p in model.placement}
    parts = []
    for info, step in zip(model.partitions, model.steps):
        blob = _serialized(step, info.index)
        parts.append(PartitionRecord(info.index, info.backend, str(step.backend.version), step.compiled.name,
                                     [(n, op_of.get(n, "")) for n in info.nodes], list(info.inputs),
                                     list(info.outputs), blob))
    g = model.graph
    return SessionImage(
        config=model.config.to_dict(),
        inputs=[(v.name, v.type) for v in g.inputs], outputs=[(v.name, v.type) for v in g.outputs],
        partitions=parts, placement=[p.to_dict() for p in model.placement],
        events=[e.to_dict() for e in model.events], constants=dict(model.constants),
        meta={"nnrt_version": __version__, "graph_name": g.name, "folded_nodes": model.folded_nodes,
              "memory": model.memory_plans.stats(), "passes": model.pass_report.to_dict(),
              "considered_plans": model.considered_plans},
        fallbacks=backup_records(model))


def _serialized(step: ExecutionStep, index: int) -> bytes:
    """The partition's ``serialize()`` bytes; :class:`SessionFileError` when
    the backend cannot serialize, raises, or returns something else."""
    try:
        blob = step.compiled.serialize()
    except Exception as e:  # a buggy plugin: the session works, it is just not storable
        raise SessionFileError(f"backend {step.backend.name!r} failed to serialize partition {index}: "
                               f"{type(e).__name__}: {e}") from e
    if blob is None:
        raise SessionFileError(f"backend {step.backend.name!r} cannot serialize compiled partitions "
                               f"(partition {index}), so this session cannot be saved")
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise SessionFileError(f"backend {step.backend.name!r} serialized partition {index} as "
                               f"{type(blob).__name__}; expected bytes")
    return bytes(blob)


def _loaded(backend: Backend, blob: bytes, options: CompileOptions, index: int) -> CompiledPartition:
    """``backend.load_compiled``; :class:`SessionFileError` when it raises
    something other than an nnrt error or returns no partition."""
    try:
        part = backend.load_compiled(blob, options)
    except NnrtError:
        raise
    except Exception as e:
        raise SessionFileError(f"backend {backend.name!r} failed to load partition {index}: "
                               f"{type(e).__name__}: {e}") from e
    if not isinstance(part, CompiledPartition):
        raise SessionFileError(f"backend {backend.name!r} loaded partition {index} as {type(part).__name__}; "
                               f"expected a CompiledPartition")
    return part


def stored_config(image: SessionImage, what: str = "session file") -> ScheduleConfig:
    """The config ``image`` was built with (without a cache directory, and
    without the measurement feeds: only their digest is stored);
    :class:`SessionFileError` naming the field when it is not a valid one."""
    try:
        return ScheduleConfig.from_dict({**image.config, "cache_dir": None, "measure_feeds": None})
    except (ConfigError, TypeError, ValueError) as e:
        raise SessionFileError(f"{what}: field 'config' is not a valid config: {e}") from None


def load_partition(rec: PartitionRecord, output_types: dict[str, Any], options: CompileOptions,
                   registry: Registry) -> ExecutionStep:
    """``rec`` loaded by its backend, its boundary checked against the record
    (``output_types``: the graph outputs' stored types, by name)."""
    reg = registry.backend(rec.backend)  # ConfigError listing installed backends
    if not reg.available or reg.backend is None:
        raise SessionFileError(f"the compiled session needs backend {rec.backend!r}, which is unavailable "
                               f"here: {reg.reason}")
    backend = reg.backend
    part = _loaded(backend, rec.blob, options, rec.index)
    reads, writes = getattr(part, "input_names", None), getattr(part, "output_names", None)
    if reads is not None and set(reads) != set(rec.inputs):
        raise SessionFileError(f"partition {rec.index} ({rec.backend!r}): field 'inputs' names {rec.inputs}, "
                               f"but its compiled form reads {list(reads)}")
    if writes is not None and not set(rec.outputs) <= set(writes):
        raise SessionFileError(f"partition {rec.index} ({rec.backend!r}): field 'outputs' names {rec.outputs}, "
                               f"but its compiled form writes {list(writes)}")
    return ExecutionStep(part, backend, list(rec.inputs), list(rec.outputs),
                         types={n: t for n, t in output_types.items() if n in rec.outputs})


def from_image(image: SessionImage, config: ScheduleConfig, registry: Registry) -> CompiledModel:
    """Load the compiled model ``image`` describes (no source model needed);
    its partitions are loaded by their backends.  ``image`` comes from
    :func:`~nnrt_core.storage.session_file.decode`, which checked its fields."""
    stored_config(image)  # valid even where ``config`` replaces it (a cache entry)
    graph = Graph(str(image.meta.get("graph_name", "offline")),
                  inputs=[Value(n, t) for n, t in image.inputs], outputs=[Value(n, t) for n, t in image.outputs])
    steps, used = [], []
    output_types = dict(image.outputs)
    options: dict[str, CompileOptions] = {}  # once per backend
    for rec in image.partitions:
        if rec.backend not in options:
            options[rec.backend] = config.compile_options(rec.backend)
        step = load_partition(rec, output_types, options[rec.backend], registry)
        if step.backend not in used:
            used.append(step.backend)
        steps.append(step)
    meta = image.meta
    memory = meta.get("memory")
    plans = meta.get("considered_plans")
    model = CompiledModel(
        config=config, graph=graph, steps=steps,
        partitions=[PartitionInfo(r.index, r.backend, tuple(n for n, _ in r.nodes),
                                  tuple(sorted({op for _, op in r.nodes})), tuple(r.inputs), tuple(r.outputs), {})
                    for r in image.partitions],
        placement=[NodePlacement(**p) for p in image.placement],
        events=EventLog(PlacementEvent(**e) for e in image.events), constants=dict(image.constants),
        backends=used, considered_plans=[dict(p) for p in plans if isinstance(p, dict)] if isinstance(plans, list)
        else [],
        pass_report=PassReport.from_dict(meta["passes"]) if isinstance(meta.get("passes"), dict)
        else PassReport(config.optimization_level),
        folded_nodes=int(meta.get("folded_nodes", 0) or 0),
        stored_memory_stats={k: memory.get(k) for k in _MEMORY_STATS} if isinstance(memory, dict) else None)
    # the records view the file's (read-only) bytes: loaded only if their partition overflows
    model.stored_fallbacks = {f.partition: f for f in image.fallbacks}
    model.registry = registry  # a fallback loads its partition through it
    return model
