"""``Tensor``: a tensor held in one backend's memory, for zero-copy I/O.

After OpenHarmony NNRt's ``OH_NNTensor``, ONNX Runtime's IOBinding/OrtValue
and OpenVINO's RemoteTensor: ``Session.allocate_input`` gives a tensor in the
memory of the backend that reads that input; feeding it back to
``Session.run`` performs no copy, and ``run(..., keep_on_device=True)`` returns
device outputs as tensors instead of copying them to the host.  Copies the
runtime makes are counted in ``Session.stats()["host_device_copies"]``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from nnrt_core.errors import InputError

if TYPE_CHECKING:
    from nnrt_core.backend.base import Backend

__all__ = ["Tensor"]


class Tensor:
    """``data`` is a host array (``backend`` None or a host-memory backend)
    or the backend's own device tensor handle."""

    __slots__ = ("data", "backend", "shape", "dtype")

    def __init__(self, data: Any, backend: "Backend | None" = None, shape: Sequence[int] | None = None,
                 dtype: Any = None) -> None:
        self.data = data
        self.backend = backend
        if shape is None or dtype is None:
            got_shape, got_dtype = _handle_meta(data)
            shape = got_shape if shape is None else shape
            dtype = got_dtype if dtype is None else dtype
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)

    @classmethod
    def from_numpy(cls, array: np.ndarray) -> "Tensor":
        """A host tensor wrapping ``array`` (no copy)."""
        a = np.asarray(array)
        return cls(a, None, a.shape, a.dtype)

    @property
    def on_device(self) -> bool:
        """True when the data lives in a device backend's memory."""
        return self.backend is not None and not self.backend.host_memory

    @property
    def device(self) -> str:
        return self.backend.name if self.on_device else "host"

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    def numpy(self) -> np.ndarray:
        """The data as a host array: a view without copying where the device
        memory is mapped into the host (host tensors, the emulated NPU's
        shared memory), otherwise a copy."""
        if not self.on_device:
            return self.data
        view = self.backend.host_view(self.data)
        return view if view is not None else self.backend.to_host(self.data)

    def copy_from(self, array: Any) -> None:
        """Write ``array`` (same shape and dtype) into this tensor."""
        a = np.asarray(array)
        if a.shape != self.shape or a.dtype != self.dtype:
            raise InputError(f"tensor on {self.device} holds {self.dtype}{list(self.shape)}, "
                             f"got {a.dtype}{list(a.shape)}")
        if not self.on_device:
            np.copyto(self.data, a)
            return
        view = self.backend.host_view(self.data)
        if view is not None:
            np.copyto(view, a)
        else:
            self.data = self.backend.to_device(a)

    def __repr__(self) -> str:
        return f"Tensor({self.dtype}{list(self.shape)} on {self.device})"


def _handle_meta(data: Any) -> tuple[Sequence[int], Any]:
    """Shape and dtype of a host array or a device handle (numpy-like
    attributes, or OrtValue's ``shape()`` / ``element_type()``)."""
    shape = getattr(data, "shape", None)
    if callable(shape):
        shape = shape()
    dtype = getattr(data, "dtype", None)
    if dtype is None and callable(getattr(data, "element_type", None)):
        dtype = data.element_type()
    if shape is None or dtype is None:
        raise InputError(f"cannot tell the shape and dtype of a {type(data).__name__}; pass shape= and dtype=")
    return shape, dtype
