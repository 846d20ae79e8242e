"""Deadlines and cancellation for ORT partitions: a run under a watched
:class:`~nnrt_core.control.RunControl` gets its own ``RunOptions``
whose ``terminate`` flag is set from another thread (the control's watchdog
at the deadline, or the canceller), so ORT stops before its next node.  Its
``log_severity_level`` is 4 (fatal only): ORT logs no error line for a run
stopped so, nor for a run under a ``quiet`` control."""
from __future__ import annotations

from typing import Any, Mapping, Protocol

from nnrt_core.errors import ExecutionError
from nnrt_core.plugin_api import RunControl

__all__ = ["run_terminable"]


class _Terminable(Protocol):
    name: str
    backend: Any

    def run_with_options(self, inputs: Mapping[str, Any], options: Any) -> dict[str, Any]: ...


def run_terminable(part: _Terminable, inputs: Mapping[str, Any], control: RunControl) -> dict[str, Any]:
    """``part.run_with_options(inputs, run_options)``, terminated when ``control`` stops;
    a terminated run raises the control's error naming the partition."""
    import onnxruntime as ort

    where = f"partition {part.name!r} on backend {part.backend.name!r}"
    control.check(lambda: f"{where} (before it started)")
    options = ort.RunOptions()
    # a terminated run is reported by our error, not ORT's log line; a quiet one (RunControl(quiet=True):
    # a candidate plan on synthetic inputs) fails without a line on stderr, its error raised as ever
    options.log_severity_level = 4
    remove = control.on_stop(lambda: setattr(options, "terminate", True))
    try:
        return part.run_with_options(inputs, options)
    except ExecutionError as e:
        if control.stopped():
            raise control.error(f"{where}; ONNX Runtime terminated the run: {e}") from e
        raise
    finally:
        remove()
