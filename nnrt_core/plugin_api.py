"""The plugin author's reference: everything a backend or scheduler plugin may import from nnrt.

A plugin imports from three places of ``nnrt_core`` only: this module,
:mod:`nnrt_core.ir` (the graph it is given) and :mod:`nnrt_core.errors` (the
exceptions it raises); ``tests/test_architecture.py`` checks it for the
shipped plugins, the schedulers and the example plugin.  Everything else in
``nnrt_core`` may change shape behind these names.  Importing this module is
free: each name is imported on first use (PEP 562), so a plugin pays only for
what it touches (a backend that never exports ONNX never imports the ONNX
frontend).

**The contract** (``docs/plugins.md``)

* :class:`Backend`: subclass it; the public methods validate and call the
  template methods a backend implements (``_capability``/``_supports``,
  ``_compile``, ``load_compiled``...).  :class:`Capability` is its answer to
  "which nodes can you run", :class:`CompileOptions` the values it compiles
  with, :class:`DeviceInfo` a device it offers, :class:`CompiledPartition`
  what ``compile`` returns (``_run`` is the backend's job, ``run`` checks).
  :func:`estimated_seconds_of` reads a partition's cost estimate.
* :data:`hookimpl`: marks the plugin module's ``nnrt_backends`` /
  ``nnrt_schedulers`` hooks (``nnrt_core.hookspec`` holds the specs).
* Schedulers: :class:`Scheduler` (``place`` and ``partition``) gets a
  :class:`PlacementContext` and returns a :class:`PlacementResult`;
  ``candidate_plans`` may return :class:`PlanCandidate` s for the build to time (``measured``);
  :func:`partition_graph`, :class:`PartitionPlan` and :class:`PartitionKey`
  cut it into partitions, :class:`CostModel` (with
  :data:`DEFAULT_POWER_W`, :data:`PARTITION_OVERHEAD_SECONDS`) estimates them;
  :class:`ExecutionStep` / :class:`Executor` run a trial placement and
  :func:`random_feeds`, :func:`tensor_info`, :class:`TensorInfo` describe
  its inputs.  :class:`Registry` / :func:`default_registry`: the installed plugins.

**Run control** (``CompiledPartition.run(inputs, control)``):
:class:`RunControl` (deadline, cancellation, memory budget),
:func:`current_control` (the calling thread's, inside ``_run``),
:func:`enter_control` / :func:`leave_control` (make a control the calling thread's current one
while a backend's own host loops run, e.g. an emulator's kernels),
:func:`tensor_limit` (the byte limit of one tensor in this run).

**Memory planning**: :class:`Buffer`, :func:`plan_offsets` (lifetime-based
offsets), :func:`lower_bound`, :func:`live_peak_bytes`, :func:`align` /
:data:`ALIGN`; :func:`check_static_sizes` refuses absurd static sizes before
allocating.  Heap: :func:`tune_allocator`, :func:`prefault_heap`,
:func:`prefault_heap_async`.  Threads: :data:`CORES`, :func:`thread_budget`
(the run's share of cores); :mod:`background` (``background.start``: a daemon
thread every ``fork`` and the exit wait for).

**Build-time facts**: :func:`remember` / :func:`recall` (per-node facts a
backend computed in ``capability`` and reuses in ``compile``).

**Storage**: :func:`write_atomic` (a file written whole or not at all), :func:`user_cache_file`
(a per-user cache file under `$NNRT_CACHE_DIR`, e.g. capability probes),
:mod:`checksum` (digests of stored blobs), :func:`encode` /
:func:`looks_like_session_file` (session files).

**ONNX interchange** (for backends that hand ONNX to an engine):
:func:`to_onnx`, :func:`graph_to_onnx`, :class:`ExternalWeights` (the
weights region of an export), :func:`load_onnx`, :func:`validate_graph`,
:func:`onnx_schema`, :data:`P` (the ``onnx`` package: ``P.ModelProto``...),
:mod:`proto_build` (the ``onnx.helper`` builders),
:func:`make_tensor_value_info`.  These import ``onnx`` when first *used*
(an attribute read, a call), not when imported, so a plugin may import them
at the top of a module that the path loading a compiled ``.nnrt`` file
needs.  That path reads ONNX bytes with :func:`read_initializers` (an
initializer's name, type, dims and external data: :data:`EXTERNAL`, without
``onnx``), :func:`nested_external_tensors` (external tensors a weights region
cannot be handed over for: in sub-graphs, attributes, sparse initializers)
and :func:`tensor_dtype_to_np_dtype`.

**Value types and logging**: :class:`Record` / :class:`FrozenRecord` (slotted
value classes, picklable), :func:`get_logger` (a logger that imports
``logging`` only when it emits).
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names below are imported on first use, see _LAZY
    from nnrt_core import background
    from nnrt_core.backend.base import (Backend, Capability, CompiledPartition, CompileOptions, DeviceInfo,
                                        estimated_seconds_of)
    from nnrt_core.backend.facts import recall, remember
    from nnrt_core.compiler.budget import check_static_sizes
    from nnrt_core.frontends.onnx import graph_to_onnx, load_onnx, onnx_schema, proto_build, to_onnx, validate_graph
    from nnrt_core.frontends.onnx.external_weights import ExternalWeights
    from nnrt_core.frontends.onnx.onnx_api import P
    from nnrt_core.frontends.onnx.proto_build import make_tensor_value_info
    from nnrt_core.frontends.onnx.wire import (EXTERNAL, nested_external_tensors, read_initializers,
                                               tensor_dtype_to_np_dtype)
    from nnrt_core.hookspec import hookimpl
    from nnrt_core.logs import get_logger
    from nnrt_core.placement import (DEFAULT_POWER_W, PARTITION_OVERHEAD_SECONDS, CostModel, PartitionKey,
                                     PartitionPlan, PlacementContext, PlacementResult, PlanCandidate, Scheduler,
                                     partition_graph)
    from nnrt_core.record import FrozenRecord, Record
    from nnrt_core.registry import Registry, default_registry
    from nnrt_core.control import RunControl, current_control, enter_control, leave_control, tensor_limit
    from nnrt_core.runtime.executor import ExecutionStep, Executor
    from nnrt_core.runtime.feeds import TensorInfo, random_feeds, tensor_info
    from nnrt_core.runtime.heap import prefault_heap, prefault_heap_async, tune_allocator
    from nnrt_core.runtime.memory_plan import ALIGN, Buffer, align, live_peak_bytes, lower_bound, plan_offsets
    from nnrt_core.runtime.thread_budget import CORES, thread_budget
    from nnrt_core.storage import checksum
    from nnrt_core.storage.files import user_cache_file, write_atomic
    from nnrt_core.storage.session_file import encode, looks_like_session_file

#: public name -> the module that defines it
_LAZY: dict[str, str] = {
    **dict.fromkeys(["Backend", "Capability", "CompiledPartition", "CompileOptions", "DeviceInfo",
                     "estimated_seconds_of"], "nnrt_core.backend.base"),
    **dict.fromkeys(["recall", "remember"], "nnrt_core.backend.facts"),
    "hookimpl": "nnrt_core.hookspec",
    **dict.fromkeys(["CostModel", "DEFAULT_POWER_W", "PARTITION_OVERHEAD_SECONDS", "PartitionKey", "PartitionPlan",
                     "PlacementContext", "PlacementResult", "PlanCandidate", "Scheduler", "partition_graph"],
                    "nnrt_core.placement"),
    **dict.fromkeys(["ExecutionStep", "Executor"], "nnrt_core.runtime.executor"),
    **dict.fromkeys(["TensorInfo", "random_feeds", "tensor_info"], "nnrt_core.runtime.feeds"),
    **dict.fromkeys(["Registry", "default_registry"], "nnrt_core.registry"),
    **dict.fromkeys(["RunControl", "current_control", "tensor_limit", "enter_control", "leave_control"],
                    "nnrt_core.control"),
    **dict.fromkeys(["ALIGN", "Buffer", "align", "live_peak_bytes", "lower_bound", "plan_offsets"],
                    "nnrt_core.runtime.memory_plan"),
    "check_static_sizes": "nnrt_core.compiler.budget",
    **dict.fromkeys(["prefault_heap", "prefault_heap_async", "tune_allocator"], "nnrt_core.runtime.heap"),
    **dict.fromkeys(["CORES", "thread_budget"], "nnrt_core.runtime.thread_budget"),
    "background": "nnrt_core.background",
    **dict.fromkeys(["user_cache_file", "write_atomic"], "nnrt_core.storage.files"),
    "checksum": "nnrt_core.storage.checksum",
    **dict.fromkeys(["encode", "looks_like_session_file"], "nnrt_core.storage.session_file"),
    "ExternalWeights": "nnrt_core.frontends.onnx.external_weights",
    **dict.fromkeys(["graph_to_onnx", "load_onnx", "onnx_schema", "to_onnx", "validate_graph"],
                    "nnrt_core.frontends.onnx"),
    "proto_build": "nnrt_core.frontends.onnx.proto_build",
    "make_tensor_value_info": "nnrt_core.frontends.onnx.proto_build",
    "P": "nnrt_core.frontends.onnx.onnx_api",
    **dict.fromkeys(["EXTERNAL", "nested_external_tensors", "read_initializers", "tensor_dtype_to_np_dtype"],
                    "nnrt_core.frontends.onnx.wire"),
    **dict.fromkeys(["FrozenRecord", "Record"], "nnrt_core.record"),
    "get_logger": "nnrt_core.logs",
}

#: the names that are modules themselves
_MODULES = frozenset({"background", "checksum", "proto_build"})
#: the names whose module imports ``onnx``: given as stand-ins that import it on first use
_ON_USE = frozenset({"P", "proto_build", "graph_to_onnx", "load_onnx", "onnx_schema", "to_onnx", "validate_graph",
                     "make_tensor_value_info"})

__all__ = sorted(_LAZY)


def _resolve(name: str) -> Any:
    mod = importlib.import_module(_LAZY[name])
    return mod if name in _MODULES else getattr(mod, name)


class _OnFirstUse:
    """A module (or module-like value) imported when an attribute is first read."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(_resolve(self.name), attr)

    def __repr__(self) -> str:
        return f"<{_LAZY[self.name]} {self.name}, imported on first use>"


def _on_first_call(name: str) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        return _resolve(name)(*args, **kwargs)
    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"``{_LAZY[name]}.{name}``, imported on the first call."
    return call


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'nnrt_core.plugin_api' has no attribute {name!r}")
    if name in _ON_USE:
        value = _OnFirstUse(name) if name in ("P", "proto_build") else _on_first_call(name)
    else:
        value = _resolve(name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
