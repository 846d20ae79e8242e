"""An ``onnx.backend.base.Backend`` over :class:`nnrt_core.Session` (the ONNX test-suite adapter).

This is the ecosystem's standard adapter: it lets ``onnx.backend.test.BackendTest``
run the ONNX conformance suites (node cases, real models) through nnrt::

    backend = nnrt_backend(ScheduleConfig(backends=["numpy"]))
    suite = onnx.backend.test.BackendTest(backend, __name__)
"""
from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx.backend.base import Backend as OnnxBackend
from onnx.backend.base import BackendRep

from nnrt_core.config import ScheduleConfig
from nnrt_core.session import Session

__all__ = ["NnrtBackendRep", "NnrtOnnxBackend", "nnrt_backend"]


class NnrtBackendRep(BackendRep):
    def __init__(self, session: Session) -> None:
        self.session = session
        self._names = [i.name for i in session.inputs]

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        if isinstance(inputs, dict):
            feeds = dict(inputs)
        else:
            if isinstance(inputs, np.ndarray) or not isinstance(inputs, (list, tuple)):
                inputs = [inputs]
            feeds = dict(zip(self._names, inputs))
        return tuple(self.session.run(feeds).values())


class NnrtOnnxBackend(OnnxBackend):
    """Configured through the ``config`` class attribute (see :func:`nnrt_backend`)."""

    config: ScheduleConfig = ScheduleConfig()

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> NnrtBackendRep:
        super().prepare(model, device, **kwargs)
        return NnrtBackendRep(Session(model, cls.config))

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU", **kwargs: Any):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device == "CPU"


def nnrt_backend(config: ScheduleConfig, name: str = "NnrtOnnxBackend") -> type[NnrtOnnxBackend]:
    """A backend class bound to ``config``."""
    return type(name, (NnrtOnnxBackend,), {"config": config})


