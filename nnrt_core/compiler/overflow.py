"""``on_overflow="fallback"``: a plan rebuilt with the partitions that
overflowed their fp16 storage moved to the backup backend, by the existing
machinery: their nodes pinned to the backup (``ScheduleConfig.pins``) and the
model compiled again for the plan's config (a specialized plan's
``input_shapes`` included).  The placement report says why each moved node
runs there and an ``overflow_fallback`` event names the partition and node."""
from __future__ import annotations

from typing import Sequence

from nnrt_core.compiler.build import compile_model
from nnrt_core.compiler.model import CompiledModel
from nnrt_core.errors import ExecutionError, NnrtError, NumericOverflowError
from nnrt_core.runtime.executor import ExecutionStep
from nnrt_core.runtime.overflow import describe

__all__ = ["refit_model", "FALLBACK_KINDS"]

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
            p.reason = f"fp16 overflow on {st.backend.name} at run time ({describe(err, st.backend.name)}): " \
                       f"moved to backup"
            p.rejected[st.backend.name] = "fp16 overflow at run time"
    return new
