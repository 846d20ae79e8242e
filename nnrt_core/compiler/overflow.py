"""``on_overflow="fallback"``: a plan rebuilt with the partitions that
overflowed their fp16 storage moved to the backup backend, by the existing
machinery: their nodes pinned to the backup (``ScheduleConfig.pins``) and the
model compiled again for the plan's config (a specialized plan's
``input_shapes`` included).  The placement report says why each moved node
runs there and an ``overflow_fallback`` event names the partition and node.

A model loaded from a session file has no source: :func:`refit_stored`
replaces each overflowing partition by its nodes compiled for the backup when
the file was written (:mod:`nnrt_core.compiler.stored_fallback`), with the
same event and placement reasons."""
from __future__ import annotations

import copy
from typing import Sequence

from nnrt_core.backend.warming import warm_up_partition
from nnrt_core.compiler.build import compile_model
from nnrt_core.compiler.load import load_model
from nnrt_core.compiler.model import CompiledModel, EventLog, PartitionInfo
from nnrt_core.backend.base import Backend, CompiledPartition
from nnrt_core.storage.session_file import FallbackRecord
from nnrt_core.errors import ExecutionError, NnrtError, NumericOverflowError
from nnrt_core.runtime.executor import ExecutionStep
from nnrt_core.runtime.overflow import describe

__all__ = ["refit_model", "refit_stored", "FALLBACK_KINDS"]

#: event kinds a refit plan carries over from the plan it replaces
FALLBACK_KINDS = ("overflow_fallback",)


def refit_model(model: CompiledModel, seen: Sequence[tuple[ExecutionStep, NumericOverflowError]]) -> CompiledModel:
    """``model`` built again with the nodes of every overflowing partition in
    ``seen`` pinned to ``model.config.backup``; :class:`ExecutionError` when
    that cannot be done (no source, no backup, the backup refuses a node)."""
    backup = model.config.backup
    pins, moved = dict(model.config.pins), {}
    for st, err in seen:
        index = next(i for i, s in enumerate(model.steps) if s is st)
        if backup is None or st.backend.name == backup or model.source is None:
            why = "no backup backend" if backup is None or st.backend.name == backup else "no source model"
            raise ExecutionError(f"{describe(err, st.backend.name)} overflowed fp16 and cannot fall back ({why}): "
                                 f"{err}") from err
        for n in model.partitions[index].nodes:
            pins[n] = backup
            moved[n] = (st, err)
    try:
        new = compile_model(model.source, model.config.replace(pins=pins), model.registry)
    except NnrtError as e:
        raise ExecutionError(f"fp16 overflow fallback to backup {backup!r} failed to build: "
                             f"{type(e).__name__}: {e}") from e
    new.events.extend(e for e in model.events if e.kind in FALLBACK_KINDS)
    _report(new, seen, moved, backup)
    return new


def _report(new: CompiledModel, seen: Sequence[tuple[ExecutionStep, NumericOverflowError]],
            moved: dict[str, tuple[ExecutionStep, NumericOverflowError]], backup: str) -> None:
    """The ``overflow_fallback`` events and placement reasons of the nodes ``moved`` to ``backup``."""
    for st, err in seen:
        nodes = [n for n, (s, _) in moved.items() if s is st]
        value = "NaN" if err.value is None or err.value != err.value else f"{err.value:.4g}"
        new.events.add("overflow_fallback", st.backend.name,
                       f"{describe(err, st.backend.name)}: fp16 overflow ({value} beyond +-65504); its "
                       f"{len(nodes)} node(s) moved to backup {backup!r}, the run repeated there "
                       "(on_overflow='fallback')", nodes)
    for p in new.placement:
        if p.node in moved:
            st, err = moved[p.node]
            p.backend = backup
            p.reason = f"fp16 overflow on {st.backend.name} at run time ({describe(err, st.backend.name)}): " \
                       f"moved to backup"
            p.rejected[st.backend.name] = "fp16 overflow at run time"


def refit_stored(model: CompiledModel, seen: Sequence[tuple[ExecutionStep, NumericOverflowError]]) -> CompiledModel:
    """A loaded ``model`` (no source) with every overflowing partition in
    ``seen`` replaced by its stored copy compiled for the backup (``model.stored_fallbacks``);
    :class:`ExecutionError` when one has none or it does not load."""
    backup = model.config.backup
    steps, infos, moved = list(model.steps), list(model.partitions), {}
    for st, err in seen:
        i = next(k for k, s in enumerate(model.steps) if s is st)
        info = model.partitions[i]
        rec = model.stored_fallbacks.get(info.index)
        if rec is None or backup is None:
            raise ExecutionError(f"{describe(err, st.backend.name)} overflowed fp16 and cannot fall back: the "
                                 f"session was loaded from a compiled file that stores no backup copy of partition "
                                 f"{info.index} (written by an older nnrt, without a backup, or with on_overflow "
                                 f"other than 'fallback'; recompile it): {err}") from err
        part, backend = _compiled_copy(model, info, st, rec)
        steps[i] = ExecutionStep(part, backend, list(st.inputs), list(st.outputs), list(st.release), st.types,
                                 st.declared)
        infos[i] = PartitionInfo(info.index, rec.backend, info.nodes, info.op_types, info.inputs, info.outputs, {})
        moved.update((n, (st, err)) for n in info.nodes)
    new = copy.copy(model)  # the same report, constants and stored figures; new steps, partitions, events
    new.steps, new.partitions, new.events = steps, infos, EventLog(model.events)
    new.placement = [copy.deepcopy(p) if p.node in moved else p for p in model.placement]
    new.backends = list(dict.fromkeys(s.backend for s in steps))
    replaced = {infos[k].index for k, s in enumerate(steps) if s is not model.steps[k]}
    new.stored_fallbacks = {k: r for k, r in model.stored_fallbacks.items() if k not in replaced}
    _report(new, seen, moved, rec.backend)
    return new


def _compiled_copy(model: CompiledModel, info: PartitionInfo, st: ExecutionStep,
                   rec: FallbackRecord) -> tuple[CompiledPartition, Backend]:
    """The stored ONNX copy of ``info``'s nodes loaded (the checks of any untrusted
    model), its boundary checked against the partition's, compiled for its backend."""
    what = f"the copy of partition {info.index} stored in the session file"
    try:
        reg = model.registry.backend(rec.backend)
        if not reg.available or reg.backend is None:
            raise ExecutionError(f"its backend {rec.backend!r} is unavailable here: {reg.reason}")
        graph = load_model(bytes(rec.blob)).graph
        reads, writes = [v.name for v in graph.inputs], [v.name for v in graph.outputs]
        if set(reads) != set(st.inputs) or not set(st.outputs) <= set(writes):
            raise ExecutionError(f"it reads {reads} and writes {writes}; the partition reads {list(st.inputs)} "
                                 f"and writes {list(st.outputs)}")
        part = reg.backend.compile(graph, model.config.compile_options(rec.backend))
        warm_up_partition(part)
    except NnrtError as e:
        raise ExecutionError(f"fp16 overflow fallback to backup {rec.backend!r} failed to load {what}: "
                             f"{type(e).__name__}: {e}") from e
    return part, reg.backend
