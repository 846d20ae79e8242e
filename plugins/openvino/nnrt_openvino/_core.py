"""Every name this plugin uses from ``nnrt_core``, in one place.

The plugin reads nnrt through this module only: the public plugin surface
(``nnrt_core.plugin_api``), the IR and the errors."""
from __future__ import annotations

from nnrt_core.errors import CompileError, ConfigError, ExecutionError, NnrtError
from nnrt_core.ir import AttrKind, DataType, Graph, Node, OptionalType, SequenceType, TensorType, Value
from nnrt_core.ir.clone import clone_node
from nnrt_core.plugin_api import (Backend, Capability, CompiledPartition, CompileOptions, DeviceInfo, RunControl,
                                  current_control, get_logger, hookimpl, to_onnx, user_cache_file,
                                  write_atomic)

__all__ = [
    "Backend", "Capability", "CompiledPartition", "CompileOptions", "DeviceInfo",
    "CompileError", "ConfigError", "ExecutionError", "NnrtError",
    "to_onnx", "hookimpl",
    "AttrKind", "DataType", "Graph", "Node", "OptionalType", "SequenceType", "TensorType", "Value", "clone_node",
    "get_logger", "RunControl", "current_control", "user_cache_file", "write_atomic",
]
