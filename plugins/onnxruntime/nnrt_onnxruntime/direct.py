"""The direct run of a host partition (``CompiledPartition.direct_run``): the
session's single partition called per run without the generic layers.

One closure made at build: ``InferenceSession.run`` with the output names
decided at build on the feeds as given (ORT's CPU provider reads them in
place and returns new arrays), the outputs named in a new dict, a failure
turned into the partition's :class:`ExecutionError`.  With adaptive threads
the run's thread budget picks the session, as ``OrtPartition.run`` does."""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from nnrt_core.plugin_api import CORES, thread_budget

__all__ = ["direct_runner"]

Run = Callable[[list[str], Mapping[str, Any], Any], list[Any]]


def direct_runner(run: Run, for_threads: Callable[[int], Run] | None, outputs: Sequence[str],
                  error: Callable[[BaseException], Exception],
                  fed: Mapping[str, Any] | None = None) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """``inputs -> {name: output}`` of ``outputs``, in that order, through
    ``run(outputs, inputs, None)``; ``for_threads(budget)`` gives the run of a
    budget below the core count (``None``: the threads are fixed); ``fed``:
    weights fed as inputs on every run (a warm start, see :mod:`.offline`)."""
    out, names = list(outputs), tuple(outputs)
    if fed:
        inner = direct_runner(run, for_threads, outputs, error)
        weights = dict(fed)
        return lambda inputs: inner({**weights, **inputs})
    if for_threads is None:
        def direct(inputs: Mapping[str, Any]) -> dict[str, Any]:
            try:
                return dict(zip(names, run(out, inputs, None)))
            except Exception as e:
                raise error(e) from e
        return direct
    budget_of, cores = thread_budget, CORES

    def adaptive(inputs: Mapping[str, Any]) -> dict[str, Any]:
        budget = budget_of()
        try:
            outs = (run if budget is None or budget >= cores else for_threads(budget))(out, inputs, None)
        except Exception as e:
            raise error(e) from e
        return dict(zip(names, outs))
    return adaptive
