"""The base classes every backend builds on.

Template-method style: public methods (``capability``, ``compile``,
``availability``...) validate and wrap errors; the private ``_method`` is the
backend's job.  A backend that keeps tensors in host memory (numpy arrays)
only needs ``_supports`` and ``_compile``.

Lifecycle of a partition::

    backend.capability(graph, options)   -> Capability  (which nodes it takes)
    backend.compile(subgraph, options)   -> CompiledPartition
    compiled.run({name: tensor}[, control]) -> {name: tensor}   (control: deadline,
                                                          cancellation, memory budget)
    compiled.serialize() / backend.load_compiled(blob, options)   (model cache,
                                                                   offline models)
"""
from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping, Sequence

import numpy as np

from nnrt_core.errors import CompileError, ExecutionError, NnrtError
from nnrt_core.ir import Graph, Node
from nnrt_core.logs import get_logger
from nnrt_core.record import FrozenRecord, Record
from nnrt_core.control import RunControl, accepts_control, enter, leave

if TYPE_CHECKING:  # concurrent.futures imports logging: only asynchronous runs import it
    from concurrent.futures import Future

__all__ = [
    "DeviceInfo",
    "CompileOptions",
    "Capability",
    "CompiledPartition",
    "Backend",
    "describe_partition",
    "estimated_seconds_of",
]

log = get_logger("nnrt.backend")


class DeviceInfo(FrozenRecord):
    """One device a backend can run on."""

    __slots__ = ("id", "name", "type", "properties", "precisions", "available", "reason")
    id: str  #: stable id within the backend, e.g. "cpu:0", "npu:0"
    name: str
    type: str  #: "cpu", "gpu", "npu", ...
    properties: Mapping[str, Any]
    precisions: tuple[str, ...]
    available: bool
    reason: str | None  #: why the device is unavailable

    def __init__(self, id: str, name: str, type: str, properties: Mapping[str, Any] | None = None,
                 precisions: tuple[str, ...] = ("fp32",), available: bool = True, reason: str | None = None) -> None:
        for k, v in (("id", id), ("name", name), ("type", type), ("precisions", precisions), ("available", available),
                     ("reason", reason), ("properties", {} if properties is None else properties)):
            object.__setattr__(self, k, v)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "type": self.type,
            "precisions": list(self.precisions),
            "available": self.available,
            "reason": self.reason,
            "properties": dict(self.properties),
        }


class CompileOptions(FrozenRecord):
    """What a backend is asked to honour when compiling (from ScheduleConfig)."""

    __slots__ = ("precision", "num_threads", "performance_mode", "priority", "device", "extra", "serializable")
    precision: str
    num_threads: int  #: 0 = backend default
    performance_mode: str
    priority: str
    device: str | None  #: device id or name; None = backend default
    extra: Mapping[str, Any]  #: per-backend extension attributes
    #: the partition will be stored in the model cache or a machine-specific
    #: session file (``ScheduleConfig.machine_specific``): a backend may keep a
    #: form that loads faster on this machine only (e.g. ORT's optimized graph)
    serializable: bool

    def __init__(self, precision: str = "fp32", num_threads: int = 0, performance_mode: str = "none",
                 priority: str = "medium", device: str | None = None, extra: Mapping[str, Any] | None = None,
                 serializable: bool = False) -> None:
        for k, v in (("precision", precision), ("num_threads", num_threads), ("performance_mode", performance_mode),
                     ("priority", priority), ("device", device), ("extra", {} if extra is None else extra),
                     ("serializable", serializable)):
            object.__setattr__(self, k, v)


class Capability(Record):
    """A backend's answer to "which of these nodes can you run?"."""

    __slots__ = ("backend", "supported", "rejected", "fault")
    backend: str
    supported: set[str]
    rejected: dict[str, str]  #: node name -> reason
    #: set by ``Backend.capability`` when the backend's own check raised or answered
    #: garbage: every node is then rejected with this reason
    fault: str | None

    def __init__(self, backend: str, supported: set[str] | None = None, rejected: dict[str, str] | None = None,
                 fault: str | None = None) -> None:
        self.backend, self.fault = backend, fault
        self.supported = set() if supported is None else supported
        self.rejected = {} if rejected is None else rejected

    def supports(self, node_name: str) -> bool:
        return node_name in self.supported

    def reason(self, node_name: str) -> str | None:
        return self.rejected.get(node_name)


class CompiledPartition(abc.ABC):
    """A partition compiled by one backend, ready to run many times.

    ``run`` must be safe to call from several threads at once.
    """

    def __init__(self, backend: "Backend", graph: Graph) -> None:
        self.backend = backend
        self.name = graph.name
        self.input_names = [v.name for v in graph.inputs]
        self.output_names = [v.name for v in graph.outputs]

    def run(self, inputs: Mapping[str, Any], control: RunControl | None = None) -> dict[str, Any]:
        """Run on ``inputs`` (host arrays or this backend's device tensors).

        ``control`` (optional) carries the run's deadline, cancellation and
        memory budget: while ``_run`` runs it is the thread's
        :func:`~nnrt_core.control.current_control`; a backend that
        never looks at it still works (the executor checks between partitions)."""
        prev = enter(control) if control is not None else None
        try:
            return self._run(inputs)
        except NnrtError:
            raise
        except Exception as e:
            raise ExecutionError(
                f"partition {self.name!r} on backend {self.backend.name!r} failed: "
                f"{type(e).__name__}: {e}"
            ) from e
        finally:
            if control is not None:
                leave(prev)

    @abc.abstractmethod
    def _run(self, inputs: Mapping[str, Any]) -> dict[str, Any]: ...

    def run_async(self, inputs: Mapping[str, Any], control: RunControl | None = None) -> "Future[dict[str, Any]]":
        """Submit a run; backends with device queues override this."""
        from concurrent.futures import Future  # imports logging: not at module import
        fut: Future[dict[str, Any]] = Future()
        try:
            takes = control is not None and accepts_control(self.run)  # a subclass may override run(inputs)
            fut.set_result(self.run(inputs, control=control) if takes else self.run(inputs))
        except BaseException as e:  # delivered through the future
            fut.set_exception(e)
        return fut

    def direct_run(self, outputs: Sequence[str]) -> Callable[[Mapping[str, Any]], dict[str, Any]] | None:
        """Optional: ``run(inputs)`` without a control as one callable made at build
        (a session's single partition is called through it): a fresh dict of
        ``outputs`` (``output_names`` reordered) every call, errors as ``run``'s, no
        ``NumericOverflowError``, the thread budget honoured.  ``None``: ``run`` is used."""
        return None

    def prepare_thread_budget(self, threads: int) -> None:
        """Get ready to run requests with a budget of ``threads`` (see
        :mod:`nnrt_core.runtime.thread_budget`), so that the first such run costs no
        set-up; called by streams.  Nothing to do for most backends."""

    def warm_up(self) -> None:
        """Pay the first run's one-time costs now (called once at build, after
        every partition compiled): lazy imports, thread pools, arenas, the
        runtime's first-call set-up.  Keep it cheap and bounded, never a full
        run on large inputs; nothing to do for most backends."""

    def serialize(self) -> bytes | None:
        """Bytes ``Backend.load_compiled`` can turn back into this partition,
        or ``None`` when the backend cannot cache compiled partitions."""
        return None

    def describe(self) -> dict[str, Any]:
        """Backend-specific facts for reports (estimated cost, device...)."""
        return {}

    def estimated_seconds(self) -> float | None:
        """Latency of one run from the backend's cost model (simulated device
        time), or ``None`` when it has none (then schedulers measure)."""
        return None


class Backend(abc.ABC):
    """Base class of every backend.

    Subclasses set the class attributes and implement ``_supports`` (or
    ``_capability`` for whole-graph decisions) and ``_compile``.
    """

    #: unique backend name used in configs ("numpy", "onnxruntime", ...)
    name: ClassVar[str]
    version: ClassVar[str] = "0"
    #: kind of device this backend targets ("cpu", "gpu", "npu", ...)
    device_type: ClassVar[str] = "cpu"
    #: higher runs first when ``backends="auto"``
    default_priority: ClassVar[int] = 0
    #: ScheduleConfig options this backend honours (others trigger a warning)
    supported_options: ClassVar[frozenset[str]] = frozenset({"num_threads"})
    #: True when tensors live in host memory as numpy arrays (no copies needed
    #: between two such backends)
    host_memory: ClassVar[bool] = True
    #: True when this backend can evaluate any constant sub-graph it accepts on
    #: the host at build time (constant folding and calibration use it)
    evaluates_constants: ClassVar[bool] = False
    #: True when ``compile`` never changes the graph it is given (nor what its
    #: partition keeps of it): a partition that is the whole session graph is
    #: then handed over without a copy (``PartitionPlan.to_graph(share=True)``)
    compiles_read_only: ClassVar[bool] = False
    #: True when every array a partition returns is new (never a view of an
    #: input it was given): the executor then skips its check that session
    #: outputs share no memory with the caller's feeds (``unaliased``)
    fresh_outputs: ClassVar[bool] = False
    #: True when the backend declines nodes whose shapes are not static: a
    #: session with free input dimensions then plans again per input signature
    #: (``ScheduleConfig.specialize_shapes``)
    needs_static_shapes: ClassVar[bool] = False
    #: True when the backend emulates a device on the host (its speed is not
    #: the device's): ``backends="auto"`` leaves it out, and it takes part only
    #: when a config names it
    emulated: ClassVar[bool] = False

    # -- availability and devices -------------------------------------------
    def availability(self) -> str | None:
        """``None`` when usable here, else a human-readable reason."""
        try:
            reason = self._availability()
        except Exception as e:
            return f"availability check failed: {type(e).__name__}: {e}"
        if reason is not None and not (isinstance(reason, str) and reason):
            reason = f"availability check returned {reason!r}; expected None or a reason (str)"
            log.warning("backend %s: %s", self.name, reason)
        return reason

    def _availability(self) -> str | None:
        return None

    def devices(self) -> list[DeviceInfo]:
        return [DeviceInfo(id="cpu:0", name="host CPU", type=self.device_type)]

    def cache_fingerprint(self) -> dict[str, Any]:
        """Stable facts that change what this backend compiles (version,
        devices and their fixed properties): part of the model-cache key.
        Backends with volatile device properties override it."""
        return {"name": self.name, "version": str(self.version),
                "devices": [d.to_dict() for d in self.devices()]}

    def find_device(self, selector: str | None) -> DeviceInfo:
        """The device matching ``selector`` (id or name); first one when None."""
        devs = self.devices()
        if selector is None:
            return devs[0]
        for d in devs:
            if selector in (d.id, d.name):
                return d
        from nnrt_core.errors import ConfigError

        raise ConfigError(
            f"backend {self.name!r} has no device {selector!r}; devices: "
            + ", ".join(f"{d.id} ({d.name})" for d in devs)
        )

    # -- capability ---------------------------------------------------------
    def capability(self, graph: Graph, options: CompileOptions) -> Capability:
        """Which nodes of ``graph`` this backend can run, with a reason for
        each rejected node.  A check that raises or answers garbage rejects
        every node (``Capability.fault`` says why; placement reports it); an
        ``NnrtError`` it raises on purpose (a bad device option) propagates."""
        nodes = {n.name for n in graph.nodes}
        try:
            cap = self._capability(graph, options)
            fault = _capability_fault(cap, nodes)
        except NnrtError:  # on purpose (e.g. a ConfigError for an unknown device): the caller's to see
            raise
        except Exception as e:
            cap, fault = None, f"capability check raised {type(e).__name__}: {e}"
        if fault is not None or not isinstance(cap, Capability):
            log.warning("backend %s: %s; it runs none of %s's nodes", self.name, fault, graph.name)
            return Capability(self.name, set(), {n: f"capability check failed: {fault}" for n in sorted(nodes)},
                              fault)
        cap.supported = set(cap.supported)
        for n in graph.nodes:
            if n.name not in cap.supported and n.name not in cap.rejected:
                cap.rejected[n.name] = "not claimed by the backend"
        return cap

    def _capability(self, graph: Graph, options: CompileOptions) -> Capability:
        cap = Capability(self.name)
        crashed: list[str] = []
        for node in graph.nodes:
            try:
                reason = self._supports(node, options)
            except Exception as e:  # a buggy check must not break placement
                reason = f"capability check failed: {type(e).__name__}: {e}"
                crashed.append(node.name)
            if reason is None:
                cap.supported.add(node.name)
            else:
                cap.rejected[node.name] = str(reason)
        if crashed:  # one log line per graph, not per node
            log.warning("backend %s: the capability check raised on %d node(s) (first %s: %s); they fall back",
                        self.name, len(crashed), crashed[0], cap.rejected[crashed[0]])
        return cap

    def _supports(self, node: Node, options: CompileOptions) -> str | None:
        """``None`` if ``node`` can run here, else the reason it cannot."""
        return "backend implements no capability check"

    # -- compile --------------------------------------------------------------
    def compile(self, graph: Graph, options: CompileOptions) -> CompiledPartition:
        """Compile a partition (a self-contained graph)."""
        try:
            compiled = self._compile(graph, options)
        except NnrtError as e:
            if isinstance(e, CompileError):
                raise
            raise CompileError(f"backend {self.name!r} could not compile partition {graph.name!r}: {e}") from e
        except Exception as e:
            raise CompileError(
                f"backend {self.name!r} could not compile partition {graph.name!r}: "
                f"{type(e).__name__}: {e}"
            ) from e
        if not isinstance(compiled, CompiledPartition):
            raise CompileError(f"backend {self.name!r} returned {type(compiled).__name__} for partition "
                               f"{graph.name!r}; expected a CompiledPartition")
        return compiled

    @abc.abstractmethod
    def _compile(self, graph: Graph, options: CompileOptions) -> CompiledPartition: ...

    # -- cost model (optional) ------------------------------------------------
    def estimate_cost(self, graph: Graph, options: CompileOptions) -> dict[str, float] | None:
        """Estimated seconds per node of ``graph`` (a self-contained partition
        of supported nodes) from the backend's own cost model, or ``None`` when
        it has none (schedulers then measure).  A failing model answers None."""
        try:
            return self._estimate_cost(graph, options)
        except Exception as e:  # a broken cost model must not break placement
            log.warning("backend %s: cost model failed on %s: %s", self.name, graph.name, e)
            return None

    def _estimate_cost(self, graph: Graph, options: CompileOptions) -> dict[str, float] | None:
        return None

    @property
    def has_cost_model(self) -> bool:
        """True when the backend implements ``_estimate_cost`` (schedulers ask
        it before building partitions for it)."""
        return type(self)._estimate_cost is not Backend._estimate_cost

    def load_compiled(self, blob: bytes, options: CompileOptions) -> CompiledPartition:
        """Rebuild a partition from ``CompiledPartition.serialize()`` output."""
        raise CompileError(f"backend {self.name!r} cannot load compiled partitions")

    # -- tensors --------------------------------------------------------------
    def allocate(self, shape: Sequence[int], dtype: Any, device: str | None = None) -> Any:
        """A tensor of ``shape``/``dtype`` in this backend's memory."""
        return np.empty(tuple(shape), dtype=np.dtype(dtype))

    def to_device(self, array: np.ndarray, device: str | None = None) -> Any:
        """Copy a host array into this backend's memory (identity for host backends)."""
        return array

    def to_host(self, tensor: Any) -> np.ndarray:
        """Copy a tensor of this backend back to a host numpy array."""
        return tensor

    def owns(self, tensor: Any) -> bool:
        """True when ``tensor`` already lives in this backend's memory."""
        return isinstance(tensor, np.ndarray) if self.host_memory else False

    def host_view(self, tensor: Any) -> np.ndarray | None:
        """``tensor``'s memory as a writable host array without a copy (host
        memory, or device memory mapped into the host), else ``None``."""
        return tensor if isinstance(tensor, np.ndarray) else None

    def prepare_build(self, options: Mapping[str, Any]) -> None:
        """Called once per build that selected this backend, right after the
        selection and before the model loads, with the backend's options
        (``ScheduleConfig.backend_options``): start what makes the build and
        its first run cheaper, e.g. warm-up work on a background thread.
        Keep it cheap; a failure is logged, not raised.  Nothing to do for most
        backends."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} v{self.version}>"


def _capability_fault(cap: object, nodes: set[str]) -> str | None:
    """What is wrong with a backend's capability answer for a graph of
    ``nodes``, or ``None`` when it is well formed."""
    if not isinstance(cap, Capability):
        return f"capability check returned {type(cap).__name__}; expected a Capability"
    if not isinstance(cap.supported, (set, frozenset)) or not isinstance(cap.rejected, dict):
        return (f"capability answer holds supported={type(cap.supported).__name__}, "
                f"rejected={type(cap.rejected).__name__}; expected a set and a dict")
    unknown = (set(cap.supported) | set(cap.rejected)) - nodes
    if unknown:
        return f"capability answer names unknown nodes {sorted(map(str, unknown))[:5]}"
    if not all(isinstance(r, str) for r in cap.rejected.values()):
        return "capability answer gives rejection reasons that are not strings"
    return None


def describe_partition(part: CompiledPartition) -> dict[str, Any]:
    """``part.describe()``, or an ``error`` entry when the backend's report
    raises or is not a dict (reports never break on a buggy plugin)."""
    try:
        details = part.describe()
    except Exception as e:
        return {"error": f"describe() raised {type(e).__name__}: {e}"}
    return dict(details) if isinstance(details, Mapping) else {"error": f"describe() returned {details!r}"}


def estimated_seconds_of(part: CompiledPartition) -> float | None:
    """``part.estimated_seconds()`` as a finite non-negative float, or ``None``
    when the backend has no cost model, raises or answers garbage (logged)."""
    try:
        sec = part.estimated_seconds()
        if sec is None:
            return None
        value = float(sec)
    except Exception as e:
        log.warning("partition %s: estimated_seconds() failed: %s: %s", part.name, type(e).__name__, e)
        return None
    if not (0.0 <= value < float("inf")):
        log.warning("partition %s: estimated_seconds() returned %r; ignored", part.name, sec)
        return None
    return value
