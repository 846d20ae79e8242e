"""Guarded calls of the backends' optional set-up hooks: each only saves a
later step its one-time costs, so a failing plugin is logged, never raised
(``docs/plugins.md``, "What a faulty plugin costs")."""
from __future__ import annotations

from typing import Any, Mapping

from nnrt_core.backend.base import Backend, CompiledPartition
from nnrt_core.logs import get_logger

__all__ = ["prepare_build", "prepare_thread_budget", "warm_up_partition"]

log = get_logger("nnrt.backend")


def prepare_build(backend: Backend, options: Mapping[str, Any] | None) -> None:
    """``backend.prepare_build(options)`` (its ``ScheduleConfig.backend_options``
    entry, ``{}`` without one); a failure is logged, not raised (preparing
    only makes the build and its first run cheaper)."""
    try:
        backend.prepare_build(dict(options or {}))
    except Exception as e:
        log.warning("backend %s: prepare_build() failed: %s: %s", backend.name, type(e).__name__, e)


def warm_up_partition(part: CompiledPartition) -> None:
    """``part.warm_up()``; a failure is logged, not raised (warming up only
    saves the first run its set-up)."""
    try:
        part.warm_up()
    except Exception as e:
        log.warning("partition %s: warm_up() failed: %s: %s", part.name, type(e).__name__, e)


def prepare_thread_budget(part: CompiledPartition, threads: int) -> None:
    """``part.prepare_thread_budget(threads)``; a failure is logged, not raised
    (preparing only saves the first run its set-up)."""
    try:
        part.prepare_thread_budget(threads)
    except Exception as e:
        log.warning("partition %s: prepare_thread_budget(%d) failed: %s: %s", part.name, threads,
                    type(e).__name__, e)
