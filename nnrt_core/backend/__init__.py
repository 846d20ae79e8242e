"""The backend contract: base classes a backend plugin implements."""
from __future__ import annotations

from nnrt_core.backend.base import Backend, Capability, CompiledPartition, CompileOptions, DeviceInfo

__all__ = ["Backend", "Capability", "CompiledPartition", "CompileOptions", "DeviceInfo"]
