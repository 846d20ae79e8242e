"""The NumPy reference backend: runs any node it has a kernel for, on the host."""
from __future__ import annotations

import os
import platform
from typing import Any, Mapping

import numpy as np

import nnrt_numpy.ops  # noqa: F401  (registers every kernel)
from nnrt_core.backend import Backend, CompiledPartition, CompileOptions, DeviceInfo
from nnrt_core.ir import Graph, Node
from nnrt_numpy import __version__
from nnrt_numpy.program import GraphProgram, why_unsupported

__all__ = ["NumpyBackend"]


class NumpyPartition(CompiledPartition):
    def __init__(self, backend: Backend, graph: Graph) -> None:
        super().__init__(backend, graph)
        self.program = GraphProgram(graph)

    def _run(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        outs = self.program.run([inputs[n] for n in self.input_names])
        return dict(zip(self.output_names, outs))


class NumpyBackend(Backend):
    name = "numpy"
    version = __version__
    device_type = "cpu"
    default_priority = 10  # the embedded default: lowest of the shipped backends
    supported_options = frozenset()

    def devices(self) -> list[DeviceInfo]:
        return [
            DeviceInfo(
                id="cpu:0",
                name="host CPU (numpy)",
                type="cpu",
                properties={
                    "cores": os.cpu_count() or 1,
                    "machine": platform.machine(),
                    "numpy": np.__version__,
                },
                precisions=("fp32", "fp64", "int"),
            )
        ]

    def _supports(self, node: Node, options: CompileOptions) -> str | None:
        return why_unsupported(node)

    def _compile(self, graph: Graph, options: CompileOptions) -> CompiledPartition:
        return NumpyPartition(self, graph)
