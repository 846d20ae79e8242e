"""nnrt: a neural-network inference runtime that runs one model across many
kinds of hardware through pip-installable backend plugins."""
from __future__ import annotations

from nnrt_core.backend import Backend, Capability, CompiledPartition, CompileOptions, DeviceInfo
from nnrt_core.builder import BuilderError, GraphBuilder, OperationSupport, available_operations
from nnrt_core.config import ScheduleConfig
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
from nnrt_core.registry import default_registry
from nnrt_core.compiler import CompiledModel, PartitionInfo, compile_model, load_model
from nnrt_core.runtime.control import RunControl
from nnrt_core.runtime.feeds import TensorInfo
from nnrt_core.runtime.streams import Completion, RunFuture, Stream
from nnrt_core.runtime.tensor import Tensor
from nnrt_core.session import Session
from nnrt_core.tools.profiler import Trace

from nnrt_core.version import __version__

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
    """Every installed backend with its devices, availability and priority."""
    return [r.to_dict() for r in default_registry().backends.values()]
