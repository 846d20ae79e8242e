"""The protocol's handlers, shared by REST, gRPC and Ray Serve replicas: they
take decoded requests (:class:`InferRequest`) and give results or raise a
:class:`~nnrt_serve.errors.ServeError`; the transports only encode."""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nnrt_core import __version__
from nnrt_core.control import DEFAULT_MAX_TENSOR_BYTES
from nnrt_serve.batcher import ModelRunner
from nnrt_serve.errors import BadRequest, ServeError, as_serve_error
from nnrt_serve.metrics import ServerMetrics
from nnrt_serve.repository import ModelRepository, ServedModel
from nnrt_serve.tensors import datatype_of

__all__ = ["InferRequest", "InferInput", "InferResult", "Handlers", "EXTENSIONS", "SERVER_NAME"]

SERVER_NAME = "nnrt"
#: protocol extensions this server speaks (Triton's names where they are Triton's)
EXTENSIONS = ["binary_tensor_data", "nnrt_placement", "metrics"]


@dataclass
class InferInput:
    name: str
    datatype: str
    shape: tuple[int, ...]
    data: np.ndarray


@dataclass
class InferRequest:
    """A decoded inference request (what every transport hands the handlers)."""

    model: str
    version: str | None
    inputs: list[InferInput]
    id: str | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    outputs: list[dict[str, Any]] = field(default_factory=list)  #: [{"name", "parameters"}]; [] = all
    timeout: float | None = None  #: seconds, from the transport (gRPC deadline); parameters["timeout"] is µs


@dataclass
class InferResult:
    model: str
    version: str
    id: str | None
    outputs: list[tuple[str, np.ndarray, dict[str, Any]]]  #: (name, array, requested output's parameters)


def tensor_meta(info: Any, batching: bool) -> dict[str, Any]:
    """The metadata of one input/output: free dimensions are -1."""
    shape = [d if isinstance(d, int) else -1 for d in (info.shape or ())]
    if batching and shape:
        shape[0] = -1
    return {"name": info.name, "datatype": datatype_of(info.dtype), "shape": shape}


class Handlers:
    """The protocol's operations over one repository, on the running event loop."""

    def __init__(self, repository: ModelRepository, metrics: ServerMetrics | None = None) -> None:
        self.repository = repository
        self.metrics = metrics or ServerMetrics()
        self.runners: dict[str, ModelRunner] = {}

    # ------------------------------------------------------------- start
    async def load(self) -> None:
        """Compile every model (in a thread, so health answers meanwhile)."""
        await asyncio.to_thread(self.repository.load_all)
        self.loaded()

    def loaded(self) -> None:
        """Record the models' load in the metrics (after ``repository.load_all()``)."""
        for m in self.repository.models.values():
            self.metrics.model_loaded(m)

    def runner(self, m: ServedModel) -> ModelRunner:
        """The queue of ready model ``m``, started on the running loop at its first request."""
        runner = self.runners.get(m.name)
        if runner is None:
            runner = self.runners[m.name] = ModelRunner(m.name, m.session, m.settings, m.batching,
                                                        self.metrics.executed)
            self.metrics.queue_depth.labels(m.name).set_function(lambda r=runner: len(r.queue))
        return runner

    async def close(self) -> None:
        for r in self.runners.values():
            await r.close()

    # ------------------------------------------------------------ health
    def server_live(self) -> bool:
        return True

    def server_ready(self) -> bool:
        return self.repository.ready

    def server_metadata(self) -> dict[str, Any]:
        return {"name": SERVER_NAME, "version": __version__, "extensions": list(EXTENSIONS)}

    def model_ready(self, name: str, version: str | None = None) -> bool:
        return self.repository.get(name, version).ready

    def model_metadata(self, name: str, version: str | None = None) -> dict[str, Any]:
        m = self.repository.get_ready(name, version)
        sess = m.session
        return {"name": m.name, "versions": [m.version], "platform": "nnrt",
                "inputs": [tensor_meta(i, m.batching) for i in sess.inputs],
                "outputs": [tensor_meta(o, m.batching) for o in sess.outputs]}

    def model_config(self, name: str, version: str | None = None) -> dict[str, Any]:
        """Triton's ``/config`` answer, the parts that apply (clients such as perf_analyzer read it)."""
        m = self.repository.get_ready(name, version)
        meta = self.model_metadata(name, version)
        strip = (lambda s: s[1:]) if m.batching else (lambda s: s)
        return {"name": m.name, "platform": "nnrt", "backend": "nnrt", "max_batch_size": m.settings.max_batch_size
                if m.batching else 0,
                "input": [{"name": t["name"], "data_type": "TYPE_" + t["datatype"], "dims": strip(t["shape"])}
                          for t in meta["inputs"]],
                "output": [{"name": t["name"], "data_type": "TYPE_" + t["datatype"], "dims": strip(t["shape"])}
                           for t in meta["outputs"]],
                "dynamic_batching": {"max_queue_delay_microseconds": int(m.settings.max_queue_delay_ms * 1000)}
                if m.batching else None,
                "instance_group": [{"count": m.settings.instances, "kind": "KIND_AUTO"}],
                "parameters": {"nnrt_config": m.config.to_dict()}}

    def placement(self, name: str, version: str | None = None) -> dict[str, Any]:
        """nnrt's extension: where every node of the model runs, its partitions and the placement events."""
        m = self.repository.get_ready(name, version)
        s = m.session
        return {"name": m.name, "version": m.version, "file": m.path.name,
                "load_seconds": round(m.load_seconds, 4), "batching": m.batching,
                "partitions": [p.to_dict() for p in s.partitions],
                "placement": [r.to_dict() for r in s.placement_report],
                "events": [e.to_dict() for e in s.events], "config": s.config.to_dict()}

    # ------------------------------------------------------------- infer
    def tensor_limit(self, name: str) -> int:
        """The largest tensor (bytes) a request to ``name`` may send: its session's memory budget."""
        m = self.repository.models.get(name)
        budget = m.session.default_control.max_tensor_bytes if m is not None and m.session is not None else None
        return budget or DEFAULT_MAX_TENSOR_BYTES

    def refused(self, model: str, protocol: str, error: BaseException) -> ServeError:
        """Count a request refused before it was decoded (bad body, size); the error to answer with."""
        err = as_serve_error(error)
        label = model if model in self.repository.models else "<unknown>"
        self.metrics.answered(label, protocol, err.status, 0.0)
        return err

    async def infer(self, request: InferRequest, protocol: str) -> InferResult:
        """Run one request; metrics count it, whatever the answer."""
        t0 = time.perf_counter()
        label = request.model if request.model in self.repository.models else "<unknown>"
        try:
            result = await self._infer(request)
        except asyncio.CancelledError:
            self.metrics.answered(label, protocol, 499, time.perf_counter() - t0)
            raise
        except Exception as e:
            err = as_serve_error(e)
            self.metrics.answered(label, protocol, err.status, time.perf_counter() - t0)
            raise err from None
        self.metrics.answered(label, protocol, 200, time.perf_counter() - t0)
        return result

    async def _infer(self, request: InferRequest) -> InferResult:
        m = self.repository.get_ready(request.model, request.version)
        runner = self.runner(m)
        feeds = check_inputs(m, request.inputs)
        wanted = requested_outputs(m, request.outputs)
        outputs = await runner.infer(feeds, self._deadline(m, request))
        return InferResult(m.name, m.version, request.id, [(n, np.asarray(outputs[n]), p) for n, p in wanted])

    def _deadline(self, m: ServedModel, request: InferRequest) -> float | None:
        limits = [t for t in (request.timeout, timeout_parameter(request.parameters),
                              m.settings.default_timeout_ms / 1000.0 or None) if t is not None]
        return time.perf_counter() + min(limits) if limits else None


def timeout_parameter(parameters: dict[str, Any]) -> float | None:
    """The request's ``timeout`` parameter (microseconds, as Triton's clients send it) in seconds."""
    t = parameters.get("timeout")
    if t is None:
        return None
    if isinstance(t, bool) or not isinstance(t, (int, float)) or t <= 0:
        raise BadRequest(f"parameter 'timeout' must be a positive number of microseconds, got {t!r}")
    return t / 1e6


def check_inputs(model: ServedModel, inputs: list[InferInput]) -> dict[str, np.ndarray]:
    """The feeds of ``inputs``, checked against the model: names, datatypes, shapes."""
    infos = model.input_infos()
    given: dict[str, np.ndarray] = {}
    for t in inputs:
        info, want = infos.get(t.name, (None, None))
        if info is None:
            raise BadRequest(f"unexpected input {t.name!r}; model {model.name!r} takes {list(infos)}")
        if t.name in given:
            raise BadRequest(f"input {t.name!r} is given twice")
        if t.datatype != want:
            raise BadRequest(f"input {t.name!r}: datatype {t.datatype} but model {model.name!r} expects {want}")
        shape = list(info.shape or ())
        if len(t.shape) != len(shape) or any(isinstance(d, int) and d != g for d, g in zip(shape, t.shape)):
            expected = [d if isinstance(d, int) else -1 for d in shape]
            if model.batching and expected:
                expected[0] = -1
            raise BadRequest(f"input {t.name!r}: shape {list(t.shape)} but model {model.name!r} expects {expected} "
                             "(-1: any size)")
        given[t.name] = t.data
    missing = [n for n in infos if n not in given]
    if missing:
        raise BadRequest(f"missing input(s) {missing}; model {model.name!r} takes {list(infos)}")
    try:
        return dict(model.session.validate_feeds(given))
    except ServeError:
        raise
    except Exception as e:
        raise BadRequest(str(e)) from None


def requested_outputs(model: ServedModel, outputs: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(name, parameters) of the outputs to return: the requested ones, or all."""
    names = [o.name for o in model.session.outputs]
    if not outputs:
        return [(n, {}) for n in names]
    out = []
    for o in outputs:
        if o.get("name") not in names:
            raise BadRequest(f"unknown output {o.get('name')!r}; model {model.name!r} has outputs {names}")
        out.append((o["name"], dict(o.get("parameters") or {})))
    return out
