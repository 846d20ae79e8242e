"""An emulated chip (``NpuDevice``: profile, device memory, command queue),
its tensors (``NpuTensor``) and the backend's transfer counters."""
from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from nnrt_core.plugin_api import Backend, DeviceInfo
from nnrt_npu_emu.memory import DeviceArena
from nnrt_npu_emu.profiles import ChipProfile
from nnrt_npu_emu.queue import CommandQueue

__all__ = ["NpuDevice", "NpuTensor", "TransferStats", "NPU_POWER_W"]

#: nominal active power of an emulated chip (mobile NPU class), in watts
NPU_POWER_W = 2.0


class NpuDevice:
    """One emulated chip: its profile, device memory and command queue."""

    def __init__(self, index: int, profile: ChipProfile, backend: Backend) -> None:
        self.index = index
        self.id = f"npu:{index}"
        self.profile = profile
        self.backend_ref = weakref.ref(backend)
        self.arena = DeviceArena(profile.device_memory_bytes, f"{self.id} ({profile.name})")
        self.queue = CommandQueue(self.id)

    def info(self) -> DeviceInfo:
        props = self.profile.properties()
        props["memory_in_use"] = self.arena.in_use
        props.setdefault("power_w", NPU_POWER_W)  # for energy-aware schedulers (min_power)
        return DeviceInfo(self.id, self.profile.name, "npu", props, tuple(self.profile.dtypes))


class NpuTensor:
    """A tensor in emulated device memory (a handle: device + offset).

    ``data`` maps it into host address space (zero copy, like the shared
    memory of a mobile SoC); ``NpuEmuBackend.to_host`` is the counted copy."""

    __slots__ = ("device", "offset", "dtype", "shape", "_fin", "__weakref__")

    def __init__(self, device: NpuDevice, shape: Sequence[int], dtype: Any) -> None:
        self.device = device
        self.dtype = np.dtype(dtype)
        self.shape = tuple(int(s) for s in shape)
        self.offset = device.arena.alloc(self.nbytes, f"tensor {self.dtype}{list(self.shape)}")
        self._fin = weakref.finalize(self, device.arena.free, self.offset)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def data(self) -> np.ndarray:
        """The tensor's device memory mapped as a numpy array (no copy)."""
        return self.device.arena.view(self.offset, self.dtype, self.shape)

    def free(self) -> None:
        self._fin()

    def __repr__(self) -> str:
        return f"NpuTensor({self.dtype}{list(self.shape)} on {self.device.id} @ {self.offset:#x})"


@dataclass
class TransferStats:
    to_device: int = 0
    to_host: int = 0
    bytes_to_device: int = 0
    bytes_to_host: int = 0
    device_to_device: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def as_dict(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in ("to_device", "to_host", "bytes_to_device", "bytes_to_host",
                                               "device_to_device")}
