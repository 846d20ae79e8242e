"""A compiled model ready to run: the model and the executor over its steps."""
from __future__ import annotations

from dataclasses import dataclass

from nnrt_core.compiler.model import CompiledModel
from nnrt_core.runtime.executor import Executor

__all__ = ["RunPlan"]


@dataclass(frozen=True)
class RunPlan:
    model: CompiledModel
    executor: Executor

    @classmethod
    def of(cls, model: CompiledModel) -> "RunPlan":
        g = model.graph
        return cls(model, Executor(model.steps, [v.name for v in g.outputs], model.constants,
                                   [v.name for v in g.inputs]))
