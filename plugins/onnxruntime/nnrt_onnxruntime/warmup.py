"""The ORT partition's warm-up at build.

ONNX Runtime's first run of a session pays one-time costs a later run does
not: its kernels' first-call set-up, the thread pool's first wake-up and,
mostly, its arena's growth (first-touch page faults of the intermediates).
With ORT's memory pattern on (ORT's default, and the backend's), the
*second* run at a shape pays again: it allocates the block the first run's
pattern asked for; ``enable_mem_pattern = false`` makes that run a steady one
at the price of every later run (2-8 % on small models, see docs/plugins.md).
The backend option ``warm_up`` says what the warm-up does:

* ``"heap"`` (the default, or ``true``), on a session that runs on the CPU
  provider alone: tune glibc's allocator (:mod:`nnrt_core.runtime.heap`), so
  that the arena's blocks come from the heap and freed pages are reused, and
  prefault :data:`HEAP_BYTES` of heap, so that the arena's first growth lands
  in mapped pages, whatever the input shapes (2-15 ms of page faults on this
  VM, paid on a background thread while the model loads: :func:`begin_heap`,
  started by the backend's ``prepare_build``; the warm-up waits for it);
* ``"run"``: when every input shape is static (in the model, or fixed with
  ``ScheduleConfig.input_shapes``), also run the partition on zeros, once
  (memory pattern off) or twice (on), on any provider: the kernels' set-up
  too and an arena grown to the exact size, for the price of a run at build;
  inputs it cannot make (free dimensions, sequences, maps, exotic element
  types, more than :data:`MAX_BYTES`) fall back to ``"heap"`` with a log line;
* ``false``: nothing.

A failing warm-up run (zeros are not valid data for every model) is logged,
never raised; one still going after :data:`RUN_LIMIT_S` (a ``Loop`` whose trip
count zeros do not bound, a model too big for a cheap warm-up) is terminated
(ORT's ``RunOptions.terminate``) and logged.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Sequence

import numpy as np

from nnrt_core.plugin_api import background
from nnrt_core.errors import ConfigError
from nnrt_core.plugin_api import get_logger
from nnrt_core.plugin_api import prefault_heap, prefault_heap_async, tune_allocator

__all__ = ["MAX_BYTES", "HEAP_BYTES", "RUN_LIMIT_S", "NUMPY_BY_ORT_TYPE", "MODES", "mode", "zero_feeds",
           "begin_build", "begin_heap", "begin_ort_setup", "warm_up"]

log = get_logger("nnrt.onnxruntime")

#: the largest warm-up feed (all inputs together, bytes): a bigger one skips the run (a run on zeros
#: costs a whole run at build), and the heap is prefaulted instead
MAX_BYTES = 16 << 20
#: heap prefaulted when no warm-up run is made (8 MiB: ~2 ms; 16 MiB cost 3-30 ms on this VM, see docs/plugins.md)
HEAP_BYTES = 8 << 20

#: the longest a warm-up may run (seconds) before it is terminated
RUN_LIMIT_S = 0.5

#: ORT tensor type -> the numpy dtype of a feed
NUMPY_BY_ORT_TYPE: dict[str, Any] = {
    "tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
    "tensor(int8)": np.int8, "tensor(int16)": np.int16, "tensor(int32)": np.int32, "tensor(int64)": np.int64,
    "tensor(uint8)": np.uint8, "tensor(uint16)": np.uint16, "tensor(uint32)": np.uint32,
    "tensor(uint64)": np.uint64, "tensor(bool)": np.bool_, "tensor(string)": np.object_,
}


_setup: threading.Thread | None = None  # begin_ort_setup's thread, once per process
_setup_lock = threading.Lock()

#: ``warm_up`` option value -> mode
MODES: dict[Any, str] = {True: "heap", "heap": "heap", "run": "run", False: "off"}


def mode(extra: Any) -> str:
    """The ``warm_up`` backend option as ``"heap"`` (default), ``"run"`` or ``"off"``, validated."""
    v = (extra or {}).get("warm_up", True)
    m = MODES.get(v) if isinstance(v, (bool, str)) else None
    if m is None:
        raise ConfigError(f"onnxruntime option 'warm_up' must be true, false, 'heap' or 'run', got {v!r}")
    return m


def zero_feeds(args: Sequence[Any], skip: Sequence[str] = (), max_bytes: int = MAX_BYTES,
               ) -> tuple[dict[str, np.ndarray] | None, str]:
    """Zero feeds for the session inputs ``args`` (ORT ``NodeArg`` s: ``name``,
    ``type``, ``shape``) other than ``skip``: ``(feeds, shapes text)``, or
    ``(None, why not)``."""
    feeds: dict[str, np.ndarray] = {}
    total = 0
    for a in args:
        if a.name in skip:
            continue
        dtype = NUMPY_BY_ORT_TYPE.get(a.type)
        if dtype is None:
            return None, f"input {a.name!r} has type {a.type}, which a zero feed cannot be made for"
        shape = list(a.shape or [])
        if not all(isinstance(d, int) and d >= 0 for d in shape):
            return None, (f"input {a.name!r} has free dimensions {shape} (fix them with "
                          f"ScheduleConfig.input_shapes to warm up at the real shape)")
        size = int(np.prod(shape, dtype=np.int64))
        total += size * np.dtype(dtype).itemsize
        if total > max_bytes:
            return None, f"the zero feeds would exceed {max_bytes} bytes (input {a.name!r} {shape})"
        feeds[a.name] = np.full(shape, "", dtype=object) if dtype is np.object_ else np.zeros(shape, dtype)
    return feeds, ", ".join(f"{k} {list(v.shape)}" for k, v in feeds.items())


def begin_build(options: Any, cpu: bool) -> bool:
    """At the start of a build (``Backend.prepare_build``): ORT's one-time
    set-up started on a thread (:func:`begin_ort_setup`, unless ``warm_up``
    is ``false``) and, when the backend options ``options`` leave
    ``warm_up`` at ``"heap"``, :func:`begin_heap`; an invalid value starts
    nothing here (the compile reports it).  True when the prefault began."""
    try:
        how = mode(options)
    except ConfigError:  # the compile reports it
        return False
    if how in ("heap", "run"):
        begin_ort_setup()
    return how == "heap" and begin_heap(cpu)


def begin_ort_setup() -> bool:
    """ONNX Runtime's once-per-process set-up (its environment, the CPU
    kernel registry, MLAS), ~3.5 ms of main-thread CPU in the first
    ``InferenceSession`` of a process, paid on a thread by a one-node session
    while the model loads (ORT releases the GIL while it builds a session).
    Once per process; True when this call started it."""
    global _setup
    with _setup_lock:
        if _setup is not None:
            return False
        # nnrt_core.background: a fork (whose child could find ORT's locks held) and the exit wait for it
        _setup = background.start(_tiny_session, "nnrt-ort-setup")
    return True


def _tiny_session() -> None:
    import onnxruntime as ort

    from nnrt_core.plugin_api import proto_build as helper
    from nnrt_core.plugin_api import P

    f32 = P.TensorProto.FLOAT
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "setup",
                              [helper.make_tensor_value_info("x", f32, [1])],
                              [helper.make_tensor_value_info("y", f32, [1])])
    model = helper.make_model(graph, [helper.make_opsetid("", 13)])
    model.ir_version = 7
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1  # no thread pool of its own
    so.log_severity_level = 4
    try:
        ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    except Exception as e:  # only a saving: the real session pays the set-up then
        log.debug("onnxruntime: the set-up session failed: %s", e)


def begin_heap(cpu: bool) -> bool:
    """Start the ``"heap"`` warm-up early, in the background (``cpu``: the
    session runs on the CPU provider alone): :func:`warm_up` then finds the
    pages touched, or waits for the rest."""
    return cpu and tune_allocator() and prefault_heap_async(HEAP_BYTES)


def warm_up(part: Any, session: Any, skip: Sequence[str] = (), cpu: bool = True, how: str = "heap") -> str:
    """Warm ``part`` (an ``OrtPartition`` whose ORT session is ``session``;
    ``cpu``: on the CPU provider alone) up in mode ``how`` (see the module
    docstring): what was done, ``"run"``, ``"heap"`` or ``"none"``."""
    heap = cpu and tune_allocator()
    if how == "run" and _run_on_zeros(part, session, skip):
        return "run"
    return "heap" if heap and prefault_heap(HEAP_BYTES) else "none"


def _run_on_zeros(part: Any, session: Any, skip: Sequence[str]) -> bool:
    """``part`` run on zeros of ``session`` 's inputs (twice with ORT's memory
    pattern on), bounded by :data:`RUN_LIMIT_S`; ``True`` when it went
    through.  ORT's own log of a failed run is silenced (the failure is logged
    here, at info level)."""
    feeds, what = zero_feeds(session.get_inputs(), skip)
    if feeds is None:
        log.info("onnxruntime: partition %r: no warm-up run: %s", part.name, what)
        return False
    import onnxruntime as ort

    ro = ort.RunOptions()
    ro.log_severity_level = 4
    timer = threading.Timer(RUN_LIMIT_S, lambda: setattr(ro, "terminate", True))
    timer.daemon = True
    t0 = time.perf_counter()
    runs = 2 if session.get_session_options().enable_mem_pattern else 1
    timer.start()
    try:
        for _ in range(runs):
            part.run_with_options(feeds, ro)
    except Exception as e:  # zeros are not valid input for every model
        why = (f"stopped after {RUN_LIMIT_S} s" if ro.terminate else
               f"failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        log.info("onnxruntime: partition %r: warm-up run on zeros (%s) %s; skipped", part.name, what, why)
        return False
    finally:
        timer.cancel()
    log.debug("onnxruntime: partition %r: warmed up on zeros (%s), %d run(s) in %.1f ms", part.name, what,
              runs, 1e3 * (time.perf_counter() - t0))
    return True
