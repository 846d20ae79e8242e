"""Shape specialization (MNN's resize): a model with free input dimensions is
compiled again for the concrete shapes of each input signature it runs with,
so backends that need static shapes take part.  Plans are kept per signature
in a bounded LRU; weights are shared through the process-wide weight store.
Once the LRU is full, a signature seen again is planned on a worker thread
(:mod:`nnrt_core.compiler.background`) while its runs take the dynamic plan."""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any, Callable, Generic, Mapping, Sequence, TypeVar

from nnrt_core.compiler.background import BackgroundBuilds, Courtesy
from nnrt_core.compiler.build import compile_model
from nnrt_core.compiler.model import CompiledModel, EventLog
from nnrt_core.config import ScheduleConfig
from nnrt_core.errors import InputError, NnrtError
from nnrt_core.ir import TensorType, Value
from nnrt_core.logs import INFO
from nnrt_core.registry import Registry

__all__ = ["Specializations", "Signature", "check_shapes", "free_inputs", "wants_specialization",
           "MAX_BACKGROUND_BUILDS"]

#: signatures of one session queued or building in the background at once
MAX_BACKGROUND_BUILDS = 2

#: the shapes of a run's free inputs, in the order of ``Specializations.names``
Signature = tuple[tuple[int, ...], ...]
Plan = TypeVar("Plan")


def free_inputs(inputs: Sequence[Value]) -> list[str]:
    """Names of the tensor inputs whose shape is not fully static."""
    return [v.name for v in inputs if isinstance(v.type, TensorType) and not v.type.is_static]


def wants_specialization(config: ScheduleConfig, registry: Registry) -> bool:
    """Whether sessions of ``config`` plan per input signature: ``specialize_shapes``
    "always", or "auto" with a selectable backend that ``needs_static_shapes``."""
    if config.specialize_shapes != "auto":
        return config.specialize_shapes == "always"
    names = ([r.name for r in registry.available_backends(emulated=False)]
             if config.backends == "auto" else list(config.backends))
    records = [registry.find_backend(n) for n in names]
    return any(r is not None and r.available and r.backend is not None and r.backend.needs_static_shapes
               for r in records)


class Specializations(Generic[Plan]):
    """The plans of one model specialized per input signature.

    Signatures are planned on first sight until ``capacity`` plans are held;
    then a signature is planned when it is seen again, in the background
    (``config.specialize_in_background``, the default: the run that sees it
    again takes the dynamic plan, and the plan is swapped in when its build
    is done) or by that run.  ``make_plan`` turns a :class:`CompiledModel`
    into what a run needs (the session's executor); ``lookup`` is the per-run
    fast path (a tuple of shapes and a dict probe), ``specialize`` builds on a
    miss.  A signature whose build fails is remembered with ``None``: its runs
    take the generic plan, visibly (a ``specialization_failed`` event)."""

    def __init__(self, source: Any, config: ScheduleConfig, registry: Registry, names: Sequence[str],
                 make_plan: Callable[[CompiledModel], Plan], events: EventLog) -> None:
        self.source = source
        self.config = config
        self.registry = registry
        self.names = tuple(names)
        self.make_plan = make_plan
        self.events = events
        self.capacity = config.max_specializations
        self._plans: OrderedDict[Signature, Plan | None] = OrderedDict()
        self._latest: Signature | None = None
        self._lock = threading.Lock()  # the dicts; held briefly, never during a build
        self._build_lock = threading.Lock()  # one build at a time (a signature is built once)
        #: signatures seen once while the cache was full (see ``_worth_planning``)
        self._seen_once: OrderedDict[Signature, None] = OrderedDict()
        self._deferred = False
        self.background: BackgroundBuilds[Signature] | None = (
            BackgroundBuilds(self._build_in_background, MAX_BACKGROUND_BUILDS)
            if config.specialize_in_background else None)

    def __len__(self) -> int:
        return len(self._plans)

    def signatures(self) -> list[Signature]:
        """The cached signatures, least recently used first."""
        return list(self._plans)

    def pending(self) -> list[Signature]:
        """Signatures queued or building in the background."""
        return [] if self.background is None else self.background.pending()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until no background build is pending (``True``) or ``timeout`` seconds passed."""
        return True if self.background is None else self.background.wait(timeout)

    def plan_for(self, feeds: Mapping[str, Any]) -> Plan | None:
        """The plan of validated ``feeds``' signature, built on first sight
        while fewer than ``capacity`` plans are held, else on its second
        sight (:meth:`_worth_planning`); ``None``: the generic plan runs it
        (that signature cannot be specialized, or not yet)."""
        sig = tuple([feeds[n].shape for n in self.names])
        plan = self._plans.get(sig, _MISSING)
        if plan is _MISSING:
            return self.specialize(sig) if self._worth_planning(sig) else None
        if sig != self._latest:  # most recently used last (a repeat of the latest costs nothing)
            with self._lock:
                if sig in self._plans:
                    self._plans.move_to_end(sig)
                self._latest = sig
        return plan

    def _worth_planning(self, sig: Signature) -> bool:
        """Whether a run with the unplanned ``sig`` builds its plan now.

        A full cache would evict a plan for it and pay a whole build (seconds
        on a transformer) for a signature that may never come back, as every
        new sequence length of a text model would: once ``capacity`` plans
        are held, a new signature runs on the generic plan and is planned
        when it is seen again (the seen-once set is bounded too): queued for
        the background (``False``: this run takes the dynamic plan; a full
        queue leaves it seen once, for a later sighting), or by this run.  One
        ``specialization_deferred`` event says so."""
        if len(self._plans) < self.capacity:
            return True
        with self._lock:
            if sig in self._seen_once:
                del self._seen_once[sig]
                if self.background is None:
                    return True
                if self.background.submit(sig):
                    return False
            self._seen_once[sig] = None
            while len(self._seen_once) > 4 * self.capacity:
                self._seen_once.popitem(last=False)
            if not self._deferred:
                self._deferred = True
                how = "in the background" if self.background is not None else "by that run"
                self.events.add("specialization_deferred", "-",
                                f"{self.capacity} specialized plans are held (max_specializations): a new input "
                                f"signature runs on the dynamic plan and is planned {how} when it is seen again",
                                level=INFO)
        return False

    def specialize(self, sig: Signature) -> Plan | None:
        """Build (once) and cache the plan for ``sig``; ``None`` when it cannot be built."""
        with self._build_lock:
            if sig in self._plans:
                return self._plans[sig]
            shapes = {name: shape for name, shape in zip(self.names, sig)}
            plan = self._build(shapes)
            self._store(sig, plan)
            return plan

    def _store(self, sig: Signature, plan: Plan | None) -> None:
        with self._lock:
            self._plans[sig] = plan
            self._latest = sig
            while len(self._plans) > self.capacity:
                old, _ = self._plans.popitem(last=False)
                self.events.add("specialization_evicted", "-",
                                f"specialized plan for {_text(dict(zip(self.names, old)))} evicted "
                                f"(max_specializations={self.capacity})")

    def _build_in_background(self, sig: Signature, courtesy: Courtesy) -> None:
        """The worker thread's build of ``sig``: stored when done (the next run
        with ``sig`` takes it); any error is a ``specialization_failed`` event."""
        t0 = time.perf_counter()
        with self._build_lock:
            if sig in self._plans:
                return
            shapes = {name: shape for name, shape in zip(self.names, sig)}
            try:
                plan = self._build(shapes, "in the background")
            except Exception as e:  # a bug in a plugin: visible, and its runs keep the dynamic plan
                plan = None
                self.events.add("specialization_failed", "-",
                                f"background build for input shapes {_text(shapes)} raised {type(e).__name__}: "
                                f"{e}; runs with these shapes use the dynamic plan")
            with courtesy.holding_locks():  # runs take _lock: no pause while it is held
                if plan is not None:
                    self.events.add("specialization_swapped", "-",
                                    f"plan for {_text(shapes)} built in the background in "
                                    f"{(time.perf_counter() - t0) * 1e3:.0f} ms ({courtesy.waited * 1e3:.0f} ms of "
                                    "it paused while runs were in flight); runs with these shapes use it from now on",
                                    level=INFO)
                self._store(sig, plan)

    def _build(self, shapes: dict[str, tuple[int, ...]], how: str = "") -> Plan | None:
        config = self.config.replace(input_shapes={**self.config.input_shapes, **shapes})
        try:
            model = compile_model(self.source, config, self.registry)
        except NnrtError as e:
            self.events.add("specialization_failed", "-",
                            f"cannot plan for input shapes {_text(shapes)} ({type(e).__name__}: "
                            f"{str(e).splitlines()[0]}); runs with these shapes use the dynamic plan")
            return None
        backends = sorted({st.backend.name for st in model.steps})
        self.events.add("specialized", "-", f"planned {how + ' ' if how else ''}for input shapes {_text(shapes)}: "
                                            f"{len(model.steps)} partition(s) on {', '.join(backends)}",
                        level=INFO)
        return self.make_plan(model)


def check_shapes(names: Sequence[str], shapes: Mapping[str, Sequence[int]]) -> Signature:
    """The signature of explicit ``shapes`` (``Session.reshape``); every free input is needed."""
    unknown = sorted(set(shapes) - set(names))
    missing = [n for n in names if n not in shapes]
    if unknown or missing:
        raise InputError(f"reshape needs a shape for each input with free dimensions {list(names)}; "
                         + (f"unknown {unknown}" if unknown else f"missing {missing}"))
    return tuple(tuple(int(d) for d in shapes[n]) for n in names)


def _text(shapes: Mapping[str, Sequence[int]]) -> str:
    return ", ".join(f"{n}={list(s)}" for n, s in shapes.items())


_MISSING: Any = object()
