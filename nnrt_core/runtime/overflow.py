"""What a run does when a partition reports that its reduced-precision
stores overflowed (:class:`~nnrt_core.errors.NumericOverflowError`, an fp16
NPU's float-status flag), by ``ScheduleConfig.on_overflow``:

* ``"warn"``: the run returns the saturated result; the first overflow of
  each partition is a ``numeric_overflow`` event of the plan (and a logged
  warning), later ones are counted (:attr:`OverflowGuard.counts`);
* ``"raise"``: :class:`ExecutionError` naming the partition and the node;
* ``"fallback"``: the run is surveyed again with every overflow collected,
  the plan is rebuilt with those partitions' nodes on the backup (``replan``:
  :meth:`nnrt_core.compiler.plan.RunPlan.replan`) and the run repeated on the
  new plan, which later runs keep.  Without a way to replan it raises.

The executor calls :meth:`OverflowGuard.step` from its run loops; the check
costs nothing in a run without overflow (the partition raises)."""
from __future__ import annotations

import copy
import threading
from typing import Any, Callable, Mapping, Sequence

from nnrt_core.errors import ExecutionError, NumericOverflowError
from nnrt_core.logs import get_logger

#: (an ExecutionStep, its error) and an Executor: the executor imports this module
Step = Any
Executor = Any

__all__ = ["OverflowGuard", "Refit", "Survey", "describe", "MAX_REFITS"]

log = get_logger("nnrt.session")

#: rebuilds one fallback may take (an overflow hidden by an upstream one shows after the first)
MAX_REFITS = 4


class Refit(Exception):
    """Raised out of a run's loop under ``"fallback"``: the executor surveys and replans (internal)."""


def describe(err: NumericOverflowError, backend: str) -> str:
    """``partition 'p' on backend 'b' (node 'n')``."""
    node = f", node {err.node!r}" if err.node else ""
    return f"partition {err.partition!r} on backend {backend!r}{node}"


class Survey:
    """The overflow handler of a surveying run: collects every overflow and lets the run go on."""

    def __init__(self) -> None:
        self.seen: list[tuple[Step, NumericOverflowError]] = []

    def step(self, st: Step, err: NumericOverflowError) -> Mapping[str, Any]:
        self.seen.append((st, err))
        return err.outputs


class OverflowGuard:
    """The ``on_overflow`` policy of one plan.  ``events``: the plan's event
    log (``add(kind, backend, message, nodes)``); ``replan(overflows)``: a new
    executor with the overflowing partitions moved (``None``: cannot)."""

    def __init__(self, policy: str, events: Any,
                 replan: Callable[[Sequence[tuple[Step, NumericOverflowError]]], Executor] | None,
                 why_not: str = "") -> None:
        self.policy, self.events, self.replan, self.why_not = policy, events, replan, why_not
        #: partition name -> runs that overflowed in it (``"warn"``)
        self.counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def step(self, st: Step, err: NumericOverflowError) -> Mapping[str, Any]:
        """The outputs a run continues with after ``st`` overflowed, or raises."""
        where = describe(err, st.backend.name)
        if self.policy == "fallback" and self.replan is not None:
            raise Refit()
        if self.policy == "warn":
            with self._lock:
                n = self.counts[err.partition] = self.counts.get(err.partition, 0) + 1
            if n == 1:
                self.events.add("numeric_overflow", st.backend.name,
                                f"{where}: fp16 overflow, result saturated (on_overflow='warn'): {err}",
                                [err.node] if err.node else [])
            return err.outputs
        why = f" and cannot fall back: {self.why_not}" if self.policy == "fallback" else ""
        raise ExecutionError(f"{where} overflowed its reduced-precision storage{why}: {err} "
                             f"(on_overflow={self.policy!r}; 'warn' returns the saturated result)") from err

    def refit(self, executor: Executor, run: Callable[[Executor], list[Any]]) -> list[Any]:
        """``"fallback"``: survey ``executor``'s run (``run(executor)``) for
        every overflowing partition, replan without them and run again."""
        for _ in range(MAX_REFITS):
            survey = copy.copy(executor)  # the same steps, another handler
            survey.overflow = collector = Survey()
            results = run(survey)
            if not collector.seen:
                return results
            with self._lock:
                executor = self.replan(collector.seen)  # type: ignore[misc]  # fallback has a replan
        raise ExecutionError(f"fp16 overflow persisted after {MAX_REFITS} fallbacks to the backup: "
                             + "; ".join(describe(e, st.backend.name) for st, e in collector.seen))
