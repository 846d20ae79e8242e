"""A partition compiled into one ``openvino.CompiledModel``.

Runs take an idle ``InferRequest`` from the partition's pool (one is made
when none is idle, so concurrent runs never share one).  Inputs are handed
over without a copy (``set_input_tensor(Tensor(array, shared_memory=True))``:
OpenVINO reads the numpy buffers in place); outputs are copied out of the
request, so a returned array is never overwritten by the next run.  The
request is driven with ``infer()`` on tensors already set: the Python
wrapper's ``infer(inputs)`` spends ~40 us per call inspecting its argument,
more than a one-node model's whole run.  A run under a
watched :class:`RunControl` (deadline, cancel) starts asynchronously and the
control's stop calls ``InferRequest.cancel``.
"""
from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any, Mapping, Sequence

import numpy as np

from nnrt_openvino._core import CompiledPartition, ExecutionError, RunControl, current_control
from nnrt_openvino.capability import first_line
from nnrt_openvino.runtime import import_openvino

__all__ = ["OvPartition"]


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
    def _take(self) -> Any:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return self.compiled.create_infer_request()

    def _give(self, request: Any) -> None:
        with self._lock:
            self._idle.append(request)

    def idle_requests(self) -> list[Any]:
        """The infer requests waiting for a run (a snapshot)."""
        with self._lock:
            return list(self._idle)

    def _error(self, e: BaseException) -> ExecutionError:
        return ExecutionError(f"partition {self.name!r} on backend 'openvino' ({self._info['device']}) failed: "
                              f"{type(e).__name__}: {first_line(e)}")

    # ----------------------------------------------------------------- run
    def run(self, inputs: Mapping[str, Any], control: RunControl | None = None) -> dict[str, Any]:
        if control is not None and control.watched:
            return self._run_controlled(inputs, control)
        request = self._take()
        try:
            self._bind(request, inputs)
            request.infer()
            return self._results(request)
        except ExecutionError:
            raise
        except Exception as e:
            raise self._error(e) from e
        finally:
            self._give(request)

    def _bind(self, request: Any, inputs: Mapping[str, Any]) -> None:
        """Hand our arrays to ``request`` as its input tensors, without a copy
        (``Tensor(array, shared_memory=True)``; a non-contiguous array is made
        contiguous first; a read-only or string array is copied)."""
        ov = self._ov
        for i, name in enumerate(self._in):
            x = inputs[name]
            if not isinstance(x, np.ndarray):
                x = np.asarray(x)
            if x.dtype.kind in "OUS" or not x.flags.writeable:  # OpenVINO shares writable numeric buffers only
                request.set_input_tensor(i, ov.Tensor(np.ascontiguousarray(x) if x.dtype.kind not in "OUS" else x))
                continue
            if not x.flags.c_contiguous:
                x = np.ascontiguousarray(x)
            request.set_input_tensor(i, ov.Tensor(x, shared_memory=True))

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
        where = f"partition {self.name!r} on backend 'openvino'"
        control.check(lambda: f"{where} (before it started)")
        request = self._take()
        remove = control.on_stop(request.cancel)
        try:
            self._bind(request, inputs)
            request.start_async()
            request.wait()
            if control.stopped():
                raise control.error(f"{where}; OpenVINO cancelled the run")
            return self._results(request)
        except ExecutionError:
            raise
        except Exception as e:
            if control.stopped():
                raise control.error(f"{where}; OpenVINO cancelled the run: {first_line(e)}") from e
            raise self._error(e) from e
        finally:
            remove()
            self._give(request)

    def run_async(self, inputs: Mapping[str, Any], control: RunControl | None = None) -> "Future[dict[str, Any]]":
        """Start the run on an idle request and return at once; OpenVINO's
        callback completes the future (``control`` cancels the request)."""
        fut: Future[dict[str, Any]] = Future()
        where = f"partition {self.name!r} on backend 'openvino'"
        try:
            if control is not None:
                control.check(lambda: f"{where} (before it started)")
            request = self._take()
        except BaseException as e:
            fut.set_exception(e)
            return fut
        remove = control.on_stop(request.cancel) if control is not None and control.watched else (lambda: None)

        def done(_userdata: Any) -> None:
            remove()
            try:
                if control is not None and control.stopped():
                    raise control.error(f"{where}; OpenVINO cancelled the run")
                fut.set_result(self._results(request))
            except BaseException as e:
                fut.set_exception(e)
            finally:
                request.set_callback(lambda _u: None, None)
                self._give(request)

        try:
            request.set_callback(done, None)
            self._bind(request, inputs)
            request.start_async()
        except Exception as e:
            remove()
            request.set_callback(lambda _u: None, None)
            self._give(request)
            fut.set_exception(control.error(f"{where}; cancelled") if control is not None and control.stopped()
                              else self._error(e))
        return fut

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
