"""What the registry records about plugins, backends and schedulers
(re-exported by :mod:`nnrt_core.registry`)."""
from __future__ import annotations

from typing import Any

from nnrt_core.backend.base import Backend
from nnrt_core.record import Record

__all__ = ["PluginRecord", "BackendRecord", "SchedulerRecord"]


class PluginRecord(Record):
    """One entry point (or programmatically registered plugin object)."""

    __slots__ = ("name", "group", "distribution", "version", "status", "reason")
    name: str
    group: str
    distribution: str
    version: str
    status: str  #: loaded | failed | blocked | disabled | found (read, not imported yet)
    reason: str | None

    def __init__(self, name: str, group: str, distribution: str = "", version: str = "", status: str = "loaded",
                 reason: str | None = None) -> None:
        self.name, self.group, self.distribution, self.version = name, group, distribution, version
        self.status, self.reason = status, reason


class BackendRecord(Record):
    """One backend offered by a plugin."""

    __slots__ = ("name", "plugin", "backend", "reason", "priority", "version", "device_type")
    name: str
    plugin: str
    backend: Backend | None
    reason: str | None  #: why it is unavailable (None = available)
    priority: int
    version: str
    device_type: str

    def __init__(self, name: str, plugin: str, backend: Backend | None = None, reason: str | None = None,
                 priority: int = 0, version: str = "", device_type: str = "") -> None:
        self.name, self.plugin, self.backend, self.reason = name, plugin, backend, reason
        self.priority, self.version, self.device_type = priority, version, device_type

    @property
    def available(self) -> bool:
        return self.backend is not None and self.reason is None

    def to_dict(self) -> dict[str, Any]:
        devices = []
        if self.backend is not None:
            try:
                devices = [d.to_dict() for d in self.backend.devices()]
            except Exception as e:  # listing must not break on a buggy plugin
                devices = [{"error": f"{type(e).__name__}: {e}"}]
        return {
            "name": self.name,
            "plugin": self.plugin,
            "version": self.version,
            "device_type": self.device_type,
            "priority": self.priority,
            "available": self.available,
            "reason": self.reason,
            "devices": devices,
        }


class SchedulerRecord(Record):
    """One scheduler offered by a plugin."""

    __slots__ = ("name", "plugin", "cls", "description")
    name: str
    plugin: str
    cls: type | None
    description: str

    def __init__(self, name: str, plugin: str, cls: type | None = None, description: str = "") -> None:
        self.name, self.plugin, self.cls, self.description = name, plugin, cls, description
