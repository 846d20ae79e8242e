"""What the registry records about plugins, backends and schedulers, and the
checks of what a plugin declares (re-exported by :mod:`nnrt_core.registry`)."""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from nnrt_core.backend.base import Backend
from nnrt_core.record import Record

__all__ = ["EMULATED_GROUP", "PluginRecord", "BackendRecord", "SchedulerRecord", "custom_ops_problem",
           "declared_emulated", "emulated_problem", "trait_problem"]

#: entry-point group naming a distribution's emulated backends (entry-point name = backend name), read
#: from its metadata: ``backends="auto"`` leaves them out without importing their plugin
EMULATED_GROUP = "nnrt.emulated_backends"


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


#: class attributes every backend declares: name -> (accepted types, what is expected)
_TRAITS: dict[str, tuple[tuple[type, ...], str]] = {
    "version": ((str, int, float), "a version string"),
    "device_type": ((str,), "a string such as 'cpu' or 'npu'"),
    "default_priority": ((int,), "an int"),
    "supported_options": ((frozenset, set), "a frozenset of option names"),
    "host_memory": ((bool,), "a bool"),
    "evaluates_constants": ((bool,), "a bool"),
    "needs_static_shapes": ((bool,), "a bool"),
    "compiles_read_only": ((bool,), "a bool"),
    "fresh_outputs": ((bool,), "a bool"),
    "emulated": ((bool,), "a bool"),
}


def trait_problem(backend: Backend) -> str | None:
    """Why ``backend``'s declared attributes are unusable (wrong types), or ``None``."""
    for attr, (types, expected) in _TRAITS.items():
        try:
            value = getattr(backend, attr)
        except Exception as e:
            return f"reading {attr} raised {type(e).__name__}: {e}"
        if not isinstance(value, types) or (attr == "default_priority" and not is_plain_int(value)):
            return f"{attr} must be {expected}, got {value!r} ({type(value).__name__})"
        if attr == "supported_options" and not all(isinstance(o, str) for o in value):
            return f"supported_options must hold option names (strings), got {sorted(map(repr, value))}"
    return None


def custom_ops_problem(answer: object, owners: Mapping[str, str], plugin: str) -> str | None:
    """What is wrong with a plugin's ``nnrt_tflite_custom_ops()`` answer (``None``: nothing)."""
    if not isinstance(answer, Mapping):
        return f"returned a {type(answer).__name__}, expected a dict {{custom operator name: mapper}}"
    for key, fn in answer.items():
        if not isinstance(key, str) or not key:
            return f"returned the operator name {key!r}, expected a non-empty str"
        if not callable(fn):
            return f"returned a {type(fn).__name__} for {key!r}, expected a callable mapper"
        if key in owners:
            return f"claims {key!r}, which plugin {owners[key]!r} claims already"
    return None


def is_plain_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def text_or_empty(value: object) -> str:
    return value if isinstance(value, str) else ""


def declared_emulated(eps: Iterable[Any]) -> dict[str, frozenset[str]]:
    """Distribution name -> the backend names it declares emulated (entry points
    of :data:`EMULATED_GROUP`; ``""``: entry points without a distribution)."""
    out: dict[str, set[str]] = {}
    for ep in eps:
        out.setdefault(getattr(getattr(ep, "dist", None), "name", "") or "", set()).add(ep.name)
    return {k: frozenset(v) for k, v in out.items()}


def emulated_problem(backend: Backend, plugin: PluginRecord, declared: bool) -> str | None:
    """Why ``backend`` is unusable because its two statements of being emulated
    disagree, or ``None``.  ``declared``: its distribution names it (or the
    entry point of its plugin) in :data:`EMULATED_GROUP`.  Declared but
    ``emulated = False`` is an error: ``backends="auto"`` would leave a real
    engine out, or keep it depending on what was imported first.  ``emulated =
    True`` but not declared is allowed, on the safe side: ``backends="auto"``
    imports the plugin to learn it and leaves the backend out."""
    if not declared or backend.emulated:
        return None
    dist = f"distribution {plugin.distribution!r}" if plugin.distribution else f"plugin {plugin.name!r}"
    return (f"{dist} declares backend {backend.name!r} (or its plugin's entry point {plugin.name!r}) emulated "
            f"in the entry-point group {EMULATED_GROUP!r}, but the backend class says emulated = False; "
            f"make the two agree (an emulated backend is left out of backends='auto')")
