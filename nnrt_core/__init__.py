"""nnrt: a neural-network inference runtime that runs one model across many
kinds of hardware through pip-installable backend plugins."""
from __future__ import annotations

from nnrt_core.backend import Backend, Capability, CompiledPartition, CompileOptions, DeviceInfo
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
    UnsupportedNodeError,
)
from nnrt_core.registry import default_registry
from nnrt_core.session import PartitionInfo, Session, TensorInfo, load_model

__version__ = "0.1.0"

__all__ = [
    "Backend",
    "BackendUnavailableError",
    "Capability",
    "CompiledPartition",
    "CompileError",
    "CompileOptions",
    "ConfigError",
    "DeviceInfo",
    "ExecutionError",
    "GraphError",
    "InputError",
    "ModelLoadError",
    "NnrtError",
    "OpError",
    "PartitionInfo",
    "PlacementError",
    "PluginError",
    "ScheduleConfig",
    "Session",
    "TensorInfo",
    "UnsupportedNodeError",
    "default_registry",
    "devices",
    "load_model",
    "__version__",
]


def devices() -> list[dict]:
    """Every installed backend with its devices, availability and priority."""
    return [r.to_dict() for r in default_registry().backends.values()]
