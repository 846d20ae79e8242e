"""Every name this plugin uses from ``nnrt_core``, in one place.

The plugin reads the backend contract through this module only, so moving to
the public plugin surface (``nnrt_core.plugin_api``) is a change of this file."""
from __future__ import annotations

from nnrt_core.backend import Backend, Capability, CompiledPartition, CompileOptions, DeviceInfo
from nnrt_core.errors import CompileError, ConfigError, ExecutionError, NnrtError
from nnrt_core.frontends.onnx import to_onnx
from nnrt_core.hookspec import hookimpl
from nnrt_core.ir import AttrKind, DataType, Graph, Node, OptionalType, SequenceType, TensorType, Value
from nnrt_core.ir.clone import clone_node
from nnrt_core.logs import get_logger
from nnrt_core.runtime.control import RunControl, current_control
from nnrt_core.storage.files import write_atomic

__all__ = [
    "Backend", "Capability", "CompiledPartition", "CompileOptions", "DeviceInfo",
    "CompileError", "ConfigError", "ExecutionError", "NnrtError",
    "to_onnx", "hookimpl",
    "AttrKind", "DataType", "Graph", "Node", "OptionalType", "SequenceType", "TensorType", "Value", "clone_node",
    "get_logger", "RunControl", "current_control", "write_atomic",
]
