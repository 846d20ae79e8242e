"""Running compiled partitions in dependency order.

Tensors cross a partition boundary without a copy when producer and consumer
both keep tensors in host memory; otherwise the producer's backend copies to
the host and the consumer's backend copies to its device.  Copies are counted.
Values are released right after their last reader.

When some partition runs on a device backend (``host_memory = False``) and
there is more than one partition, runs are dependency-driven: every ready
device partition is submitted with ``CompiledPartition.run_async`` (its
device queue works in the background) while ready host partitions run on the
calling thread, so independent branches on different devices overlap.
"""
from __future__ import annotations

import threading
from collections import deque
import time
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, Sequence

import numpy as np

from nnrt_core.backend.base import Backend, CompiledPartition
from nnrt_core.errors import NumericOverflowError
from nnrt_core.ir.types import ValueType
from nnrt_core.record import Record
from nnrt_core.control import RunControl, accepts_control
from nnrt_core.runtime.direct import direct_call
from nnrt_core.runtime.feeds import FeedSpec
from nnrt_core.runtime.output_check import DeclaredShapeWatch, OutputCheck
from nnrt_core.runtime.overflow import Refit
from nnrt_core.runtime.tensor import Tensor
from nnrt_core.runtime.transfers import submitted, to_device, to_host

if TYPE_CHECKING:
    from concurrent.futures import Future

__all__ = ["ExecutionStep", "Executor", "StepObserver", "unaliased"]


class StepObserver(Protocol):
    """What ``Executor.run_observed`` reports to (the profiler)."""

    def run_step(self, index: int, step: "ExecutionStep", args: dict[str, Any]) -> Mapping[str, Any]:
        """Run ``step.compiled`` on ``args`` (timing it) and return its outputs."""
        ...

    def transfer(self, value: str, direction: str, backend: Backend, start: float, end: float,
                 tensor: Any) -> None:
        """A copy of ``value`` made by ``backend`` (``direction`` ``to_host`` or
        ``to_device``) between ``start`` and ``end`` (``time.perf_counter``)."""
        ...


class ExecutionStep(Record):
    """One compiled partition in execution order, with its backend and boundaries."""

    __slots__ = ("compiled", "backend", "inputs", "outputs", "release", "types", "declared")
    compiled: CompiledPartition
    backend: Backend
    inputs: list[str]
    outputs: list[str]
    release: list[str]  #: values dead after this step
    #: types of the outputs as the graph computes them, where known (what :class:`OutputCheck` checks)
    types: Mapping[str, ValueType]
    #: graph outputs whose declared shape says more than inference confirmed, and the
    #: report of a run that contradicts it (see :class:`DeclaredShapeWatch`); ``None``: none
    declared: "DeclaredShapeWatch | None"

    def __init__(self, compiled: CompiledPartition, backend: Backend, inputs: list[str], outputs: list[str],
                 release: list[str] | None = None, types: Mapping[str, ValueType] | None = None,
                 declared: "DeclaredShapeWatch | None" = None) -> None:
        self.compiled, self.backend, self.inputs, self.outputs = compiled, backend, inputs, outputs
        self.release = [] if release is None else release
        self.types = {} if types is None else types
        self.declared = declared

    def direct_checks(self) -> tuple[list[Any] | None, Callable[[Any], Any]]:
        """(``OutputCheck.tests`` to compare inline, or ``None`` when the model's
        unconfirmed declarations must see every run; the check to call otherwise)."""
        if self.declared is not None:
            return None, self.output_check()
        check = OutputCheck(self.backend.name, self.compiled.name, self.outputs, self.types, self.backend.host_memory)
        return check.tests, check.check

    def output_check(self) -> Callable[[Any], Any]:
        """The check of what this step's partition returns (``outs`` -> ``outs``
        or :class:`ExecutionError`; see :class:`OutputCheck`), followed by the
        comparison with the model's unconfirmed declarations, if any."""
        check = OutputCheck(self.backend.name, self.compiled.name, self.outputs, self.types,
                            self.backend.host_memory).fast
        watch = self.declared
        if watch is None:
            return check
        return lambda outs: watch(check(outs))


class Executor:
    """Runs ``steps`` in order; thread-safe (no state shared between runs
    except the copy counters)."""

    def __init__(self, steps: Sequence[ExecutionStep], graph_outputs: Sequence[str],
                 constants: Mapping[str, np.ndarray], graph_inputs: Sequence[str] = (),
                 feed_specs: Sequence[FeedSpec] | None = None) -> None:
        self.steps = list(steps)
        self.graph_outputs = list(graph_outputs)
        self.constants = dict(constants)  # graph outputs that are initializers
        self._lock = threading.Lock()
        self.host_device_copies = 0
        #: per step: the check of its partition's outputs (plugins are data too;
        #: ``benchmarks/bench_output_checks.py`` swaps in no-ops to measure their cost)
        self.checks = [st.output_check() for st in self.steps]
        keep = set(graph_outputs)
        last: dict[str, int] = {}
        for i, st in enumerate(self.steps):
            for name in st.inputs:
                last[name] = i
        for name, i in last.items():
            if name not in keep:
                self.steps[i].release.append(name)
        #: the graph outputs out of the single partition's checked dict (a C call; one output: the value)
        self._pick = itemgetter(*self.graph_outputs) if self.graph_outputs else None
        self._many = len(self.graph_outputs) > 1
        only = self.steps[0] if len(self.steps) == 1 else None
        # whole model on one host-memory partition that reads exactly the feeds
        self._single = (only.compiled if only is not None and only.backend.host_memory
                        and not self.constants and set(graph_outputs) <= set(only.outputs)
                        and set(only.inputs) == set(graph_inputs) else None)
        made_by = {n: st.backend for st in self.steps for n in st.outputs}
        #: graph outputs that may be views of a feed: a graph input passed through, or produced
        #: by a backend that does not declare ``fresh_outputs`` (checked by ``unaliased``)
        self._aliasable = tuple(i for i, n in enumerate(self.graph_outputs) if n not in self.constants
                                and (n not in made_by or not made_by[n].fresh_outputs))
        #: ``Session.run``'s path for plain host feeds and no control (:mod:`nnrt_core.runtime.direct`):
        #: ``feeds -> outputs`` (``None``: feeds the full check must see) through the single partition's
        #: ``direct_run`` when its outputs are the graph outputs, none a view of a feed, and ``feed_specs``
        #: (the graph inputs' tests) are given; ``None`` otherwise, or once ``run`` is replaced
        run = _direct(self._single, only.outputs if only is not None else [], self.graph_outputs, self._aliasable)
        self.direct = (direct_call(feed_specs, run, *only.direct_checks())
                       if run is not None and feed_specs is not None and len(feed_specs) == len(graph_inputs) else None)
        # dependency graph of the steps, for overlapped (device + host) runs
        producer: dict[str, int] = {}
        self._deps: list[set[int]] = []
        for i, st in enumerate(self.steps):
            self._deps.append({producer[n] for n in st.inputs if n in producer})
            for n in st.outputs:
                producer[n] = i
        self._users: list[list[int]] = [[] for _ in self.steps]
        for i, deps in enumerate(self._deps):
            for d in deps:
                self._users[d].append(i)
        self._readers: dict[str, int] = {}
        for st in self.steps:
            for n in set(st.inputs):
                self._readers[n] = self._readers.get(n, 0) + 1
        #: overlap device partitions with host ones (see the module docstring)
        self.overlap = len(self.steps) > 1 and any(not st.backend.host_memory for st in self.steps)
        #: every step on a host-memory backend: runs fed host arrays need no copies and no owner
        #: bookkeeping (:meth:`_run_host`); per step (index, inputs, outputs, values dead after it)
        self._host_plan = (None if any(not st.backend.host_memory for st in self.steps) else
                           [(i, tuple(st.inputs), tuple(st.outputs), tuple(st.release))
                            for i, st in enumerate(self.steps)])
        # per step: run / run_async take a RunControl (partitions written before it do not)
        self._ctl_run = [accepts_control(st.compiled.run) for st in self.steps]
        self._ctl_async = [accepts_control(st.compiled.run_async) for st in self.steps]
        #: what a run does when a partition reports an fp16 overflow (``step(step, error)`` returns
        #: the outputs to go on with, or raises; :mod:`nnrt_core.runtime.overflow`); ``None``: raise
        self.overflow: Any = None

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "run":  # a wrapper of run (tests, tools) must see every run: no direct path
            self.__dict__["direct"] = None
        object.__setattr__(self, name, value)

    def run(self, feeds: Mapping[str, Any], owners: Mapping[str, Backend] | None = None,
            keep_on_device: bool = False, control: RunControl | None = None) -> list[Any]:
        """Outputs in graph-output order.  ``owners`` names the device backend
        holding a feed (zero-copy inputs); with ``keep_on_device`` outputs
        produced on a device come back as :class:`~nnrt_core.runtime.tensor.Tensor`
        without a copy to the host.  ``control`` (deadline, cancellation,
        memory budget) goes to every partition that takes it and is checked
        before each partition.  A partition's fp16 overflow is handled by
        :attr:`overflow` (a ``"fallback"`` runs again on a new plan)."""
        single = self._single
        try:
            if single is not None and not owners:  # the whole model on one host partition: decided at build
                try:
                    outs = (single.run(feeds) if control is None or not self._ctl_run[0]
                            else single.run(feeds, control=control))
                except NumericOverflowError as e:
                    outs = self._overflowed(0, e)
                outs, pick = self.checks[0](outs), self._pick
                results = [] if pick is None else list(pick(outs)) if self._many else [pick(outs)]
            elif self._host_plan is not None and not owners:
                results = self._run_host(feeds, control)
            elif self.overlap:
                results = self._run_overlapped(feeds, owners, keep_on_device, control)
            else:
                results = self._run_sequential(feeds, owners, keep_on_device, control=control)
        except Refit:
            return self.overflow.refit(self, lambda ex: ex.run(feeds, owners, keep_on_device, control))
        return unaliased(results, feeds, self._aliasable) if self._aliasable else results

    def _overflowed(self, index: int, err: NumericOverflowError) -> Mapping[str, Any]:
        """The outputs step ``index`` goes on with after its overflow (the policy's), or raises."""
        if self.overflow is None:
            raise err
        return self.overflow.step(self.steps[index], err)

    def _call(self, index: int, args: dict[str, Any], control: RunControl | None,
              asynchronous: bool = False) -> Any:
        """``run`` (or ``run_async``) of step ``index`` after checking ``control``,
        handing it the control when that method takes one."""
        st = self.steps[index]
        method, takes = ((st.compiled.run_async, self._ctl_async[index]) if asynchronous
                         else (st.compiled.run, self._ctl_run[index]))
        try:
            if control is None:
                return method(args)
            control.check(lambda: f"partition {st.compiled.name!r} on backend {st.backend.name!r} (before it started)")
            return method(args, control=control) if takes else method(args)
        except NumericOverflowError as e:
            return self._overflowed(index, e)

    def _run_sequential(self, feeds: Mapping[str, Any], owners: Mapping[str, Backend] | None = None,
                        keep_on_device: bool = False, observer: "StepObserver | None" = None,
                        control: RunControl | None = None) -> list[Any]:
        """Steps in order on the calling thread; ``observer`` (profiling)
        runs each step and sees every copy."""
        env: dict[str, Any] = dict(feeds)
        owner: dict[str, Backend | None] = dict(owners) if owners else {}  # absent = host array
        on_host: dict[str, Any] = {}  # host copies of device tensors, made once
        copies = 0
        for index, st in enumerate(self.steps):
            b = st.backend
            args, n = _step_args(st, env, owner, on_host, observer)
            copies += n
            outs = self.checks[index](self._call(index, args, control) if observer is None
                                      else self._observe(index, args, observer))
            for name in st.outputs:
                env[name] = outs[name]
                owner[name] = b
            for name in st.release:
                env.pop(name, None)
                on_host.pop(name, None)
        return self._results(env, owner, on_host, copies, keep_on_device, observer)

    def _run_host(self, feeds: Mapping[str, Any], control: RunControl | None) -> list[Any]:
        """Steps in order when every partition keeps tensors in host memory and
        the feeds are host arrays: no transfers, so only the values move."""
        env: dict[str, Any] = dict(feeds)
        checks, call = self.checks, self._call
        for index, inputs, outputs, release in self._host_plan:  # type: ignore[union-attr]
            outs = checks[index](call(index, {name: env[name] for name in inputs}, control))
            for name in outputs:
                env[name] = outs[name]
            for name in release:
                env.pop(name, None)
        constants = self.constants
        return [constants[name] if name in constants and name not in env else env[name]
                for name in self.graph_outputs]

    def _results(self, env: dict[str, Any], owner: Mapping[str, Backend | None], on_host: dict[str, Any],
                 copies: int, keep_on_device: bool = False, observer: "StepObserver | None" = None) -> list[Any]:
        """The graph outputs (host arrays, or device tensors when kept there);
        adds this run's copies to the counter."""
        results = []
        for name in self.graph_outputs:
            if name in self.constants and name not in env:
                results.append(self.constants[name])
                continue
            x = env[name]
            src = owner.get(name)
            if src is not None and not src.host_memory:
                if keep_on_device:
                    x = Tensor(x, src)
                elif name in on_host:
                    x = on_host[name]
                else:
                    x = to_host(name, src, x, on_host, observer)
                    copies += 1
            results.append(x)
        if copies:
            with self._lock:
                self.host_device_copies += copies
        return results

    def _run_overlapped(self, feeds: Mapping[str, Any], owners: Mapping[str, Backend] | None = None,
                        keep_on_device: bool = False, control: RunControl | None = None) -> list[Any]:
        """Dependency-driven run: device partitions are submitted as soon as
        their inputs exist, host partitions run here meanwhile."""
        from concurrent.futures import FIRST_COMPLETED, wait  # imports logging: only runs with device partitions

        env: dict[str, Any] = dict(feeds)
        owner: dict[str, Backend | None] = dict(owners) if owners else {}
        on_host: dict[str, Any] = {}
        readers = dict(self._readers)
        keep = set(self.graph_outputs)
        waiting = [len(d) for d in self._deps]
        ready_device: deque[int] = deque()
        ready_host: deque[int] = deque()
        pending: dict[Future, int] = {}
        copies = 0

        def make_ready(i: int) -> None:
            (ready_host if self.steps[i].backend.host_memory else ready_device).append(i)

        def prepare(i: int) -> dict[str, Any]:
            nonlocal copies
            st = self.steps[i]
            args, n = _step_args(st, env, owner, on_host)
            copies += n
            for name in set(st.inputs):  # the args hold what this step needs
                readers[name] -= 1
                if readers[name] == 0 and name not in keep:
                    env.pop(name, None)
                    on_host.pop(name, None)
            return args

        def finish(i: int, outs: Mapping[str, Any]) -> None:
            st = self.steps[i]
            outs = self.checks[i](outs)
            for name in st.outputs:
                env[name] = outs[name]
                owner[name] = st.backend
            for u in self._users[i]:
                waiting[u] -= 1
                if waiting[u] == 0:
                    make_ready(u)

        for i, w in enumerate(waiting):
            if w == 0:
                make_ready(i)
        done = 0
        try:
            while done < len(self.steps):
                while ready_device:
                    i = ready_device.popleft()
                    pending[submitted(self.steps[i], self._call(i, prepare(i), control, asynchronous=True))] = i
                if ready_host:
                    i = ready_host.popleft()
                    finish(i, self._call(i, prepare(i), control))
                    done += 1
                    continue
                if not pending:  # pragma: no cover - the steps come from an acyclic partition graph
                    raise RuntimeError("executor: no partition is ready (cyclic partition graph?)")
                finished, _ = wait(list(pending), return_when=FIRST_COMPLETED)
                for fut in sorted(finished, key=lambda f: pending[f]):
                    i = pending.pop(fut)
                    finish(i, self._result(i, fut))
                    done += 1
        except BaseException:
            wait(list(pending))  # never leave device work running on released buffers
            raise
        return self._results(env, owner, on_host, copies, keep_on_device)

    def _observe(self, index: int, args: dict[str, Any], observer: StepObserver) -> Mapping[str, Any]:
        """``observer.run_step`` of step ``index``, an overflow handled like ``_call``'s."""
        try:
            return observer.run_step(index, self.steps[index], args)
        except NumericOverflowError as e:
            return self._overflowed(index, e)

    def _result(self, index: int, fut: Future) -> Mapping[str, Any]:
        """The outputs of step ``index``'s finished ``run_async``."""
        try:
            return fut.result()
        except NumericOverflowError as e:
            return self._overflowed(index, e)

    def run_observed(self, feeds: Mapping[str, Any], observer: StepObserver) -> list[np.ndarray]:
        """``run`` with every partition and copy reported to ``observer``
        (sequential, for profiling; ``run`` itself carries no hooks)."""
        try:
            return unaliased(self._run_sequential(feeds, observer=observer), feeds, self._aliasable)
        except Refit:
            return self.overflow.refit(self, lambda ex: ex.run_observed(feeds, observer))


def unaliased(results: list[Any], feeds: Mapping[str, Any], indices: Sequence[int] | None = None) -> list[Any]:
    """``results`` (those at ``indices``, default all) with every array that
    shares memory with a feed copied.

    A partition may return a view of what it was given (the NumPy backend's
    Identity, Reshape, Squeeze; a graph output that is a graph input): the
    caller then gets an output that changes when it reuses its input buffer,
    and writing to the output would change its input.  ONNX Runtime returns
    fresh arrays; so does a session.  An array that owns its memory can only
    alias a feed by being that feed (written for the per-call cost: ~0.3 us)."""
    fv = feeds.values()
    for i in range(len(results)) if indices is None else indices:
        r = results[i]
        if type(r) is not np.ndarray:
            continue
        owns = r.base is None
        for f in fv:
            if r is f or not owns and type(f) is np.ndarray and np.may_share_memory(r, f):
                results[i] = r.copy()
                break
    return results


def _direct(single: CompiledPartition | None, outputs: list[str], graph_outputs: list[str],
            aliasable: tuple[int, ...]) -> Callable[[Mapping[str, Any]], dict[str, Any]] | None:
    """The ``direct_run`` of the plan's single host partition when its outputs
    are the graph outputs and none may alias a feed, and its ``run`` is not
    replaced on the instance (a spy or wrapper set before the plan was made)."""
    if (single is None or aliasable or sorted(outputs) != sorted(graph_outputs)
            or len(set(graph_outputs)) != len(graph_outputs) or "run" in getattr(single, "__dict__", ())):
        return None
    make = getattr(single, "direct_run", None)
    run = make(list(graph_outputs)) if callable(make) else None
    return run if callable(run) else None


def _step_args(st: ExecutionStep, env: Mapping[str, Any], owner: Mapping[str, Backend | None],
               on_host: dict[str, Any], observer: StepObserver | None = None) -> tuple[dict[str, Any], int]:
    """The inputs of ``st`` in its backend's memory, and how many copies that
    took (a device tensor is copied to the host once per run, then reused)."""
    b = st.backend
    args: dict[str, Any] = {}
    copies = 0
    for name in st.inputs:
        x = env[name]
        src = owner.get(name)  # absent: a host array (feed)
        if src is not b:
            if src is not None and not src.host_memory:
                if name in on_host:
                    x = on_host[name]
                else:
                    x = to_host(name, src, x, on_host, observer)
                    copies += 1
            if not b.host_memory:
                t0 = time.perf_counter() if observer is not None else 0.0
                host_x, x = x, to_device(name, b, x)
                if observer is not None:
                    observer.transfer(name, "to_device", b, t0, time.perf_counter(), host_x)
                copies += 1
        args[name] = x
    return args, copies
