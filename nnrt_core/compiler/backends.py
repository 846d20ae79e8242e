"""Stage 1: the backends a build may use, from the config and the registry."""
from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

from nnrt_core.backend.base import Backend, CompileOptions
from nnrt_core.config import ScheduleConfig
from nnrt_core.compiler.model import EventLog
from nnrt_core.errors import ConfigError
from nnrt_core.logs import INFO
from nnrt_core.placement import with_backup
from nnrt_core.record import FrozenRecord
from nnrt_core.registry import Registry

__all__ = ["BackendSelection", "select_backends", "host_evaluator"]


class BackendSelection(FrozenRecord):
    """The selected available backends (priority order), the backup, and the
    :class:`CompileOptions` of each candidate: computed once here, from the
    config, and handed to every stage that asks a backend anything."""

    __slots__ = ("backends", "backup", "options")
    backends: list[Backend]
    backup: Backend | None
    options: Mapping[str, CompileOptions]  #: backend name -> its options, for every candidate

    def __init__(self, backends: list[Backend], backup: Backend | None,
                 options: Mapping[str, CompileOptions] | None = None) -> None:
        object.__setattr__(self, "backends", backends)
        object.__setattr__(self, "backup", backup)
        object.__setattr__(self, "options", MappingProxyType(dict(options or {})))

    @property
    def candidates(self) -> list[Backend]:
        """Every backend a node may be placed on: selected ones, backup last."""
        return with_backup(self.backends, self.backup)

    def named(self, name: str) -> Backend:
        for b in self.candidates:
            if b.name == name:
                return b
        raise ConfigError(f"backend {name!r} is not selected")


def select_backends(config: ScheduleConfig, registry: Registry, events: EventLog) -> BackendSelection:
    """Resolve ``config.backends`` (names or ``"auto"``) and ``config.backup``;
    unavailable backends and ignored options become events (errors with
    ``strict``)."""
    backup: Backend | None = None
    if config.backup is not None:
        rec = registry.backend(config.backup)
        if not rec.available:
            raise ConfigError(f"backup backend {config.backup!r} is unavailable: {rec.reason}")
        backup = rec.backend
    if config.backends == "auto":  # the plugins their distributions declare emulated are not imported
        records = registry.available_backends(emulated=False)
        for name in registry.emulated_backends():
            if name == config.backup:  # the emulated backup stays a backend of its own priority, as named
                rec = registry.backend(name)
                records = sorted([*records, rec], key=lambda r: (-r.priority, r.name))
                continue
            events.add("backend_skipped", name, f"backend {name!r} left out of backends='auto': it emulates "
                       f"a device on the host; name it in backends to use it", level=INFO)
        for r in registry.loaded_backends().values():
            if not r.available:
                events.add("backend_unavailable", r.name, f"backend {r.name!r} skipped (auto): {r.reason}")
    else:
        records = []
        for name in config.backends:
            rec = registry.backend(name)  # unknown name -> ConfigError listing installed ones
            if rec.available:
                records.append(rec)
            else:
                target = f"falling back to {config.backup!r}" if config.backup else "no backup configured"
                events.add("backend_unavailable", name, f"backend {name!r} is unavailable ({rec.reason}); {target}")
    selected = {r.name for r in records} | ({config.backup} if config.backup else set())
    for r in registry.conflicts:  # the same name from two plugins: say which one was left out
        if r.name in selected:
            events.add("backend_unavailable", r.name, f"backend {r.name!r} of plugin {r.plugin!r} is not used: "
                                                      f"{r.reason}")
    backends = [r.backend for r in records if r.backend is not None]
    if not backends and backup is None:
        raise ConfigError("no usable backend: every selected backend is unavailable and no backup is set")
    selection = BackendSelection(backends, backup, {b.name: config.compile_options(b.name)
                                                    for b in with_backup(backends, backup)})
    for b in selection.candidates:
        ignored = sorted(config.requested_options() - b.supported_options)
        if ignored:
            msg = f"backend {b.name!r} does not support option(s) {ignored}"
            if config.strict:
                raise ConfigError(msg + " (strict=True)")
            events.add("option_ignored", b.name, msg + "; ignored")
    return selection


def host_evaluator(selection: BackendSelection, registry: Registry) -> Backend | None:
    """The backend that evaluates constant sub-graphs at build time: the first
    candidate declaring ``evaluates_constants``, else any available backend in
    the registry that does (``None``: constants stay unfolded)."""
    for b in selection.candidates:
        if b.evaluates_constants:
            return b
    return registry.host_evaluator()
