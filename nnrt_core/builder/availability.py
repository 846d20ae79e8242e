"""``available_operations``: which nodes of a model one device can run
(NNRt's ``OH_NNModel_GetAvailableOperations``), asked before compiling."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from nnrt_core.backend.base import DeviceInfo
from nnrt_core.config import ScheduleConfig
from nnrt_core.errors import BackendUnavailableError, ConfigError
from nnrt_core.frontends import load_onnx
from nnrt_core.frontends.detect import is_tflite_source
from nnrt_core.frontends.tflite_entry import load_tflite_source
from nnrt_core.ir import Graph, Model
from nnrt_core.registry import Registry, default_registry

__all__ = ["OperationSupport", "available_operations", "device_ids"]


@dataclass(frozen=True)
class OperationSupport:
    """One node's answer: can the device run it, and if not, why."""

    node: str
    op_type: str  #: qualified: "domain::Op" outside the default domain
    supported: bool
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def device_ids(registry: Registry | None = None) -> list[str]:
    """Every valid ``device`` argument: each available backend name and
    ``backend:device`` id."""
    reg = registry if registry is not None else default_registry()
    out: list[str] = []
    for rec in sorted(reg.backends.values(), key=lambda r: r.name):
        if not rec.available or rec.backend is None:
            continue
        out.append(rec.name)
        out.extend(f"{rec.name}:{d.id}" for d in _devices(rec.backend) if d.available)
    return out


def available_operations(model: Any, device: str, *, config: ScheduleConfig | None = None,
                         registry: Registry | None = None) -> list[OperationSupport]:
    """Per node of ``model`` (in graph order), whether ``device`` supports it.

    ``model``: an IR ``Model``/``Graph`` (e.g. from ``GraphBuilder.build()``)
    or anything ``Session`` accepts.  ``device``: a backend name (its default
    device) or ``"backend:device"`` (device id or name, e.g. ``"npu_emu:npu:1"``).
    ``config`` supplies the compile options the answer depends on (precision,
    per-backend options).  Unknown devices raise :class:`ConfigError` listing
    the valid ones."""
    reg = registry if registry is not None else default_registry()
    cfg = config if config is not None else ScheduleConfig()
    if not isinstance(cfg, ScheduleConfig):
        raise ConfigError(f"config must be a ScheduleConfig, got {type(cfg).__name__}")
    backend_name, device_info = _resolve(device, reg)
    graph = _graph_of(model, reg)
    options = cfg.compile_options(backend_name).replace(device=device_info.id)
    backend = reg.backend(backend_name).backend
    assert backend is not None  # _resolve checked availability
    cap = backend.capability(graph, options)
    return [OperationSupport(n.name, n.qualified_op, cap.supports(n.name),
                             None if cap.supports(n.name) else cap.reason(n.name))
            for n in graph.nodes]


def _resolve(device: Any, reg: Registry) -> tuple[str, DeviceInfo]:
    if not isinstance(device, str) or not device:
        raise ConfigError(f"device must be a backend name or 'backend:device', got {device!r}; "
                          f"valid: {', '.join(device_ids(reg)) or 'none'}")
    backend_name, _, selector = device.partition(":")
    rec = reg.find_backend(backend_name)
    if rec is None:
        raise ConfigError(f"unknown device {device!r}: no backend {backend_name!r} is installed; "
                          f"valid: {', '.join(device_ids(reg)) or 'none'}")
    if not rec.available or rec.backend is None:
        raise BackendUnavailableError(f"backend {backend_name!r} is unavailable: {rec.reason}")
    try:
        info = rec.backend.find_device(selector or None)
    except ConfigError:
        raise ConfigError(f"unknown device {device!r}: backend {backend_name!r} has no device {selector!r}; "
                          f"valid: {', '.join(device_ids(reg))}") from None
    if not info.available:
        raise BackendUnavailableError(f"device {device!r} is unavailable: {info.reason}")
    return backend_name, info


def _devices(backend: Any) -> list[DeviceInfo]:
    try:
        return list(backend.devices())
    except Exception:  # a listing must not break on a buggy plugin
        return []


def _graph_of(model: Any, registry: Registry) -> Graph:
    if isinstance(model, Model):
        return model.graph
    if isinstance(model, Graph):
        return model
    if is_tflite_source(model):
        return load_tflite_source(model, plugin_ops=registry.tflite_custom_ops).graph
    return load_onnx(model).graph  # what Session loads from a path, bytes or ModelProto
