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
    ModelLoadError,
    NnrtError,
    OpError,
    PlacementError,
    PluginError,
    SessionFileError,
    UnsupportedNodeError,
)
from nnrt_core.registry import default_registry
from nnrt_core.session import PartitionInfo, Session, TensorInfo, load_model
from nnrt_core.tensor import Tensor
from nnrt_core.streams import Completion, RunFuture, Stream
from nnrt_core.profiler import Trace

__version__ = "0.1.0"

__all__ = [
    "Backend",
    "BackendUnavailableError",
    "BuilderError",
    "Capability",
    "CompiledPartition",
    "CompileError",
    "CompileOptions",
    "Completion",
    "ConfigError",
    "DeviceInfo",
    "ExecutionError",
    "GraphError",
    "GraphBuilder",
    "InputError",
    "ModelLoadError",
    "NnrtError",
    "OpError",
    "OperationSupport",
    "PartitionInfo",
    "PlacementError",
    "PluginError",
    "RunFuture",
    "ScheduleConfig",
    "Session",
    "Stream",
    "SessionFileError",
    "Tensor",
    "TensorInfo",
    "Trace",
    "UnsupportedNodeError",
    "available_operations",
    "default_registry",
    "devices",
    "load_model",
    "__version__",
]


def devices() -> list[dict]:
    """Every installed backend with its devices, availability and priority."""
    return [r.to_dict() for r in default_registry().backends.values()]
