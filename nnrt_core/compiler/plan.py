"""A compiled model ready to run: the model and the executor over its steps,
with the model's ``on_overflow`` policy (:mod:`nnrt_core.runtime.overflow`)."""
from __future__ import annotations

import weakref
from typing import Callable, Sequence

from nnrt_core.compiler.model import CompiledModel
from nnrt_core.errors import ExecutionError, NumericOverflowError
from nnrt_core.record import FrozenRecord
from nnrt_core.runtime.executor import ExecutionStep, Executor
from nnrt_core.runtime.feeds import feed_specs
from nnrt_core.runtime.overflow import OverflowGuard

__all__ = ["RunPlan"]


class RunPlan(FrozenRecord):
    """A compiled model and the executor over its steps.  Under
    ``on_overflow="fallback"`` :meth:`replan` replaces both in place (the
    session and its specializations hold this object)."""

    __slots__ = ("model", "executor", "__weakref__")
    model: CompiledModel
    executor: Executor

    def __init__(self, model: CompiledModel, executor: Executor) -> None:
        object.__setattr__(self, "model", model)
        object.__setattr__(self, "executor", executor)

    @classmethod
    def of(cls, model: CompiledModel) -> "RunPlan":
        plan = cls(model, _executor(model))
        plan._guard()
        return plan

    def _guard(self) -> None:
        model = self.model
        why = ("the config has no backup backend" if model.config.backup is None
               else "the session was loaded from a compiled file that stores no backup copy of its partitions "
                    "(written by an older nnrt or with another on_overflow; recompile it)"
               if model.source is None and not model.stored_fallbacks else "")
        self.executor.overflow = OverflowGuard(model.config.on_overflow, model.events,
                                               None if why else _weak_replan(self), why)

    def replan(self, seen: Sequence[tuple[ExecutionStep, NumericOverflowError]]) -> Executor:
        """Rebuild without the partitions in ``seen`` (their nodes on the
        backup: :func:`~nnrt_core.compiler.overflow.refit_model`) and run that
        plan from now on; returns its executor.  Called under the old plan's lock."""
        from nnrt_core.compiler.overflow import refit_model, refit_stored  # only when a fallback happens

        if not any(st is seen[0][0] for st in self.executor.steps):  # another run replanned meanwhile
            return self.executor
        model = refit_model(self.model, seen) if self.model.source is not None else refit_stored(self.model, seen)
        object.__setattr__(self, "model", model)
        object.__setattr__(self, "executor", _executor(model))
        self._guard()
        return self.executor


def _weak_replan(plan: RunPlan) -> Callable[[Sequence[tuple[ExecutionStep, NumericOverflowError]]], Executor]:
    """``plan.replan`` without a strong reference to ``plan``: the guard sits
    on the plan's executor, and a bound method would make a cycle (plan ->
    executor -> guard -> plan) that keeps a dropped session's partitions, and
    the weights their kernels prepared, until a full collection."""
    ref = weakref.ref(plan)

    def replan(seen: Sequence[tuple[ExecutionStep, NumericOverflowError]]) -> Executor:
        alive = ref()
        if alive is None:
            raise ExecutionError("the session of this run is gone: it cannot fall back to its backup")
        return alive.replan(seen)
    return replan


def _executor(model: CompiledModel) -> Executor:
    g = model.graph
    return Executor(model.steps, [v.name for v in g.outputs], model.constants, [v.name for v in g.inputs],
                    feed_specs(g.inputs))
