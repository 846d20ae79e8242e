"""nnrt: a neural-network inference runtime that runs one model across many
kinds of hardware through pip-installable backend plugins."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nnrt_core.errors import (
    BackendUnavailableError,
    CompileError,
    ConfigError,
    ExecutionError,
    GraphError,
    InputError,
    MemoryBudgetError,
    ModelLoadError,
    NnrtError,
    OpError,
    PlacementError,
    PluginError,
    RunCancelledError,
    RunStoppedError,
    RunTimeoutError,
    SessionFileError,
    UnsupportedNodeError,
)
from nnrt_core.version import __version__

if TYPE_CHECKING:  # the names below are imported on first use (PEP 562), see _LAZY
    from nnrt_core.backend import Backend, Capability, CompiledPartition, CompileOptions, DeviceInfo
    from nnrt_core.builder import BuilderError, GraphBuilder, OperationSupport, available_operations
    from nnrt_core.compiler import CompiledModel, PartitionInfo, compile_model, load_model
    from nnrt_core.config import ScheduleConfig
    from nnrt_core.registry import default_registry
    from nnrt_core.control import RunControl
    from nnrt_core.runtime.feeds import TensorInfo
    from nnrt_core.runtime.streams import Completion, RunFuture, Stream
    from nnrt_core.runtime.tensor import Tensor
    from nnrt_core.session import Session
    from nnrt_core.profiling.profiler import Trace

#: public name -> the module it comes from; ``import nnrt_core`` imports none of
#: them (no numpy, no onnx): ``nnrt --help`` and tools that only need the errors
#: or the config stay fast, and ``from nnrt_core import Session`` imports what a
#: session needs
_LAZY = {
    **dict.fromkeys(["Backend", "Capability", "CompiledPartition", "CompileOptions", "DeviceInfo"],
                    "nnrt_core.backend"),
    **dict.fromkeys(["BuilderError", "GraphBuilder", "OperationSupport", "available_operations"],
                    "nnrt_core.builder"),
    **dict.fromkeys(["CompiledModel", "PartitionInfo", "compile_model", "load_model"], "nnrt_core.compiler"),
    "ScheduleConfig": "nnrt_core.config",
    "default_registry": "nnrt_core.registry",
    "RunControl": "nnrt_core.control",
    "TensorInfo": "nnrt_core.runtime.feeds",
    **dict.fromkeys(["Completion", "RunFuture", "Stream"], "nnrt_core.runtime.streams"),
    "Tensor": "nnrt_core.runtime.tensor",
    "Session": "nnrt_core.session",
    "Trace": "nnrt_core.profiling.profiler",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'nnrt_core' has no attribute {name!r}")
    import importlib

    from nnrt_core.gc_pause import paused_gc

    with paused_gc(promote=True):  # an import makes no garbage (see nnrt_core/gc_pause.py)
        value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "Backend",
    "BackendUnavailableError",
    "BuilderError",
    "Capability",
    "CompiledPartition",
    "CompileError",
    "CompileOptions",
    "CompiledModel",
    "Completion",
    "ConfigError",
    "DeviceInfo",
    "ExecutionError",
    "GraphError",
    "GraphBuilder",
    "InputError",
    "MemoryBudgetError",
    "ModelLoadError",
    "NnrtError",
    "OpError",
    "OperationSupport",
    "PartitionInfo",
    "PlacementError",
    "PluginError",
    "RunCancelledError",
    "RunControl",
    "RunFuture",
    "RunStoppedError",
    "RunTimeoutError",
    "ScheduleConfig",
    "Session",
    "Stream",
    "SessionFileError",
    "Tensor",
    "TensorInfo",
    "Trace",
    "UnsupportedNodeError",
    "available_operations",
    "compile_model",
    "default_registry",
    "devices",
    "load_model",
    "__version__",
]


def devices() -> list[dict]:
    """Every installed backend with its devices, availability and priority
    (imports every backend plugin)."""
    from nnrt_core.registry import default_registry

    return [r.to_dict() for r in default_registry().backends.values()]
