"""Compile once, load everywhere: the driver builds a :class:`Session` once and
puts its compiled offline file (the bytes :meth:`Session.save` writes) into
Ray's object store; every actor loads that file warm (no optimization passes,
no placement, no partitioning).  A session whose backends cannot serialize
their partitions is shipped as the model and its :class:`ScheduleConfig`, and
every actor builds it (cold)."""
from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import ray

from nnrt_core import ScheduleConfig, Session
from nnrt_core.errors import SessionFileError
from nnrt_core.registry import Registry, default_registry
from nnrt_core.runtime.feeds import TensorInfo
from nnrt_core.storage.session_file import encode

__all__ = ["ShippedSession", "ship", "device_resources"]

log = logging.getLogger("nnrt.ray")


def device_resources(sess: Session, registry: Registry | None = None) -> dict[str, float]:
    """The Ray custom resources an actor running ``sess`` requests: one unit
    named after each device backend (any ``device_type`` but ``cpu``) its
    partitions use, e.g. ``{"npu_emu": 1}``, so Ray never packs two sessions
    onto one device."""
    reg = registry or sess.registry
    used = {p.backend for p in sess.partitions}
    return {name: 1.0 for name in sorted(used) if reg.backend(name).device_type not in ("cpu", "")}


@dataclass
class ShippedSession:
    """A session ready to load in any Ray worker: its offline file in the
    object store (``mode == "file"``), or its model and config (``"model"``)."""

    mode: str
    ref: Any  #: ObjectRef of the session file bytes, or of the model bytes
    config: ScheduleConfig | None
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    resources: dict[str, float] = field(default_factory=dict)
    build_seconds: float = 0.0
    file_bytes: int = 0

    def load(self) -> Session:
        """The session, in this process: the shipped file loaded warm, or the model built cold."""
        data = ray.get(self.ref) if isinstance(self.ref, ray.ObjectRef) else self.ref
        if isinstance(data, np.ndarray):  # the file as a read-only view of the object store: no copy
            data = memoryview(data)
        if self.mode == "file":
            return Session(data)
        return Session(data, self.config)


def _model_payload(model: Any) -> Any:
    """What travels for a cold build: a model file's bytes (workers on other
    machines may not see the path), anything else as it is."""
    if isinstance(model, (str, os.PathLike)) and Path(model).is_file():
        return Path(model).read_bytes()
    return model


def ship(model: Any, config: ScheduleConfig | None = None, *, warm: bool = True) -> ShippedSession:
    """Build ``model`` once here and put it into the object store.  With
    ``warm`` (the default) the compiled offline file travels; without it, or
    when a backend cannot serialize its partitions, the model and ``config``
    travel and each actor builds the session itself."""
    t0 = time.perf_counter()
    sess = Session(model, config)
    build = time.perf_counter() - t0
    common = dict(inputs=sess.inputs, outputs=sess.outputs, resources=device_resources(sess), build_seconds=build)
    if warm:
        try:
            data = encode(sess.to_image())
            # as a uint8 array, which workers on this node read straight from shared memory (bytes are copied)
            return ShippedSession("file", ray.put(np.frombuffer(data, np.uint8)), None, file_bytes=len(data),
                                  **common)
        except SessionFileError as e:
            log.warning("shipping the model instead of its compiled file (every actor builds it): %s", e)
    return ShippedSession("model", ray.put(_model_payload(model)), sess.config, **common)
