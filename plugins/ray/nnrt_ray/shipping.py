"""Compile once, load everywhere: the driver builds a :class:`Session` once and
puts its compiled offline file (the bytes :meth:`Session.save` writes) into
Ray's object store; every actor loads that file warm (no optimization passes,
no placement, no partitioning).  The driver builds through a model cache (a
throwaway one unless the config names its own), so that backends keep their
fastest-loading stored form: for ONNX Runtime, its own optimized graph, which
loads with ORT's optimizers off.  That form is tied to the CPU and ORT
version; an actor on a machine that refuses it builds the session from the
shipped model instead (cold, with a warning).  A session whose backends cannot
serialize their partitions is shipped as the model and its
:class:`ScheduleConfig`, and every actor builds it (cold)."""
from __future__ import annotations

import logging
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import ray

from nnrt_core import ScheduleConfig, Session
from nnrt_core.errors import CompileError, SessionFileError
from nnrt_core.plugin_api import Registry, default_registry
from nnrt_core.plugin_api import TensorInfo
from nnrt_core.plugin_api import encode

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
    object store (``mode == "file"``), or its model and config (``"model"``).
    ``fallback``: the model, for a ``"file"`` whose compiled form the
    worker's machine refuses (another CPU or ONNX Runtime version)."""

    mode: str
    ref: Any  #: ObjectRef of the session file bytes, or of the model bytes
    config: ScheduleConfig | None
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    resources: dict[str, float] = field(default_factory=dict)
    build_seconds: float = 0.0
    file_bytes: int = 0
    fallback: Any = None  #: ObjectRef of the model bytes (a cold build where the file is refused)

    def load(self) -> Session:
        """The session, in this process: the shipped file loaded warm, or the model built cold."""
        return self.load_reporting()[0]

    def load_reporting(self) -> tuple[Session, str]:
        """(the session, how it was made: ``"file"``, ``"model"`` or
        ``"model (file refused: ...)"``)."""
        if self.mode != "file":
            return Session(_fetch(self.ref), self.config), "model"
        try:
            return Session(_fetch(self.ref)), "file"
        except CompileError as e:  # a compiled form for another machine: build here instead
            if self.fallback is None:
                raise
            log.warning("the shipped compiled file does not load here (%s); building the session from the "
                        "model", e)
            return Session(_fetch(self.fallback), self.config), f"model (file refused: {e})"


def _fetch(ref: Any) -> Any:
    """The object behind ``ref``; a file's uint8 array as a read-only view of
    the object store (no copy)."""
    data = ray.get(ref) if isinstance(ref, ray.ObjectRef) else ref
    return memoryview(data) if isinstance(data, np.ndarray) else data


def _model_payload(model: Any) -> Any:
    """What travels for a cold build: a model file's bytes (workers on other
    machines may not see the path), anything else as it is."""
    if isinstance(model, (str, os.PathLike)) and Path(model).is_file():
        return Path(model).read_bytes()
    return model


def _put_fallback(payload: Any) -> Any:
    """The model in the object store for the file's fallback, or None when it
    cannot be serialized (then a worker that refuses the file fails)."""
    try:
        return ray.put(payload)
    except Exception as e:  # Ray raises several kinds for objects it cannot pickle
        log.warning("the model cannot be shipped as a fallback for the compiled file: %s", e)
        return None


def _build(model: Any, config: ScheduleConfig | None) -> Session:
    """The driver's session, built through a model cache: backends keep the
    stored form they load fastest (a throwaway cache unless ``config`` has one)."""
    config = config if config is not None else ScheduleConfig()
    if config.cache_dir is not None:
        return Session(model, config)
    with tempfile.TemporaryDirectory(prefix="nnrt-ship-") as d:
        return Session(model, config.replace(cache_dir=d))


def ship(model: Any, config: ScheduleConfig | None = None, *, warm: bool = True) -> ShippedSession:
    """Build ``model`` once here and put it into the object store.  With
    ``warm`` (the default) the compiled offline file travels (and the model,
    fetched only by a worker whose machine refuses the file); without it, or
    when a backend cannot serialize its partitions, the model and ``config``
    travel and each actor builds the session itself."""
    t0 = time.perf_counter()
    sess = _build(model, config) if warm else Session(model, config)
    build = time.perf_counter() - t0
    config = config if config is not None else ScheduleConfig()
    common = dict(inputs=sess.inputs, outputs=sess.outputs, resources=device_resources(sess), build_seconds=build)
    payload = _model_payload(model)
    if warm:
        try:
            data = encode(sess.to_image())
            # as a uint8 array, which workers on this node read straight from shared memory (bytes are copied)
            return ShippedSession("file", ray.put(np.frombuffer(data, np.uint8)), config, file_bytes=len(data),
                                  fallback=_put_fallback(payload), **common)
        except SessionFileError as e:
            log.warning("shipping the model instead of its compiled file (every actor builds it): %s", e)
    return ShippedSession("model", ray.put(payload), config, **common)
