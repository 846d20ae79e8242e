"""The plugin contract: pluggy hook specifications.

A plugin is a module (or object) registered under an entry point of group
``nnrt.backends`` or ``nnrt.schedulers`` that implements some of these hooks,
marked with :data:`hookimpl`::

    # my_backend/plugin.py
    from nnrt_core.plugin_api import hookimpl
    from my_backend.backend import MyBackend

    @hookimpl
    def nnrt_backends():
        return [MyBackend]

and in the plugin's ``pyproject.toml``::

    [project.entry-points."nnrt.backends"]
    mybackend = "my_backend.plugin"

See ``docs/plugins.md`` for the whole contract and :mod:`nnrt_core.plugin_api`
for everything a plugin may import.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import pluggy

if TYPE_CHECKING:
    from nnrt_core.backend.base import Backend
    from nnrt_core.placement.scheduler import Scheduler

__all__ = ["PROJECT", "hookspec", "hookimpl", "BackendSpec", "SchedulerSpec", "FrontendSpec"]

PROJECT = "nnrt"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


class BackendSpec:
    """Hooks of the ``nnrt.backends`` entry-point group."""

    @hookspec
    def nnrt_backends(self) -> "Sequence[type[Backend]]":
        """Return the :class:`~nnrt_core.backend.Backend` subclasses this
        plugin provides.  Each is instantiated once, with no arguments, by the
        registry; an exception there marks that backend unavailable."""


class SchedulerSpec:
    """Hooks of the ``nnrt.schedulers`` entry-point group."""

    @hookspec
    def nnrt_schedulers(self) -> "Sequence[type[Scheduler]]":
        """Return the :class:`~nnrt_core.placement.Scheduler` subclasses this
        plugin provides (placement strategies selected by
        ``ScheduleConfig.scheduler``)."""


class FrontendSpec:
    """Optional hooks, of a plugin in either group, for the model frontends."""

    @hookspec
    def nnrt_tflite_custom_ops(self) -> "Mapping[str, Callable[[Any], None]]":
        """Return ``{custom operator name: mapper}`` for TFLite custom operators
        this plugin claims (a mapper is ``fn(ctx: OpContext) -> None``, as for
        ``nnrt_core.frontends.tflite.register_op``).  Called only when a model
        has custom operators no registered mapper claims; a plugin that raises
        or returns anything else is reported in the frontend's error, never
        used (docs/tflite.md)."""
