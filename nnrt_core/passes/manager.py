"""The pass manager: runs the passes of an optimization level to a fixed
point and reports what each changed."""
from __future__ import annotations

import time
from collections import Counter
from typing import Sequence

from nnrt_core.errors import GraphError
from nnrt_core.ir import Graph
from nnrt_core.passes.affine_folding import AffineFolding
from nnrt_core.passes.base import Pass, PassContext, level_rank
from nnrt_core.passes.cleanup import DeadNodeElimination, IdentityElimination
from nnrt_core.passes.constant_folding import ConstantFolding, ShapeFolding
from nnrt_core.passes.cse import CommonSubexpressionElimination
from nnrt_core.passes.fusion import ActivationFusion
from nnrt_core.passes.layout import TransposeReshapeCancellation
from nnrt_core.passes.layernorm import LayerNormFusion
from nnrt_core.passes.qdq import QdqCleanup
from nnrt_core.passes.report import PassReport, PassSummary

__all__ = ["PassManager", "PassReport", "PassSummary", "default_passes", "ALL_PASSES"]

#: every built-in pass, in the order the manager runs them
ALL_PASSES: tuple[type[Pass], ...] = (
    IdentityElimination,
    ShapeFolding,
    ConstantFolding,
    AffineFolding,
    QdqCleanup,
    LayerNormFusion,
    TransposeReshapeCancellation,
    CommonSubexpressionElimination,
    DeadNodeElimination,
    ActivationFusion,
)


def default_passes(level: str) -> list[Pass]:
    """The built-in passes that run at ``level``."""
    rank = level_rank(level)
    return [cls() for cls in ALL_PASSES if rank > 0 and level_rank(cls.level) <= rank]


class PassManager:
    """Runs the passes of ``level`` (or the given ``passes``) over a graph
    until none changes anything, at most ``max_iterations`` sweeps; a sweep
    runs only the passes the graph changed under since they last found
    nothing (see docs/passes.md, the ``Pass`` flags).  Passes
    marked ``after_fixed_point`` run then; when they change the graph, the
    others run to a fixed point again (at most ``max_rounds`` more times).

    With ``validate=True`` the graph is checked after every pass and a broken
    invariant raises :class:`GraphError` naming the pass.
    """

    def __init__(self, level: str = "basic", passes: Sequence[Pass] | None = None, *,
                 max_iterations: int = 4, max_rounds: int = 4, validate: bool = False) -> None:
        level_rank(level)  # ConfigError on an unknown level
        self.level = level
        self.passes = list(passes) if passes is not None else default_passes(level)
        self.max_iterations = max(1, max_iterations)
        self.max_rounds = max(0, max_rounds)  #: re-runs after an ``after_fixed_point`` pass changed the graph
        self.validate = validate

    def run(self, graph: Graph, ctx: PassContext | None = None) -> PassReport:
        ctx = ctx or PassContext()
        t0 = time.perf_counter()
        ops_before, op_types = _ops(graph)  # one walk for the report and the first sweep's requires_ops
        report = PassReport(self.level, nodes_before=len(graph.nodes), ops_before=ops_before)
        for p in self.passes:
            report.passes[p.name] = PassSummary(p.name, p.level)
        regular = [p for p in self.passes if not p.after_fixed_point]
        final = [p for p in self.passes if p.after_fixed_point]
        touched = False  # whether any pass changed the graph
        for round_ in range(1 + (self.max_rounds if final else 0)):
            changed = self._to_fixed_point(graph, ctx, regular, report, None if touched else op_types)
            touched |= changed
            if round_ > 0 and not changed:
                break
            if round_ == self.max_rounds or not final:
                break
            if not self._run_each(graph, ctx, final, report, ops=None if touched else op_types):
                break
            touched = True
        report.nodes_after = len(graph.nodes)
        # a graph no pass changed has the ops it had (most imported TFLite graphs): no second walk
        report.ops_after = _ops(graph)[0] if touched else dict(ops_before)
        report.seconds = time.perf_counter() - t0
        return report

    def _to_fixed_point(self, graph: Graph, ctx: PassContext, passes: list[Pass], report: PassReport,
                        ops: set[str] | None = None) -> bool:
        """Run ``passes`` until none changes anything; True when any did.  A
        pass runs again only when the graph changed since it last found
        nothing (:func:`_stale_after`), so a sweep skips the passes that
        already looked at the graph as it is.  ``ops``: the graph's op types
        when the caller has them (the first sweep then takes no walk for them)."""
        any_change = False
        stale = set(range(len(passes)))  # passes that have not seen the graph as it is now
        for _ in range(self.max_iterations if passes else 0):
            if not stale:
                break
            report.iterations += 1
            changed = self._run_each(graph, ctx, passes, report, stale, ops)
            ops = None  # later sweeps take them again (only after a change: a sweep with none ends the loop)
            any_change |= changed
            if not changed:
                break
        return any_change

    def _run_each(self, graph: Graph, ctx: PassContext, passes: list[Pass], report: PassReport,
                  stale: set[int] | None = None, ops: set[str] | None = None) -> bool:
        """One sweep over ``passes`` (those in ``stale`` only, when given; it is updated).
        ``ops``: the graph's op types when known (taken here otherwise, and again after a change)."""
        changed = False
        for i, p in enumerate(passes):
            if stale is not None and i not in stale:
                continue
            if p.requires_ops:
                ops = ops if ops is not None else {n.op_type for n in graph.nodes}
                if not all(ops & s for s in p.requires_ops):
                    if stale is not None:
                        stale.discard(i)
                    continue  # nothing it could match (Pass.requires_ops)
            t = time.perf_counter()
            result = p.run(graph, ctx)
            report.passes[p.name].add(result, time.perf_counter() - t)
            if stale is not None:
                stale.discard(i)
                if result.changed:
                    stale.update(_stale_after(p, passes))
            if result.changed:
                ops = None
            changed |= result.changed
            if self.validate and result.changed:
                try:
                    graph.validate()
                except GraphError as e:
                    raise GraphError(f"pass {p.name!r} broke the graph: {e}") from e
        return changed


def _ops(graph: Graph) -> tuple[dict[str, int], set[str]]:
    """How many nodes of each qualified op (first-seen order), and the op types, in one walk."""
    counts: Counter[str] = Counter(n.qualified_op for n in graph.nodes)
    return dict(counts), {n.op_type for n in graph.nodes} if any("::" in k for k in counts) else set(counts)


def _stale_after(changer: Pass, passes: list[Pass]) -> list[int]:
    """Indices of the ``passes`` that may find something new once ``changer``
    changed the graph: all, but ``changer`` itself when it is ``idempotent``
    and, after a pass that only removes unread nodes, those that do not
    count readers (``Pass.counts_readers``)."""
    out = []
    for i, q in enumerate(passes):
        if q is changer:
            if not q.idempotent:
                out.append(i)
        elif not (changer.removes_only_unread and not q.counts_readers):
            out.append(i)
    return out
