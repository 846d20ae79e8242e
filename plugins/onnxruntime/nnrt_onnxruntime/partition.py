"""A partition compiled into one ``onnxruntime.InferenceSession``.

Two ways to run, chosen at compile time:

* **host** (``io="numpy"``, CPU provider, the default): feeds are the numpy
  arrays the core hands over; ORT's CPU provider reads them in place and its
  outputs come back as numpy arrays wrapping ORT's buffers, so nothing is
  copied on either side.  The call is one ``InferenceSession.run`` with the
  output names precomputed (the whole-model fast path is exactly this).
* **ortvalue** (a device provider such as CUDA, or a backend with
  ``ortvalue_io = True``): inputs that are already ``OrtValue`` s are bound as
  they are through an ``IOBinding``, outputs are bound on the partition's
  device and returned as ``OrtValue`` s, so consecutive ORT partitions hand
  tensors over without touching the host.
"""
from __future__ import annotations

import json
import re
import threading
import time
import warnings
from typing import Any, Mapping, Sequence

import numpy as np

from nnrt_core.plugin_api import Backend, CompiledPartition, CompileOptions
from nnrt_core.errors import CompileError, ExecutionError
from nnrt_core.plugin_api import ExternalWeights
from nnrt_core.plugin_api import get_logger
from nnrt_core.plugin_api import RunControl
from nnrt_core.plugin_api import CORES, thread_budget

from nnrt_onnxruntime.blob import BLOB_FORMAT, MAGIC, pack_blob, unpack_blob
from nnrt_onnxruntime.direct import direct_runner
from nnrt_onnxruntime.messages import first_line
from nnrt_onnxruntime.dtypes import EXOTIC_BY_ORT_TYPE, from_ortvalue, to_ortvalue
from nnrt_onnxruntime.offline import (
    PARTITION_WEIGHTS,
    OptimizedModel,
    external_arrays,
    feed_as_inputs,
    machine_fingerprint,
    optimize_and_save,
    worth_feeding,
)
from nnrt_onnxruntime.providers import make_session_options, provider_kind, requested_providers
from nnrt_onnxruntime.terminate import run_terminable
from nnrt_onnxruntime import warmup

__all__ = ["OrtPartition", "MAGIC", "BLOB_FORMAT", "pack_blob", "unpack_blob"]  # the blob names: see .blob

log = get_logger("nnrt.onnxruntime")

_NODE_RE = r"running (\S+) node\. Name:'([^']*)'"  # compiled on first use (re caches it): failed runs only


class OrtPartition(CompiledPartition):
    """One ORT session running a partition (see the module docstring)."""

    def __init__(self, backend: Backend, name: str, input_names: Sequence[str],
                 output_names: Sequence[str], model: bytes, options: CompileOptions,
                 node_ops: Mapping[str, str] | None = None, *, optimized: OptimizedModel | None = None,
                 weights: ExternalWeights | None = None) -> None:
        # no graph: partitions are also rebuilt from serialized bytes.  With
        # ``optimized`` (a warm start) ``model`` is ORT's optimized graph and
        # runs as it is; otherwise ORT optimizes ``model``, keeping its
        # optimized form when ``options.serializable`` asks for it.
        # ``weights``: the initializers ``model`` references as external data
        # (ours; ORT reads them in place, and every session of this partition
        # shares them).
        self.backend = backend
        self.name = name
        self.input_names = list(input_names)
        self.output_names = list(output_names)
        self._model = model
        self._node_ops = dict(node_ops or {})
        self._options = options
        self._optimized = optimized
        self._preoptimized = optimized is not None
        #: weights fed as inputs on every run (ORT would copy them as initializers; see offline.feed_as_inputs)
        self._fed: dict[str, np.ndarray] = {}
        if optimized is not None:
            weights = external_arrays(optimized.model, optimized.weights, f"partition {name!r}")
            if [p for p, _ in requested_providers(backend, options)[0]] == ["CPUExecutionProvider"] \
                    and worth_feeding(weights):
                self._model, weights, self._fed = feed_as_inputs(optimized.model, weights)
        self._weights = weights if weights is not None and weights.names else None
        self._external: tuple[list[str], list[Any]] | None = None
        if self._weights is not None:
            # the OrtValues (and the arrays they point into) live as long as the partition
            self._external = _ortvalues(self._weights)
        self.session, self._info, kept = _create_session(backend, self._model, options, self._external,
                                                         self._preoptimized)
        if optimized is None and kept is not None:
            self._optimized = kept
        self._info["stored_form"] = "optimized" if self._optimized is not None else "onnx"
        self._info["weights_fed"] = len(self._fed)
        self._mem = self._info.pop("_memory")
        # the backend's memory model decides what crosses the boundary: numpy
        # arrays for a host-memory backend (ORT copies to its device inside),
        # OrtValues otherwise
        self.io = "numpy" if backend.host_memory else "ortvalue"
        self._info["io"] = self.io
        self._out = list(self.output_names)
        sess = self.session
        self._sess_run = _fast_run(sess)
        ins, outs = sess.get_inputs(), sess.get_outputs()
        self._tensor_io = all(t.type.startswith("tensor(") for t in ins + outs)
        # boundary values numpy cannot exchange with ORT (bfloat16, float8, int4...)
        self._exotic_in = {i.name: EXOTIC_BY_ORT_TYPE[i.type] for i in ins if i.type in EXOTIC_BY_ORT_TYPE}
        self._exotic_out = {o.name: EXOTIC_BY_ORT_TYPE[o.type] for o in outs if o.type in EXOTIC_BY_ORT_TYPE}
        self._host = self.io == "numpy" and not self._exotic_in and not self._exotic_out
        self._info["path"] = "fast" if self._host else ("exotic-dtypes" if self.io == "numpy" else "iobinding")
        # threads follow the run's budget (nnrt_core.runtime.thread_budget) unless the
        # user fixed them: a run given fewer threads than there are cores goes
        # to a session with that many intra-op threads, made on first use
        extra = options.extra or {}
        self._adaptive = (self._host and not options.num_threads and "intra_op_num_threads" not in extra
                          and self._info["providers"] == ["CPUExecutionProvider"])
        self._by_threads: dict[int, Any] = {}
        self._by_threads_lock = threading.Lock()
        self._info["adaptive_threads"] = self._adaptive
        self._warm = warmup.mode(extra)

    def warm_up(self) -> None:
        """The first run's costs paid at build, as the ``warm_up`` option says (see :mod:`.warmup`)."""
        if self._warm != "off":
            self._info["warmed_up"] = warmup.warm_up(self, self.session, skip=tuple(self._fed), how=self._warm,
                                                     cpu=self._info["providers"] == ["CPUExecutionProvider"])

    def prepare_thread_budget(self, threads: int) -> None:
        if self._adaptive and threads < CORES:
            self._run_for_threads(threads)

    def _run_for_threads(self, threads: int) -> Any:
        """The fast run function of the session with ``threads`` intra-op
        threads (created once, sharing this partition's weights)."""
        run = self._by_threads.get(threads)
        if run is not None:
            return run
        import onnxruntime as ort

        with self._by_threads_lock:
            run = self._by_threads.get(threads)
            if run is None:
                model, external, preoptimized = self._thread_source()
                so, _ = make_session_options(self._options, cpu_only=True)
                so.intra_op_num_threads = threads
                _add_external(so, external, preoptimized)
                t0 = time.perf_counter()
                sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
                log.info("onnxruntime: partition %r: a %d-thread session for runs with that budget (%.0f ms)",
                         self.name, threads, 1e3 * (time.perf_counter() - t0))
                run = self._by_threads[threads] = _fast_run(sess)
        return run

    def _thread_source(self) -> tuple[bytes, tuple[list[str], list[Any]] | None, bool]:
        """(model, weights as OrtValues, already optimized) that the extra
        sessions are built from, worked out once (under the lock): ORT's
        optimized graph when this partition kept one, else the partition's own."""
        src = self.__dict__.get("_source")
        if src is None:
            if self._optimized is not None and not self._preoptimized:
                weights = external_arrays(self._optimized.model, self._optimized.weights, f"partition {self.name!r}")
                src = (self._optimized.model, _ortvalues(weights), True)
            else:
                src = (self._model, self._external, self._preoptimized)
            self._source = src
        return src

    # ------------------------------------------------------------------ run
    def run(self, inputs: Mapping[str, Any], control: RunControl | None = None) -> dict[str, Any]:
        if control is not None and (control.watched or control.quiet):  # deadline, cancel, quiet: ORT's RunOptions
            return run_terminable(self, inputs, control)
        if self._host and not self._fed and not self._adaptive:  # run_with_options' common case, inline
            try:
                outs = self._sess_run(self._out, inputs, None)
            except Exception as e:
                raise self._error(e) from e
            return dict(zip(self.output_names, outs))
        return self.run_with_options(inputs, None)

    def direct_run(self, outputs: Sequence[str]) -> Any:
        """``run`` without a control as one closure (:mod:`.direct`) on the host path."""
        if not self._host:
            return None
        return direct_runner(self._sess_run, self._run_for_threads if self._adaptive else None, outputs,
                             self._error, self._fed)

    def run_with_options(self, inputs: Mapping[str, Any], ro: Any) -> dict[str, Any]:
        """A run with ORT ``RunOptions`` ``ro`` (``None``: the defaults)."""
        if self._fed:
            inputs = {**self._fed, **inputs}
        if self._host:
            run = self._sess_run
            if self._adaptive:
                budget = thread_budget()
                if budget is not None and budget < CORES:
                    run = self._run_for_threads(budget)
            try:
                outs = run(self._out, inputs, ro)
            except Exception as e:
                raise self._error(e) from e
            return dict(zip(self.output_names, outs))
        try:
            if self.io == "numpy":
                return self._run_exotic(inputs, ro)
            return self._run_bound(inputs, ro)
        except ExecutionError:
            raise
        except Exception as e:
            raise self._error(e) from e

    def _run(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        return self.run(inputs)

    def _run_exotic(self, inputs: Mapping[str, Any], ro: Any = None) -> dict[str, Any]:
        """Host I/O through OrtValues, for boundaries carrying bfloat16/float8/int4..."""
        import onnxruntime as ort

        feeds = {}
        for name in self.input_names:
            x = inputs[name]
            elem = self._exotic_in.get(name)
            feeds[name] = to_ortvalue(x, elem) if elem is not None else ort.OrtValue.ortvalue_from_numpy(
                np.ascontiguousarray(x))
        for name, x in self._fed.items():
            feeds[name] = ort.OrtValue.ortvalue_from_numpy(x)
        outs = self.session.run_with_ort_values(self._out, feeds, ro)
        res = {}
        for name, ov in zip(self.output_names, outs):
            elem = self._exotic_out.get(name)
            res[name] = from_ortvalue(ov, elem) if elem is not None else ov.numpy()
        return res

    def _run_bound(self, inputs: Mapping[str, Any], ro: Any = None) -> dict[str, Any]:
        import onnxruntime as ort

        if not self._tensor_io:  # sequences/optionals cannot be bound: go through the host
            feeds = {k: (self.backend.to_host(v) if isinstance(v, ort.OrtValue) else v) for k, v in inputs.items()}
            return dict(zip(self.output_names, self.session.run(self._out, feeds, ro)))
        io = self.session.io_binding()
        for name in self.input_names:
            x = inputs[name]
            if isinstance(x, ort.OrtValue):
                io.bind_ortvalue_input(name, x)
            elif name in self._exotic_in:
                io.bind_ortvalue_input(name, to_ortvalue(x, self._exotic_in[name]))
            else:
                io.bind_cpu_input(name, np.ascontiguousarray(x))
        for name, x in self._fed.items():
            io.bind_cpu_input(name, x)
        dev, idx = self._mem
        for name in self._out:
            io.bind_output(name, dev, idx)
        self.session.run_with_iobinding(io, ro)
        return dict(zip(self.output_names, io.get_outputs()))

    def _error(self, e: BaseException) -> ExecutionError:
        text = str(e)
        m = re.search(_NODE_RE, text)
        where = ""
        if m:
            node = m.group(2)
            op = self._node_ops.get(node, m.group(1))
            where = f" in node {node!r} ({op})"
        return ExecutionError(
            f"partition {self.name!r} on backend {self.backend.name!r} failed{where}: "
            f"{type(e).__name__}: {first_line(text)}"
        )

    # ------------------------------------------------------------ profiling
    def run_profiled(self, inputs: Mapping[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]],
                                                            tuple[float, float] | None]:
        """Run once in a fresh ORT session with ORT's profiler on: the outputs,
        one record per executed ORT kernel (``name``, ``op_type``, ``provider``,
        ``start``/``end`` in ``time.perf_counter`` seconds; names are ORT's,
        which may differ from the model's after fusion) and the (start, end)
        of the run itself (session creation excluded)."""
        import os
        import shutil
        import tempfile
        import time

        import onnxruntime as ort

        if not self._host:  # device I/O: the caller times the partition as a whole
            return self.run(inputs), [], None
        folder = tempfile.mkdtemp(prefix="nnrt-ort-profile-")
        try:
            so = self.session.get_session_options()
            so.enable_profiling = True
            so.profile_file_prefix = os.path.join(folder, "ort")
            _add_external(so, self._external, self._preoptimized)
            sess = ort.InferenceSession(self._model, so, providers=self.session.get_providers())
            try:
                t0 = time.perf_counter()
                outs = sess.run(self._out, {**self._fed, **inputs})
                t1 = time.perf_counter()
            except Exception as e:
                raise self._error(e) from e
            with open(sess.end_profiling()) as f:
                events = json.load(f)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        run_start = min((e["ts"] for e in events if e.get("name") == "model_run"), default=None)
        records = []
        for e in events:
            if e.get("cat") != "Node" or not str(e.get("name", "")).endswith("_kernel_time") or run_start is None:
                continue
            start = min(t1, t0 + (float(e["ts"]) - run_start) / 1e6)
            name = e["name"][: -len("_kernel_time")]
            args = e.get("args") or {}
            records.append({"name": name, "op_type": args.get("op_name", "?"),
                            "provider": args.get("provider", "?"), "start": start,
                            "end": min(t1, start + float(e.get("dur", 0)) / 1e6)})
        return dict(zip(self.output_names, outs)), records, (t0, t1)

    # ------------------------------------------------------------- reports
    def serialize(self) -> bytes:
        header: dict[str, Any] = {"format": BLOB_FORMAT, "name": self.name, "inputs": self.input_names,
                                  "outputs": self.output_names, "node_ops": self._node_ops}
        if self._optimized is not None:
            header["optimized_for"] = machine_fingerprint()
            return pack_blob(header, self._optimized.model, self._optimized.weights)
        if self._weights is not None:
            header["weights"] = PARTITION_WEIGHTS
            return pack_blob(header, self._model, self._weights.region())
        return pack_blob(header, self._model)

    def describe(self) -> dict[str, Any]:
        return dict(self._info, nodes=len(self._node_ops))

    def note(self, key: str, value: Any) -> None:
        """Add a fact to :meth:`describe` (how the partition was compiled)."""
        self._info[key] = value


def _fast_run(sess: Any) -> Any:
    """The session's public ``run`` (the C session under it is onnxruntime's private attribute)."""
    return sess.run


def _ortvalues(weights: ExternalWeights) -> tuple[list[str], list[Any]]:
    import onnxruntime as ort

    return weights.names, [ort.OrtValue.ortvalue_from_numpy(a) for a in weights.arrays]


def _add_external(so: Any, external: tuple[list[str], list[Any]] | None, preoptimized: bool) -> None:
    """Hand the weights to ORT (OrtValues over our buffers; ORT copies them
    when it creates the session); switch its optimizers off when the graph is
    ORT's own, already optimized."""
    import onnxruntime as ort

    if preoptimized:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    if external is None:
        return
    names, values = external
    if names:
        so.add_external_initializers(names, values)


def _create_session(backend: Backend, model: bytes, options: CompileOptions,
                    external: tuple[list[str], list[Any]] | None = None, preoptimized: bool = False,
                    ) -> tuple[Any, dict[str, Any], OptimizedModel | None]:
    """An InferenceSession on the requested provider, falling back (visibly)
    to the CPU provider when it fails to initialize; also ORT's optimized form
    of the model when ``options.serializable`` asks for one and the session
    runs on the CPU provider alone (other providers' optimized graphs are not
    meant to be stored)."""
    import onnxruntime as ort

    requested, index, device_id = requested_providers(backend, options)
    names = [p for p, _ in requested]
    so, summary = make_session_options(options, cpu_only=names == ["CPUExecutionProvider"])
    _add_external(so, external, preoptimized)
    fallback = None
    kept: OptimizedModel | None = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if options.serializable and not preoptimized and names == ["CPUExecutionProvider"]:
                sess, kept = optimize_and_save(
                    lambda so_: ort.InferenceSession(model, so_, providers=names,
                                                     provider_options=[o for _, o in requested]), so)
            else:
                sess = ort.InferenceSession(model, so, providers=names, provider_options=[o for _, o in requested])
        except Exception as e:
            if names == ["CPUExecutionProvider"]:
                raise
            fallback = f"{names[0]} failed to initialize ({first_line(e)}); fell back to CPUExecutionProvider"
            sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    for w in caught:
        log.info("onnxruntime: %s", w.message)
    active = sess.get_providers()
    if fallback is None and names[0] not in active:
        fallback = f"{names[0]} is not available; fell back to {active[0]}"
    if fallback:
        log.warning("onnxruntime: %s", fallback)
    kind = provider_kind(active[0])
    mem = (kind.memory, index if kind.memory != "cpu" else 0)
    info: dict[str, Any] = {
        "provider": active[0],
        "providers": active,
        "requested_providers": names,
        "device": device_id if not fallback else "cpu:0",
        "fallback": fallback,
        "onnxruntime": ort.__version__,
        **summary,
        "_memory": mem,
    }
    return sess, info, kept
