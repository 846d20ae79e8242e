"""A partition compiled into one ``openvino.CompiledModel``.

Runs take an idle ``InferRequest`` from the partition's pool (one is made
when none is idle, so concurrent runs never share one).  Inputs are handed
over without a copy (``set_input_tensor(Tensor(array, shared_memory=True))``:
OpenVINO reads the numpy buffers in place); outputs are copied out of the
request, so a returned array is never overwritten by the next run.  The
request is driven with ``infer()`` on tensors already set: the Python
wrapper's ``infer(inputs)`` spends ~40 us per call inspecting its argument,
more than a one-node model's whole run.  A run under a
watched :class:`RunControl` (deadline, cancel) is cancelled by the control's
stop through ``InferRequest.cancel``.  ``run_async`` runs on worker
threads of the plugin.
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Mapping, Sequence

import numpy as np

from nnrt_openvino._core import CompiledPartition, ExecutionError, RunControl, current_control, get_logger
from nnrt_openvino.capability import first_line
from nnrt_openvino.runtime import import_openvino

__all__ = ["OvPartition", "run_pool"]

log = get_logger("nnrt.openvino")

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def run_pool() -> ThreadPoolExecutor:
    """The worker threads of ``run_async`` (one per core, at least 2), started on first use."""
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(max(2, os.cpu_count() or 2), thread_name_prefix="nnrt-openvino")
    return _pool


class OvPartition(CompiledPartition):
    """One compiled OpenVINO model (see the module docstring)."""

    def __init__(self, backend: Any, name: str, input_names: Sequence[str], output_names: Sequence[str],
                 compiled: Any, onnx_bytes: bytes, info: dict[str, Any]) -> None:
        self.backend = backend
        self.name = name
        self.input_names = list(input_names)
        self.output_names = list(output_names)
        self.compiled = compiled
        self.onnx_bytes = onnx_bytes  #: the portable form (offline files, another machine)
        self._info = info
        self._in = _input_order(compiled.inputs, self.input_names, name)
        self._out = _output_ports(compiled.outputs, self.output_names, name)
        self._ov = import_openvino()
        self._strings = {i: "string" in str(p.get_element_type()) for i, p in enumerate(compiled.outputs)}
        self._idle: list[Any] = []
        self._lock = threading.Lock()
        self._idle.append(compiled.create_infer_request())

    # ------------------------------------------------------------ requests
    def _take(self) -> tuple[Any, Any]:
        """(an idle request, the compiled model it belongs to)."""
        with self._lock:
            compiled = self.compiled
            if self._idle:
                return self._idle.pop(), compiled
        return compiled.create_infer_request(), compiled

    def _give(self, request: Any, compiled: Any) -> None:
        """Back to the pool, unless its compiled model was replaced meanwhile."""
        with self._lock:
            if compiled is self.compiled:
                self._idle.append(request)

    def idle_requests(self) -> list[Any]:
        """The infer requests waiting for a run (a snapshot)."""
        with self._lock:
            return list(self._idle)

    def _error(self, e: BaseException) -> ExecutionError:
        """The error of a failed run; the compiled model is replaced first.

        After a run whose shape inference failed, OpenVINO 2026.4's CPU graph
        answers the same input shapes with the last good run's outputs, on
        every request of that compiled model (seen with a Reshape to a bad
        shape), so the partition compiles its ONNX form again."""
        try:
            fresh = self.backend.compile_bytes(self.onnx_bytes, self._info["device"], self._info["config"])
        except Exception as again:  # keep the old one; the next failure tries again
            log.warning("openvino: partition %s could not be recompiled after a failed run: %s", self.name, again)
        else:
            with self._lock:
                self.compiled, self._idle = fresh, []
            self._info["recompiled_after_failure"] = self._info.get("recompiled_after_failure", 0) + 1
        return ExecutionError(f"partition {self.name!r} on backend 'openvino' ({self._info['device']}) failed: "
                              f"{type(e).__name__}: {first_line(e)}")

    # ----------------------------------------------------------------- run
    def run(self, inputs: Mapping[str, Any], control: RunControl | None = None) -> dict[str, Any]:
        if control is not None and control.watched:
            return self._run_controlled(inputs, control)
        request, compiled = self._take()
        try:
            kept = self._bind(request, inputs)  # alive until the run is over: the request reads their memory
            request.infer()
            result = self._results(request)
            del kept
        except Exception as e:  # the request is dropped with its compiled model
            raise self._error(e) from e
        self._give(request, compiled)
        return result

    def _bind(self, request: Any, inputs: Mapping[str, Any]) -> list[np.ndarray]:
        """Hand our arrays to ``request`` as its input tensors, without a copy
        (``Tensor(array, shared_memory=True)``; a non-contiguous array is made
        contiguous first; a read-only or string array is copied).  Returns the
        arrays shared: the caller keeps them alive until the run is over (an
        OpenVINO tensor on shared memory does not keep its numpy array alive,
        and a contiguous copy made here would be freed before the request reads it)."""
        ov = self._ov
        kept: list[np.ndarray] = []
        for i, name in enumerate(self._in):
            x = inputs[name]
            if not isinstance(x, np.ndarray):
                x = np.asarray(x)
            if x.dtype.kind in "OUS" or not x.flags.writeable:  # OpenVINO shares writable numeric buffers only
                request.set_input_tensor(i, ov.Tensor(np.ascontiguousarray(x) if x.dtype.kind not in "OUS" else x))
                continue
            if not x.flags.c_contiguous:
                x = np.ascontiguousarray(x)
            kept.append(x)
            request.set_input_tensor(i, ov.Tensor(x, shared_memory=True))
        return kept

    def _run(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        return self.run(inputs, current_control())

    def _results(self, request: Any) -> dict[str, Any]:
        """Copies of the request's outputs (the request's own buffers are
        overwritten by its next run)."""
        out = {}
        for name, i in zip(self.output_names, self._out):
            t = request.get_output_tensor(i)
            out[name] = np.array(t.str_data if self._strings[i] else t.data, copy=True)
        return out

    def _run_controlled(self, inputs: Mapping[str, Any], control: RunControl) -> dict[str, Any]:
        """A synchronous run the control's stop cancels (``InferRequest.cancel``
        from the watchdog or the canceller: OpenVINO stops between operations
        and ``infer`` raises).  A request that was cancelled is dropped, never
        reused: a late cancel must not hit the next run."""
        where = f"partition {self.name!r} on backend 'openvino'"
        control.check(lambda: f"{where} (before it started)")
        request, compiled = self._take()
        remove = control.on_stop(request.cancel)
        failure: BaseException | None = None
        try:
            kept = self._bind(request, inputs)  # alive until the run is over: the request reads their memory
            request.infer()
            result = self._results(request)
            del kept
        except Exception as e:
            failure = e
        finally:
            remove()
        if control.stopped():
            raise control.error(f"{where}; OpenVINO cancelled the run") from failure
        if failure is not None:
            raise self._error(failure) from failure
        self._give(request, compiled)
        return result

    def run_async(self, inputs: Mapping[str, Any], control: RunControl | None = None) -> "Future[dict[str, Any]]":
        """The run on one of the plugin's worker threads (OpenVINO releases the
        GIL while it infers); errors and the control's stop arrive through the
        future.  Not OpenVINO's completion callback: a failed request calls it
        as if it had succeeded, with the previous run's outputs in place."""
        return run_pool().submit(self.run, inputs, control)

    # ------------------------------------------------------------- reports
    def serialize(self) -> bytes:
        return self.backend.pack(self)

    def describe(self) -> dict[str, Any]:
        return dict(self._info, infer_requests=len(self.idle_requests()))

    def note(self, key: str, value: Any) -> None:
        self._info[key] = value


def _input_order(ports: Any, names: list[str], partition: str) -> list[str]:
    """Our input name for each OpenVINO input port: by tensor name, else by
    position (ONNX's frontend keeps the inputs' order; an input that is also
    an output may carry the output's name)."""
    ports = list(ports)
    if len(ports) != len(names):
        raise ExecutionError(f"partition {partition!r}: OpenVINO's compiled model has {len(ports)} inputs, "
                             f"the partition {len(names)}")
    order = []
    for i, p in enumerate(ports):
        found = [t for t in p.get_names() if t in names]
        order.append(found[0] if found else names[i])
    if len(set(order)) != len(order):
        raise ExecutionError(f"partition {partition!r}: OpenVINO's inputs do not map one to one onto {names}")
    return order


def _output_ports(ports: Any, names: list[str], partition: str) -> list[int]:
    """The OpenVINO output port of each of our outputs: by tensor name, else by position."""
    ports = list(ports)
    by_name = {t: i for i, p in enumerate(ports) for t in p.get_names()}
    if len(ports) != len(names) and any(n not in by_name for n in names):
        raise ExecutionError(f"partition {partition!r}: OpenVINO's compiled model has {len(ports)} outputs, "
                             f"the partition {len(names)}")
    return [by_name.get(n, i) for i, n in enumerate(names)]
