"""A complete third-party backend in one file.

It runs a few elementwise ops with numpy.  Everything nnrt needs is here: a
``Backend`` subclass (name, capability check, compile), a ``CompiledPartition``
and the ``nnrt_backends`` hook registered under the ``nnrt.backends`` entry
point in ``pyproject.toml``.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from nnrt_core.plugin_api import Backend, CompiledPartition, CompileOptions
from nnrt_core.plugin_api import hookimpl
from nnrt_core.ir import Graph, Node

OPS: dict[str, Callable[..., np.ndarray]] = {
    "Relu": lambda x: np.maximum(x, 0),
    "Neg": np.negative,
    "Abs": np.abs,
    "Add": np.add,
    "Mul": np.multiply,
    "Sigmoid": lambda x: 1 / (1 + np.exp(-x)),
}


class ExamplePartition(CompiledPartition):
    def __init__(self, backend: Backend, graph: Graph) -> None:
        super().__init__(backend, graph)
        # resolve everything at compile time: (function, input names, output name)
        self.steps = [(OPS[n.op_type], [v.name for v in n.inputs], n.outputs[0].name) for n in graph.nodes]
        self.consts = {name: v.const for name, v in graph.initializers.items()}

    def _run(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        env = {**self.consts, **inputs}
        for fn, args, out in self.steps:
            env[out] = fn(*(env[a] for a in args))
        return {name: env[name] for name in self.output_names}


class ExampleBackend(Backend):
    name = "example"
    version = "0.1.0"
    device_type = "cpu"
    default_priority = 20

    def _supports(self, node: Node, options: CompileOptions) -> str | None:
        if node.domain or node.op_type not in OPS:
            return f"example backend only runs {', '.join(OPS)}"
        if any(v is not None and v.dtype is not None and v.dtype.name != "FLOAT" for v in node.inputs):
            return "example backend only runs float32"
        return None

    def _compile(self, graph: Graph, options: CompileOptions) -> CompiledPartition:
        return ExamplePartition(self, graph)


@hookimpl
def nnrt_backends():
    return [ExampleBackend]
