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
        #: decided at build, read per run: (input port, our name) and (our name, output port, a string output)
        self._binds = list(enumerate(self._in))
        self._reads = [(n, i, self._strings[i]) for n, i in zip(self.output_names, self._out)]
        self._tensor = self._ov.Tensor
        self._idle: list[Any] = []
        self._lock = threading.Lock()
        self._idle.append(compiled.create_infer_request())
        #: ``run`` without a watched control: the same closure ``direct_run`` hands out
        self._plain = self.direct_run(self.output_names)

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
        return self._plain(inputs)

    def direct_run(self, outputs: Sequence[str]) -> Any:
        """``run`` without a control as one closure: the binding and the output
        copies of :meth:`_bind` / :meth:`_results` inline (``_take`` / ``_give``
        too: the per-call path of small models), the ports decided here.  A
        failed run drops its request with the compiled model (:meth:`_error`)."""
        port = dict(zip(self.output_names, self._out))
        reads = [(n, port[n], self._strings[port[n]]) for n in outputs]
        binds, tensor, lock, error, ndarray = self._binds, self._tensor, self._lock, self._error, np.ndarray

        def direct(inputs: Mapping[str, Any]) -> dict[str, Any]:
            with lock:
                compiled, idle = self.compiled, self._idle
                request = idle.pop() if idle else None
            if request is None:
                request = compiled.create_infer_request()
            try:
                set_input = request.set_input_tensor
                for i, name in binds:
                    x = inputs[name]
                    flags = x.flags if type(x) is ndarray else None
                    if flags is not None and flags.writeable and flags.c_contiguous and x.dtype.kind not in "OUS":
                        set_input(i, tensor(x, shared_memory=True))
                    else:  # anything else: _bind's copies
                        self._bind_one(set_input, i, x)
                request.infer()
                get, out = request.get_output_tensor, {}
                for n, i, strings in reads:
                    out[n] = np.array(get(i).str_data, copy=True) if strings else get(i).data.copy()
            except Exception as e:
                raise error(e) from e
            with lock:
                if compiled is self.compiled:
                    idle.append(request)
            return out
        return direct

    def _bind(self, request: Any, inputs: Mapping[str, Any]) -> None:
        """Hand our arrays to ``request`` as its input tensors, without a copy
        (``Tensor(array, shared_memory=True)``).  A non-contiguous, read-only
        or string array is copied into a tensor OpenVINO owns: a shared tensor
        does not keep its array alive, so a contiguous copy shared with it
        would be freed before ``infer`` reads it (garbage inputs, seen with a
        strided feed)."""
        set_input = request.set_input_tensor
        for i, name in self._binds:
            self._bind_one(set_input, i, inputs[name])

    def _bind_one(self, set_input: Any, i: int, x: Any) -> None:
        """Input port ``i`` set to ``x``: shared when OpenVINO can read it in place, else a copy it owns."""
        if type(x) is not np.ndarray:
            x = np.asarray(x)
        flags = x.flags
        if flags.writeable and flags.c_contiguous and x.dtype.kind not in "OUS":
            set_input(i, self._tensor(x, shared_memory=True))  # the caller's buffer, read in place
        else:  # OpenVINO shares writable contiguous numeric buffers only; a copy keeps a 0-d array 0-d
            set_input(i, self._tensor(x if flags.c_contiguous or x.dtype.kind in "OUS" else x.copy(order="C")))

    def _run(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        return self.run(inputs, current_control())

    def _results(self, request: Any) -> dict[str, Any]:
        """Copies of the request's outputs (the request's own buffers are
        overwritten by its next run)."""
        out = {}
        get = request.get_output_tensor
        for name, i, strings in self._reads:
            t = get(i)
            out[name] = np.array(t.str_data, copy=True) if strings else t.data.copy()
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
            self._bind(request, inputs)
            request.infer()
            result = self._results(request)
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
