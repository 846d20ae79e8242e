"""Shape specialization (MNN's resize): a model with free input dimensions is
compiled again for the concrete shapes of each input signature it runs with,
so backends that need static shapes take part.  Plans are kept per signature
in a bounded LRU; weights are shared through the process-wide weight store."""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, Generic, Mapping, Sequence, TypeVar

from nnrt_core.compiler.build import compile_model
from nnrt_core.compiler.model import CompiledModel, EventLog
from nnrt_core.config import ScheduleConfig
from nnrt_core.errors import InputError, NnrtError
from nnrt_core.ir import TensorType, Value
from nnrt_core.logs import INFO
from nnrt_core.registry import Registry

__all__ = ["Specializations", "Signature", "check_shapes", "free_inputs", "wants_specialization"]

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
    names = ([r.name for r in registry.available_backends() if r.backend is not None and not r.backend.emulated]
             if config.backends == "auto" else list(config.backends))
    records = [registry.find_backend(n) for n in names]
    return any(r is not None and r.available and r.backend is not None and r.backend.needs_static_shapes
               for r in records)


class Specializations(Generic[Plan]):
    """The plans of one model specialized per input signature.

    ``make_plan`` turns a :class:`CompiledModel` into what a run needs (the
    session's executor); ``lookup`` is the per-run fast path (a tuple of
    shapes and a dict probe), ``specialize`` builds on a miss.  A signature
    whose build fails is remembered with ``None``: its runs take the generic
    plan, visibly (a ``specialization_failed`` event)."""

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
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._plans)

    def signatures(self) -> list[Signature]:
        """The cached signatures, least recently used first."""
        return list(self._plans)

    def plan_for(self, feeds: Mapping[str, Any]) -> Plan | None:
        """The plan of validated ``feeds``' signature, built on first sight
        (``None``: that signature cannot be specialized)."""
        sig = tuple([feeds[n].shape for n in self.names])
        plan = self._plans.get(sig, _MISSING)
        if plan is _MISSING:
            return self.specialize(sig)
        if sig != self._latest:  # most recently used last (a repeat of the latest costs nothing)
            with self._lock:
                if sig in self._plans:
                    self._plans.move_to_end(sig)
                self._latest = sig
        return plan

    def specialize(self, sig: Signature) -> Plan | None:
        """Build (once) and cache the plan for ``sig``; ``None`` when it cannot be built."""
        with self._lock:
            if sig in self._plans:
                return self._plans[sig]
            shapes = {name: shape for name, shape in zip(self.names, sig)}
            plan = self._build(shapes)
            self._plans[sig] = plan
            self._latest = sig
            while len(self._plans) > self.capacity:
                old, _ = self._plans.popitem(last=False)
                self.events.add("specialization_evicted", "-",
                                f"specialized plan for {_text(dict(zip(self.names, old)))} evicted "
                                f"(max_specializations={self.capacity})")
            return plan

    def _build(self, shapes: dict[str, tuple[int, ...]]) -> Plan | None:
        config = self.config.replace(input_shapes={**self.config.input_shapes, **shapes})
        try:
            model = compile_model(self.source, config, self.registry)
        except NnrtError as e:
            self.events.add("specialization_failed", "-",
                            f"cannot plan for input shapes {_text(shapes)} ({type(e).__name__}: "
                            f"{str(e).splitlines()[0]}); runs with these shapes use the dynamic plan")
            return None
        backends = sorted({st.backend.name for st in model.steps})
        self.events.add("specialized", "-", f"planned for input shapes {_text(shapes)}: "
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
