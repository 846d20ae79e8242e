"""The NumPy reference backend: runs any node it has a kernel for, on the host."""
from __future__ import annotations

import os
import platform
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from nnrt_core.plugin_api import Backend, CompiledPartition, CompileOptions, DeviceInfo
from nnrt_core.errors import CompileError, ModelLoadError, SessionFileError
from nnrt_core.ir import Graph, Node, TensorType
from nnrt_core.plugin_api import live_peak_bytes
from nnrt_numpy import __version__, blas, parallel
from nnrt_numpy.graph_facts import is_static_shape
from nnrt_numpy.memory import prefault_heap, tune_allocator

if TYPE_CHECKING:  # imported on the first capability check or compile (~20 ms in a fresh process)
    from nnrt_numpy.program import GraphProgram

__all__ = ["NumpyBackend", "WARM_HEAP_BYTES", "DYNAMIC_WARM_BYTES"]

#: the most heap a partition's warm-up touches (about 10 ms of page faults)
WARM_HEAP_BYTES = 64 << 20
#: heap a partition whose intermediates are sized only at run time (a free batch or image size)
#: touches at warm-up: PP-OCR cls's first run at batch 8 faulted in 16 MB (32 MiB cost the build
#: 7-70 ms, 16 MiB 3-7 ms, and left that first run 1.1-1.3x its steady run either way)
DYNAMIC_WARM_BYTES = 16 << 20


class NumpyPartition(CompiledPartition):
    def __init__(self, backend: Backend, graph: Graph, num_threads: int = 0) -> None:
        super().__init__(backend, graph)
        from nnrt_numpy.program import GraphProgram

        tune_allocator()  # reuse freed activation memory (see nnrt_core/runtime/heap.py)
        self.program: GraphProgram = GraphProgram(graph)
        self.graph = graph
        self.num_threads = num_threads
        self.uses_blas = _uses_blas(graph) and blas.available()  # BLAS found on first use

    def _run(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        args = [inputs[n] for n in self.input_names]
        if not self.uses_blas:
            return dict(zip(self.output_names, self.program.run(args)))
        blas.enter(self.num_threads)  # BLAS thread count for this run (see nnrt_numpy/blas.py)
        try:
            outs = self.program.run(args)
        finally:
            blas.leave()
        return dict(zip(self.output_names, outs))

    def warm_up(self) -> None:
        """The first run's set-up, paid at build: the helper threads split
        kernels use, the planned arena allocated with its pages touched, and
        heap pages for the most bytes of static intermediates live at once,
        or :data:`DYNAMIC_WARM_BYTES` when some are sized only at run time
        (at most ``WARM_HEAP_BYTES``; the pages stay with the process, see
        :mod:`nnrt_core.runtime.heap`, so the first run's fresh arrays do not
        fault them in).  Kernels and their optional imports, SciPy and the
        depthwise module included, load at compile."""
        parallel.start_helpers()
        if self.program.arena is not None:
            self.program.arena.prefault()
        peak = live_peak_bytes(self.graph)
        if _sized_at_run_time(self.graph):
            peak = max(peak, DYNAMIC_WARM_BYTES)
        self.warm_heap_bytes = min(peak, WARM_HEAP_BYTES)
        prefault_heap(self.warm_heap_bytes)

    def describe(self) -> dict[str, Any]:
        """Fused nodes, Concat placements and the planned arena (bytes, values)."""
        p = self.program
        return {"fused_nodes": p.fused_nodes, "concat_placed": p.placed, "folded_weights": p.folded_weights,
                **(p.arena.describe() if p.arena is not None else {"arena_bytes": 0, "arena_values": 0})}

    def serialize(self) -> bytes:
        """The partition as an ONNX model, its large weights in a region after
        it (see :mod:`nnrt_numpy.stored`)."""
        from nnrt_numpy.stored import pack  # json and the ONNX writer: only for the cache and session files

        return pack(self.graph)


def _sized_at_run_time(graph: Graph) -> bool:
    """Whether some intermediate of ``graph`` has a shape known only at run time."""
    outside = {id(v) for v in graph.outputs}
    return any(v is not None and id(v) not in outside and isinstance(v.type, TensorType) and not is_static_shape(v.shape)
               for n in graph.nodes for v in n.outputs)


def _uses_blas(graph: Graph) -> bool:
    return any(n.op_type in blas.BLAS_OPS or any(_uses_blas(g) for g in n.subgraphs()) for n in graph.nodes)


class NumpyBackend(Backend):
    name = "numpy"
    version = __version__
    device_type = "cpu"
    default_priority = 10  # the embedded default: lowest of the shipped backends
    supported_options = frozenset({"num_threads"})  # BLAS threads while a partition runs (nnrt_numpy.blas)
    evaluates_constants = True  # the reference kernels fold constants and run calibration
    compiles_read_only = True  # GraphProgram only reads the IR: a whole-graph partition is not copied

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
        from nnrt_numpy.program import why_unsupported  # the kernels' registry: not for a backup never asked

        return why_unsupported(node)

    def _compile(self, graph: Graph, options: CompileOptions) -> CompiledPartition:
        return NumpyPartition(self, graph, options.num_threads)

    def load_compiled(self, blob: bytes, options: CompileOptions) -> CompiledPartition:
        from nnrt_numpy.stored import unpack

        try:  # checked as any untrusted model (nodes in order: the checker refuses others)
            graph = unpack(blob)
        except (CompileError, ModelLoadError) as e:
            raise SessionFileError(f"stored numpy partition is invalid: {e}") from e
        try:  # a stored graph that passed the checks but not a kernel's: the file's problem too
            return self.compile(graph, options)
        except CompileError as e:
            raise SessionFileError(f"stored numpy partition is invalid: {e}") from e
