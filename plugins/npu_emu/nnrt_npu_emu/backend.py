"""The ``npu_emu`` backend: devices, device tensors, compiled partitions."""
from __future__ import annotations

import os
import threading
import time
import weakref
from concurrent.futures import Future
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from nnrt_core.plugin_api import Backend, Capability, CompiledPartition, CompileOptions, DeviceInfo
from nnrt_core.errors import (CompileError, ConfigError, ExecutionError, InputError, NumericOverflowError,
                              MemoryBudgetError, RunStoppedError)
from nnrt_core.ir import Graph
from nnrt_core.plugin_api import RunControl, current_control
from nnrt_npu_emu.binding import BoundProgram
from nnrt_npu_emu.blob import OfflineModelError, decode, encode
from nnrt_npu_emu.cost import RunProfile, summarize
from nnrt_npu_emu.device import NPU_POWER_W, NpuDevice, NpuTensor, TransferStats
from nnrt_npu_emu.lowering import Analysis, lower_graph, why_unsupported
from nnrt_npu_emu.memory import DeviceMemoryError
from nnrt_npu_emu.numerics import FP16_MAX
from nnrt_npu_emu.ops import Unsupported
from nnrt_npu_emu.profiles import BUILTIN_PROFILES, ENV_PROFILES, ChipProfile, load_profiles
from nnrt_npu_emu.program import Operand, Program
from nnrt_npu_emu.version import __version__
from nnrt_numpy.host_kernels import blas_threads  # the process's one BLAS/helper-thread policy (public API)
from nnrt_core.plugin_api import prefault_heap, tune_allocator
from nnrt_numpy.host_kernels import start_helpers

__all__ = ["NpuEmuBackend", "NpuPartition", "NpuTensor", "NpuDevice", "NPU_POWER_W"]

def _nonfinite(tensors: Sequence["NpuTensor"]) -> bool:
    """Whether a float input holds inf or NaN (then a non-finite store is the input's, not the chip's)."""
    return any(t.dtype.kind == "f" and not np.isfinite(t.data).all() for t in tensors)


class NpuPartition(CompiledPartition):
    """A device program loaded on one chip (weights and workspace resident in
    device memory)."""

    def __init__(self, backend: "NpuEmuBackend", device: NpuDevice, program: Program, weights: bytes,
                 name: str, meta: Mapping[str, Any] | None = None) -> None:
        self.backend = backend
        self.name = name
        self.input_names = [t.name for t in program.inputs]
        self.output_names = [t.name for t in program.outputs]
        self.device = device
        self.program = program
        self.weights = weights
        self.meta = dict(meta or {})
        self.estimate = summarize(program.instrs, device.profile)
        self.last_profile: Mapping[str, Any] | None = None
        self.runs = 0
        self._bound: BoundProgram | None = None
        #: value name -> the node that computes it (an instruction is labelled by its outputs;
        #: empty for a partition loaded from a compiled file)
        self.producers: dict[str, str] = {}
        arena = device.arena
        self._const_off = arena.alloc(max(program.const_size, 1), f"weights of {name}")
        self._fin_c = weakref.finalize(self, arena.free, self._const_off)
        self._ws_off = arena.alloc(max(program.ws_size, 1), f"workspace of {name}")
        self._fin_w = weakref.finalize(self, arena.free, self._ws_off)
        if program.const_size:
            arena.view(self._const_off, np.uint8, (program.const_size,))[:] = np.frombuffer(weights, np.uint8)

    # ---------------------------------------------------------------- run
    def _run(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        control = current_control()
        return self.device.queue.call(self._job(inputs, control), control)

    def run_async(self, inputs: Mapping[str, Any], control: RunControl | None = None) -> "Future[dict[str, Any]]":
        """Bind inputs (uploading host arrays), submit to the device queue;
        ``control`` stops the job in the queue or between instructions."""
        try:
            job = self._job(inputs, control)
        except ExecutionError as e:
            fut: Future = Future()
            fut.set_exception(e)
            return fut
        return self.device.queue.submit(job, control)

    def _job(self, inputs: Mapping[str, Any], control: RunControl | None) -> Callable[[], dict[str, Any]]:
        """The device job of one run, its inputs bound (uploaded) now; raises :class:`ExecutionError`."""
        try:
            bound = self._bind(inputs)
            outs = [NpuTensor(self.device, t.shape, t.dtype) for t in self.program.outputs]
        except BaseException as e:
            if isinstance(e, ExecutionError):
                raise
            raise ExecutionError(f"partition {self.name!r}: {type(e).__name__}: {e}") from e

        def job() -> dict[str, Any]:
            try:
                overflow = self._execute(bound, outs, control)
            except (RunStoppedError, MemoryBudgetError):  # the run's own limits: as they are
                raise
            except Exception as e:
                raise ExecutionError(f"partition {self.name!r} on {self.device.id} failed: "
                                     f"{type(e).__name__}: {e}") from e
            result = dict(zip(self.output_names, outs))
            if overflow is not None and not (not np.isfinite(overflow[1]) and _nonfinite(bound)):
                raise self._overflow_error(overflow, result)
            return result

        return job

    def _bind(self, inputs: Mapping[str, Any]) -> list[NpuTensor]:
        bound = []
        for spec in self.program.inputs:
            if spec.name not in inputs:
                raise InputError(f"partition {self.name!r} misses input {spec.name!r}")
            x = inputs[spec.name]
            if isinstance(x, NpuTensor):
                if x.device is not self.device:
                    x = self.backend.migrate(x, self.device)
            else:
                x = self.backend.to_device(np.asarray(x), self.device.id)
            if x.dtype != np.dtype(spec.dtype) or list(x.shape) != list(spec.shape):
                raise InputError(f"partition {self.name!r} input {spec.name!r} expects {spec.dtype}{spec.shape}, "
                                 f"got {x.dtype}{list(x.shape)}")
            bound.append(x)
        return bound

    @property
    def bound(self) -> BoundProgram:
        """The program bound to this partition's device memory (built at the first run)."""
        if self._bound is None:
            self._bound = BoundProgram(self.program, self.device.arena, self._ws_off, self._const_off)
        return self._bound

    def _execute(self, ins: list[NpuTensor], outs: list[NpuTensor],
                 control: RunControl | None = None) -> tuple[int, float] | None:
        """Run the bound program; the first instruction whose fp16 store saturated, or ``None``."""
        bound = self.bound
        trace: list[float] = []
        t0 = time.perf_counter()
        with np.errstate(all="ignore"), blas_threads():
            overflow = bound.run(ins, outs, trace, control)
        wall = time.perf_counter() - t0
        self.runs += 1
        self.last_profile = RunProfile(self.estimate, wall, trace)
        self.backend.last_profile = self.last_profile
        return overflow

    def _overflow_error(self, overflow: tuple[int, float], outputs: dict[str, Any]) -> NumericOverflowError:
        """The chip's float-status flag as an error carrying the run's (saturated) outputs."""
        k, value = overflow
        label = self.program.instrs[k].node  # its output values, or input:/output: of a boundary cast
        node = self.producers.get(label.split(",")[0], label)
        what = "NaN from finite inputs" if value != value else f"{value:.4g}, beyond fp16's +-{FP16_MAX:g}"
        return NumericOverflowError(
            f"partition {self.name!r} on {self.device.id} ({self.program.precision}): the store of node {node!r} "
            f"saturated ({what}); the result differs from fp32",
            partition=self.name, backend=self.backend.name, node=node, value=value, outputs=outputs)

    def run_reference(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Run the program literally (:meth:`Program.execute`): every operand
        read from and written to device memory in its stored type (fp16
        activations as fp16, weights as stored).  Slow; the fast bound program
        must give the same bits.  Returns host arrays."""
        bound = self._bind(inputs)
        outs = [NpuTensor(self.device, t.shape, t.dtype) for t in self.program.outputs]
        arena, ws, cst = self.device.arena, self._ws_off, self._const_off
        base = {"ws": lambda i: ws, "const": lambda i: cst, "in": lambda i: bound[i].offset,
                "out": lambda i: outs[i].offset}

        def view(o: Operand) -> np.ndarray:
            off = base[o.space](o.offset) + (o.offset if o.space in ("ws", "const") else 0)
            return arena.view(off, np.dtype(o.dtype), tuple(o.shape))

        def job() -> None:
            with np.errstate(all="ignore"):
                self.program.execute(view)

        self.device.queue.submit(job).result()
        return {n: t.data.copy() for n, t in zip(self.output_names, outs)}

    # ------------------------------------------------------------ offline
    def serialize(self) -> bytes:
        meta = dict(self.meta)
        meta.update(chip_id=self.device.profile.chip_id, chip_digest=self.device.profile.digest,
                    producer=f"nnrt-backend-npu-emu {__version__}", name=self.name)
        labels = {ins.node.split(",")[0] for ins in self.program.instrs}  # an overflow names its node when loaded
        meta["producers"] = {v: n for v, n in self.producers.items() if v in labels}
        return encode(self.program, self.weights, meta)

    def estimated_seconds(self) -> float:
        """Simulated device time of one run (cycles / clock)."""
        return float(self.estimate["time_ms"]) / 1e3

    def warm_up(self) -> None:
        """Bind the program to its device memory, touch its workspace pages
        (device memory is committed on first touch) and as many host heap
        pages for the emulator's temporaries, and start the host helper
        threads now, not in the first run."""
        start_helpers()
        _ = self.bound
        if self.program.ws_size:
            self.device.arena.view(self._ws_off, np.uint8, (self.program.ws_size,)).fill(0)
            tune_allocator()  # else the prefault is a no-op: freed pages would go back to the OS
            prefault_heap(self.program.ws_size)

    def describe(self) -> dict[str, Any]:
        e = self.estimate
        return {
            "device": self.device.id, "chip": self.device.profile.chip_id, "precision": self.program.precision,
            "instructions": e["instructions"], "est_cycles": e["cycles"], "est_time_ms": e["time_ms"],
            "macs": e["macs"], "weights_bytes": self.program.const_size, "workspace_bytes": self.program.ws_size,
            "compute_bound_ops": e["compute_bound"], "memory_bound_ops": e["memory_bound"],
            "per_op": e["per_op"],
            "inputs": [vars(t) for t in self.program.inputs], "outputs": [vars(t) for t in self.program.outputs],
        }


class NpuEmuBackend(Backend):
    """Emulated mobile NPU (see the package docstring)."""

    name = "npu_emu"
    version = __version__
    device_type = "npu"
    default_priority = 100
    supported_options = frozenset({"precision"})
    host_memory = False
    fresh_outputs = True  # outputs come back from device memory
    needs_static_shapes = True  # the chip takes static shapes only: sessions specialize per input signature
    emulated = True  # an emulated chip: in a session only when named, never through backends="auto"

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._devices: list[NpuDevice] = []
        self.profile_errors: list[str] = []
        for p in BUILTIN_PROFILES:
            self._add(p)
        for path in [p for p in os.environ.get(ENV_PROFILES, "").split(os.pathsep) if p.strip()]:
            try:
                for p in load_profiles(path):
                    self._add(p)
            except ConfigError as e:  # a broken user file must not hide the built-in chips
                self.profile_errors.append(str(e))
        self._current: NpuDevice = self._devices[0]
        self.transfers = TransferStats()
        self.last_profile: Mapping[str, Any] | None = None

    # ------------------------------------------------------------- devices
    def _add(self, profile: ChipProfile) -> NpuDevice:
        with self._lock:
            for d in self._devices:
                if d.profile.name == profile.name:
                    if d.profile.chip_id != profile.chip_id or d.profile.digest != profile.digest:
                        raise ConfigError(f"NPU chip profile {profile.name!r} is already defined differently "
                                          f"({d.profile.source})")
                    return d
            dev = NpuDevice(len(self._devices), profile, self)
            self._devices.append(dev)
            return dev

    def add_profiles(self, path: str | os.PathLike) -> list[DeviceInfo]:
        """Load chip profiles from a TOML/JSON file as new devices."""
        return [self._add(p).info() for p in load_profiles(path)]

    def devices(self) -> list[DeviceInfo]:
        out = [d.info() for d in self._devices]
        for i, err in enumerate(self.profile_errors):
            out.append(DeviceInfo(f"npu:invalid{i}", "invalid profile file", "npu", {}, (), False, err))
        return out

    def cache_fingerprint(self) -> dict[str, Any]:
        # memory in use changes from run to run; the chip definitions do not
        return {"name": self.name, "version": str(self.version),
                "chips": [(d.id, d.profile.chip_id, d.profile.digest) for d in self._devices]}

    def device(self, selector: str | None = None) -> NpuDevice:
        """The device for ``selector`` (id, chip name or chip id); the first when None."""
        if selector is None:
            return self._devices[0]
        for d in self._devices:
            if selector in (d.id, d.profile.name, d.profile.chip_id):
                return d
        raise ConfigError(f"backend 'npu_emu' has no device or chip profile {selector!r}; devices: "
                          + ", ".join(f"{d.id} ({d.profile.name})" for d in self._devices))

    def resolve(self, options: CompileOptions) -> NpuDevice:
        """The device ``options`` ask for (``device``, ``extra['profile']``,
        after loading ``extra['profile_file']``); with none named, the first
        chip that computes in the requested precision (int8 models need an int8 chip)."""
        pf = options.extra.get("profile_file")
        if pf:
            self.add_profiles(pf)
        sel = options.device if options.device is not None else options.extra.get("profile")
        if sel is None and options.precision == "int8":
            return next((d for d in self._devices if "int8" in d.profile.dtypes), self._devices[0])
        return self.device(None if sel is None else str(sel))

    # ---------------------------------------------------------- capability
    def _capability(self, graph: Graph, options: CompileOptions) -> Capability:
        dev = self.resolve(options)
        cap = Capability(self.name)
        an = Analysis(graph, dev.profile, options.precision)
        for node in graph.nodes:
            try:
                reason = why_unsupported(node, an)
            except Exception as e:
                reason = f"capability check failed: {type(e).__name__}: {e}"
            if reason is None:
                cap.supported.add(node.name)
            else:
                cap.rejected[node.name] = reason
        return cap

    def _estimate_cost(self, graph: Graph, options: CompileOptions) -> dict[str, float]:
        """Simulated seconds per node: the lowered program's cycles / clock,
        charged to the node producing each instruction's output (nodes fused
        into another cost 0; boundary casts go to the first node)."""
        dev = self.resolve(options)
        low = lower_graph(graph, dev.profile, options.precision)
        clock = dev.profile.clock_mhz * 1e6
        out = {n.name: 0.0 for n in graph.nodes}
        producer = {v.name: n.name for n in graph.nodes for v in n.outputs}
        extra = 0.0
        for ins in low.program.instrs:
            node = producer.get(ins.node.split(",")[0])
            if node is not None:
                out[node] += ins.cycles / clock
            else:
                extra += ins.cycles / clock
        if out and extra:
            first = graph.nodes[0].name
            out[first] += extra
        return out

    # ------------------------------------------------------------- compile
    def _compile(self, graph: Graph, options: CompileOptions) -> NpuPartition:
        dev = self.resolve(options)
        try:
            low = lower_graph(graph, dev.profile, options.precision)
        except Unsupported as e:
            raise CompileError(f"npu_emu cannot compile partition {graph.name!r} for chip "
                               f"{dev.profile.name!r}: {e}") from None
        try:
            part = NpuPartition(self, dev, low.program, low.weights, graph.name)
        except DeviceMemoryError as e:
            raise CompileError(f"npu_emu cannot load partition {graph.name!r}: {e}") from None
        part.producers = {v.name: n.name for n in graph.nodes for v in n.outputs}
        self._current = dev
        return part

    def load_compiled(self, blob: bytes, options: CompileOptions) -> NpuPartition:
        meta, program, weights = decode(blob)
        producer = f"nnrt-backend-npu-emu {__version__}"
        if meta.get("producer", producer) != producer:  # kernel operands may differ between versions
            raise OfflineModelError(f"offline model was compiled by {meta.get('producer')!r}; this is "
                                    f"{producer!r}; recompile it")
        chip = str(meta.get("chip_id", program.chip_id))
        if options.extra.get("profile_file"):
            self.add_profiles(options.extra["profile_file"])
        if options.device is not None or options.extra.get("profile"):
            dev = self.resolve(options)
        else:
            dev = next((d for d in self._devices if d.profile.chip_id == chip), None)
            if dev is None:
                raise OfflineModelError(
                    f"offline model was compiled for chip {chip!r}, which no npu_emu device provides; devices: "
                    + ", ".join(f"{d.id} ({d.profile.chip_id})" for d in self._devices))
        if dev.profile.chip_id != chip or program.chip_id != chip:
            raise OfflineModelError(f"offline model was compiled for chip {chip!r}; device {dev.id} is "
                                    f"{dev.profile.chip_id!r}; recompile it for this chip")
        if meta.get("chip_digest") not in (None, dev.profile.digest):
            raise OfflineModelError(f"offline model was compiled for a different definition of chip {chip!r} "
                                    "(its profile changed); recompile it")
        try:
            part = NpuPartition(self, dev, program, weights, str(meta.get("name", "offline")), meta)
        except DeviceMemoryError as e:
            raise CompileError(f"npu_emu cannot load the offline model: {e}") from None
        producers = meta.get("producers")
        if isinstance(producers, dict):
            part.producers = {k: v for k, v in producers.items() if isinstance(k, str) and isinstance(v, str)}
        self._current = dev
        return part

    # ------------------------------------------------------------- tensors
    def _target(self, device: str | None) -> NpuDevice:
        """Explicit device, else the current one (last compiled / loaded, like a driver context)."""
        return self._current if device is None else self.device(device)

    def allocate(self, shape: Sequence[int], dtype: Any, device: str | None = None) -> NpuTensor:
        return NpuTensor(self._target(device), shape, dtype)

    def to_device(self, array: np.ndarray, device: str | None = None) -> NpuTensor:
        if isinstance(array, NpuTensor):
            return array if device is None else self.migrate(array, self.device(device))
        a = np.asarray(array)
        if a.dtype.kind not in "fiub":
            raise ExecutionError(f"npu_emu cannot hold {a.dtype} tensors")
        t = NpuTensor(self._target(device), a.shape, a.dtype)
        t.data[...] = a
        with self.transfers.lock:
            self.transfers.to_device += 1
            self.transfers.bytes_to_device += a.nbytes
        return t

    def to_host(self, tensor: Any) -> np.ndarray:
        if not isinstance(tensor, NpuTensor):
            return np.asarray(tensor)
        out = tensor.data.copy()
        with self.transfers.lock:
            self.transfers.to_host += 1
            self.transfers.bytes_to_host += out.nbytes
        return out

    def migrate(self, t: NpuTensor, dev: NpuDevice) -> NpuTensor:
        """Copy ``t`` into the memory of another chip ``dev`` (a counted device-to-device copy)."""
        new = NpuTensor(dev, t.shape, t.dtype)
        new.data[...] = t.data
        with self.transfers.lock:
            self.transfers.device_to_device += 1
        return new

    def host_view(self, tensor: Any) -> np.ndarray | None:
        # device memory is shared with the host (like NNRt's shared-memory tensors)
        return tensor.data if isinstance(tensor, NpuTensor) else None

    def owns(self, tensor: Any) -> bool:
        return isinstance(tensor, NpuTensor) and tensor.device.backend_ref() is self

    def copy_counts(self) -> dict[str, int]:
        """Host<->device transfers done so far."""
        return self.transfers.as_dict()
