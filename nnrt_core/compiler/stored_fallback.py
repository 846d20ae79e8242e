"""What a session file keeps so that a session loaded from it can fall back
after an fp16 overflow (``on_overflow="fallback"``) as an in-process one does.

An in-process session rebuilds its model from the source with the
overflowing partition's nodes pinned to the backup
(:func:`nnrt_core.compiler.overflow.refit_model`); a session file has no
source.  So when a file is written, every partition whose backend computes in
fp16/bf16 (its ``describe()["precision"]``: the precisions whose stores
saturate) also has its nodes (of the optimized graph, weights in fp32)
stored as an ONNX model with the backup's name, a
:class:`~nnrt_core.storage.session_file.FallbackRecord` (format 3).  Writing
costs an export, not a compile (compiling ResNet50 for NumPy at save took
4.3 s, 20x the save; ``benchmarks/bench_stored_fallback.py``).  A loaded
session keeps those bytes (views of the file's) and loads and compiles one,
through the checks of any untrusted ONNX model, only when its partition
overflows (:func:`nnrt_core.compiler.overflow.refit_stored`).  A model
loaded from a file passes its stored records on when it is saved again."""
from __future__ import annotations

from nnrt_core.backend.base import describe_partition
from nnrt_core.compiler.model import CompiledModel, PartitionInfo
from nnrt_core.errors import NnrtError
from nnrt_core.ir.clone import extract_subgraph
from nnrt_core.logs import get_logger
from nnrt_core.runtime.executor import ExecutionStep
from nnrt_core.storage.session_file import FallbackRecord

#: the form of the stored bytes: the partition's nodes as an ONNX model
FORM = "onnx"

__all__ = ["backup_records", "may_overflow", "OVERFLOWING_PRECISIONS"]

log = get_logger("nnrt.session")

#: precisions whose stores saturate (``NumericOverflowError``): partitions in them get a stored fallback
OVERFLOWING_PRECISIONS = ("fp16", "bf16")


def may_overflow(step: ExecutionStep) -> bool:
    """Whether ``step``'s partition computes floats in a precision whose stores
    may overflow at run time (``fp16``, ``bf16``, ``fp16+int8``...)."""
    got = describe_partition(step.compiled).get("precision")
    return isinstance(got, str) and any(p in got.split("+") for p in OVERFLOWING_PRECISIONS)


def backup_records(model: CompiledModel) -> list[FallbackRecord]:
    """One record per partition of ``model`` that may overflow, with its nodes
    for ``model.config.backup`` (none unless ``on_overflow`` is
    ``"fallback"`` and there is a backup).  A partition that cannot be
    exported gets none (logged): its overflow then fails the run, saying so."""
    config = model.config
    if config.on_overflow != "fallback" or config.backup is None:
        return []
    out = []
    for info, step in zip(model.partitions, model.steps):
        if info.backend == config.backup or not may_overflow(step):
            continue
        stored = model.stored_fallbacks.get(info.index)
        if stored is not None:  # loaded from a file: passed on
            out.append(stored)
        elif model.graph.nodes and model.backup is not None and model.backup.name == config.backup:
            blob = _exported(model, info)
            if blob is not None:
                out.append(FallbackRecord(info.index, model.backup.name, str(model.backup.version), FORM, blob))
    return out


def _exported(model: CompiledModel, info: PartitionInfo) -> bytes | None:
    """``info``'s nodes of ``model.graph`` as ONNX bytes, or ``None`` (logged) when they cannot be exported."""
    from nnrt_core.frontends import to_onnx  # the onnx package: only when a file with a fallback is written

    graph = model.graph
    names = set(info.nodes)
    values = graph.value_map()
    try:
        sub = extract_subgraph(graph, [n for n in graph.nodes if n.name in names],
                               [values[n] for n in info.inputs], [values[n] for n in info.outputs],
                               name=f"p{info.index}_{model.backup.name}_fallback")
        return to_onnx(sub).SerializeToString()
    except (NnrtError, KeyError, ValueError) as e:
        log.warning("session file: no backup fallback stored for partition %d on %r (%s: %s); an overflow there "
                    "will fail the run", info.index, info.backend, type(e).__name__, e)
        return None
