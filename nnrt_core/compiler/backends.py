"""Stage 1: the backends a build may use, from the config and the registry."""
from __future__ import annotations

from nnrt_core.backend.base import Backend
from nnrt_core.config import ScheduleConfig
from nnrt_core.compiler.model import EventLog
from nnrt_core.errors import ConfigError
from nnrt_core.logs import INFO
from nnrt_core.placement import with_backup
from nnrt_core.record import FrozenRecord
from nnrt_core.registry import Registry

__all__ = ["BackendSelection", "select_backends", "host_evaluator"]


class BackendSelection(FrozenRecord):
    """The selected available backends (priority order) and the backup."""

    __slots__ = ("backends", "backup")
    backends: list[Backend]
    backup: Backend | None

    def __init__(self, backends: list[Backend], backup: Backend | None) -> None:
        object.__setattr__(self, "backends", backends)
        object.__setattr__(self, "backup", backup)

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
    if config.backends == "auto":
        records = []
        for r in registry.available_backends():
            if r.backend is not None and r.backend.emulated and r.name != config.backup:
                events.add("backend_skipped", r.name, f"backend {r.name!r} left out of backends='auto': it emulates "
                           f"a device on the host; name it in backends to use it", level=INFO)
            else:
                records.append(r)
        for r in registry.backends.values():
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
    backends = [r.backend for r in records if r.backend is not None]
    if not backends and backup is None:
        raise ConfigError("no usable backend: every selected backend is unavailable and no backup is set")
    selection = BackendSelection(backends, backup)
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
