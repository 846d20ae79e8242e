"""A compiled model ready to run: the model and the executor over its steps."""
from __future__ import annotations

from nnrt_core.compiler.model import CompiledModel
from nnrt_core.record import FrozenRecord
from nnrt_core.runtime.executor import Executor

__all__ = ["RunPlan"]


class RunPlan(FrozenRecord):
    """A compiled model and the executor over its steps."""

    __slots__ = ("model", "executor")
    model: CompiledModel
    executor: Executor

    def __init__(self, model: CompiledModel, executor: Executor) -> None:
        object.__setattr__(self, "model", model)
        object.__setattr__(self, "executor", executor)

    @classmethod
    def of(cls, model: CompiledModel) -> "RunPlan":
        g = model.graph
        return cls(model, Executor(model.steps, [v.name for v in g.outputs], model.constants,
                                   [v.name for v in g.inputs]))
