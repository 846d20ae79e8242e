"""``OnnxRuntimeBackend``: delegates partitions to ONNX Runtime sessions."""
from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Mapping, Sequence

import numpy as np
import onnxruntime as ort

from nnrt_core.plugin_api import Backend, Capability, CompiledPartition, CompileOptions, DeviceInfo
from nnrt_core.errors import ConfigError
from nnrt_core.plugin_api import ExternalWeights
from nnrt_core.ir import DataType, Graph, Node
from nnrt_core.plugin_api import get_logger

from nnrt_onnxruntime import warmup
from nnrt_onnxruntime.dtypes import EXOTIC_BY_ORT_TYPE, from_ortvalue, to_ortvalue
from nnrt_onnxruntime.offline import PARTITION_WEIGHTS, OptimizedModel, external_arrays, machine_fingerprint
from nnrt_onnxruntime.partition import OrtPartition, unpack_blob
from nnrt_onnxruntime.version import __version__
from nnrt_onnxruntime.providers import device_index, list_devices, normalize_providers, provider_kind

if TYPE_CHECKING:  # capability and export: imported by the methods that place or compile (a session file needs neither)
    from nnrt_onnxruntime.capability import Prober

__all__ = ["OnnxRuntimeBackend"]

log = get_logger("nnrt.onnxruntime")


class OnnxRuntimeBackend(Backend):
    """Runs partitions as ONNX Runtime sessions on ORT's execution providers.

    Memory model: with a CPU default device (``host_memory = True``) tensors
    cross partition boundaries as numpy arrays that ORT reads and writes in
    place.  When the default device is an accelerator (CUDA...), or
    ``ortvalue_io`` is set, the instance has ``host_memory = False``: tensors
    stay ``OrtValue`` s between ORT partitions and are copied to/from the host
    only at boundaries with other backends (``to_device``/``to_host``).
    """

    name = "onnxruntime"
    version = f"{__version__}+ort{ort.__version__}"
    device_type = "cpu"
    default_priority = 50
    # no "precision": fp16 conversion is not implemented (the CPU provider has no fp16 kernels)
    supported_options = frozenset({"num_threads"})
    host_memory = True
    fresh_outputs = True  # ONNX Runtime returns new arrays, also for an Identity/Reshape of an input
    #: compile only exports the partition (and reads its weights in place): a whole-graph
    #: partition is handed over without a copy of the session graph
    compiles_read_only = True
    #: force OrtValue I/O (None = only when the default device is not the CPU)
    ortvalue_io: ClassVar[bool | None] = None

    def __init__(self) -> None:
        self._available = list(ort.get_available_providers())
        self._devices = list_devices(self._available)
        default = self._devices[0] if self._devices else None
        if default is not None:
            self.device_type = default.type
        on_device = default is not None and provider_kind(default.name).memory != "cpu"
        self.host_memory = not (self.ortvalue_io if self.ortvalue_io is not None else on_device)
        self._default_mem = (provider_kind(default.name).memory, 0) if default is not None else ("cpu", 0)
        self._probers: dict[str | None, Prober] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------- devices
    def _availability(self) -> str | None:
        if not self._devices:
            return f"onnxruntime {ort.__version__} offers no local execution provider ({self._available})"
        return None

    def devices(self) -> list[DeviceInfo]:
        return list(self._devices)

    def find_device(self, selector: str | None) -> DeviceInfo:
        """By id (``cuda:0``), provider name, or short name (``cuda``);
        ``<short>:<n>`` selects device ``n`` of that provider."""
        if selector is not None:
            base = selector.split(":", 1)[0].lower()
            for d in self._devices:
                if selector in (d.id, d.name) or base == d.id.split(":")[0]:
                    self.device_index(selector)  # validates the index
                    return d
        return super().find_device(selector)

    #: the device number of a selector such as ``cuda:1`` (0 without one)
    device_index = staticmethod(device_index)

    def cache_fingerprint(self) -> dict[str, Any]:
        """The base facts plus the CPU features and ORT version (cached
        partitions hold ORT's machine-specific optimized graphs) and the
        known-deviation rules (a plan placed under other rules is not reused)."""
        from nnrt_onnxruntime.deviations import rules_digest

        return {**super().cache_fingerprint(), "machine": machine_fingerprint(), "deviation_rules": rules_digest()}

    def prepare_build(self, options: Mapping[str, Any]) -> None:
        """With ``warm_up="heap"`` (the default) on the CPU provider alone:
        the allocator tuned and the heap prefault started on a thread now,
        while the model loads and is optimized (:func:`.warmup.begin_build`);
        the partition's warm-up waits for it."""
        named = options.get("providers")
        try:
            cpu = ([p for p, _ in normalize_providers(named)] == ["CPUExecutionProvider"] if named is not None
                   else self._default_mem[0] == "cpu" and self.device_type == "cpu")
        except ConfigError:  # the compile reports it
            return
        warmup.begin_build(options, cpu)

    # ---------------------------------------------------------- capability
    def prober(self, options: CompileOptions | None = None) -> Prober:
        """The prober for the cache chosen by ``extra["capability_cache"]``
        (a path, ``False`` for memory only, default: the per-user cache)."""
        from nnrt_onnxruntime.capability import CapabilityCache, Prober

        choice = (options.extra or {}).get("capability_cache") if options is not None else None
        key = None if choice is None else str(choice)
        with self._lock:
            p = self._probers.get(key)
            if p is None:
                if choice is False:
                    cache = CapabilityCache(ort.__version__, Path("/nonexistent"), persist=False)
                elif choice is None:
                    cache = CapabilityCache(ort.__version__)
                elif isinstance(choice, (str, Path)):
                    cache = CapabilityCache(ort.__version__, Path(choice))
                else:
                    raise ConfigError(f"onnxruntime option 'capability_cache' must be a path or false, got {choice!r}")
                p = self._probers[key] = Prober(cache)
        return p

    def _capability(self, graph: Graph, options: CompileOptions) -> Capability:
        from nnrt_onnxruntime.crash_guard import crash_risk
        from nnrt_onnxruntime.deviations import known_deviation
        from nnrt_onnxruntime.export import wants_precise_kernels

        wants_precise_kernels(graph, options.extra)  # a bad value is the user's ConfigError, not a fallback
        prober = self.prober(options)
        deviations = (options.extra or {}).get("known_deviations", True) is not False
        cap = Capability(self.name)
        try:
            for node in graph.nodes:
                reason = crash_risk(node)
                if reason is None and deviations:
                    reason = known_deviation(node)
                if reason is None:
                    reason = prober.check(node)
                if reason is None:
                    cap.supported.add(node.name)
                else:
                    cap.rejected[node.name] = reason
        finally:
            prober.cache.save()
        return cap

    def _supports(self, node: Node, options: CompileOptions) -> str | None:
        from nnrt_onnxruntime.crash_guard import crash_risk
        from nnrt_onnxruntime.deviations import known_deviation

        reason = crash_risk(node)
        if reason is not None:
            return reason
        if (options.extra or {}).get("known_deviations", True) is not False:
            reason = known_deviation(node)
            if reason is not None:
                return reason
        return self.prober(options).check(node)

    # ------------------------------------------------------------- compile
    def _compile(self, graph: Graph, options: CompileOptions) -> CompiledPartition:
        try:
            return self._partition(graph, options, relaxed=False)
        except Exception as e:
            # ORT type-checks dead If branches with the static shapes of the values they read; a
            # model saved with symbolic dims may only pass with those: retry with ranks only
            if "InferenceError" not in str(e) or not any(n.subgraphs() for n in graph.nodes):
                raise
            log.info("onnxruntime: partition %s fails type inference with static shapes (%s); "
                     "compiling it with ranks only", graph.name, str(e).splitlines()[0][:200])
            return self._partition(graph, options, relaxed=True)

    def _partition(self, graph: Graph, options: CompileOptions, *, relaxed: bool) -> OrtPartition:
        # large initializers stay our arrays: ORT reads them in place (no
        # protobuf copy), and every session of the partition shares them
        from nnrt_onnxruntime.export import export_partition, relax_static_shapes, wants_precise_kernels

        weights = ExternalWeights(PARTITION_WEIGHTS)
        precise = wants_precise_kernels(graph, options.extra)
        proto = export_partition(graph, weights, precise=precise)
        if relaxed:
            relax_static_shapes(proto)
        part = OrtPartition(self, graph.name, [v.name for v in graph.inputs], [v.name for v in graph.outputs],
                            proto.SerializeToString(), options, {n.name: n.op_type for n in graph.nodes},
                            weights=weights)
        if relaxed:
            part.note("shapes", "ranks only (static shapes fail ORT's type inference of a sub-graph)")
        part.note("precise_kernels", precise)
        return part

    def load_compiled(self, blob: bytes, options: CompileOptions) -> CompiledPartition:
        from nnrt_core.errors import CompileError, NnrtError

        header, model, weights = unpack_blob(blob)
        optimized = None
        if header.get("optimized_for") is not None:
            if header["optimized_for"] != machine_fingerprint():
                raise CompileError(
                    f"compiled onnxruntime partition {header.get('name')!r} was optimized for another machine or "
                    f"onnxruntime ({header['optimized_for']}); this one is {machine_fingerprint()}; recompile it")
            optimized = OptimizedModel(model, weights)
        external = None
        if optimized is None and header.get("weights") is not None:
            if header["weights"] != PARTITION_WEIGHTS:
                raise CompileError(f"compiled onnxruntime partition {header.get('name')!r} names an unknown "
                                   f"weights region {header['weights']!r}")
            external = external_arrays(model, weights, f"compiled partition {header.get('name')!r}",
                                       PARTITION_WEIGHTS)
        try:
            return OrtPartition(self, str(header["name"]), header["inputs"], header["outputs"], model, options,
                                header.get("node_ops") or {}, optimized=optimized, weights=external)
        except NnrtError:
            raise
        except Exception as e:
            raise CompileError(f"backend {self.name!r} could not load compiled partition "
                               f"{header.get('name')!r}: {type(e).__name__}: {e}") from e

    @staticmethod
    def max_ir_version() -> int:
        """Highest model IR version the installed onnxruntime accepts."""
        from nnrt_onnxruntime.export import max_ir_version

        return max_ir_version()

    # ------------------------------------------------------------- tensors
    def allocate(self, shape: Sequence[int], dtype: Any, device: str | None = None) -> Any:
        if self.host_memory:
            return np.empty(tuple(shape), dtype=np.dtype(dtype))
        dev, idx = self._mem_for(device)
        return ort.OrtValue.ortvalue_from_shape_and_type(list(shape), np.dtype(dtype).type, dev, idx)

    def to_device(self, array: np.ndarray, device: str | None = None) -> Any:
        if self.host_memory or not isinstance(array, np.ndarray) or array.dtype == object:
            return array  # sequences and strings travel as host objects
        dev, idx = self._mem_for(device)
        try:
            elem = int(DataType.from_numpy(array.dtype))
        except (TypeError, ValueError):
            elem = 0
        if elem in EXOTIC_BY_ORT_TYPE.values():
            return to_ortvalue(array, elem)  # raw bytes on the host; ORT copies to the device when bound
        return ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(array), dev, idx)

    def to_host(self, tensor: Any) -> np.ndarray:
        if isinstance(tensor, ort.OrtValue):
            elem = EXOTIC_BY_ORT_TYPE.get(tensor.data_type()) if tensor.is_tensor() else None
            return tensor.numpy() if elem is None else from_ortvalue(tensor, elem)
        return tensor

    def owns(self, tensor: Any) -> bool:
        if self.host_memory:
            return isinstance(tensor, np.ndarray)
        return isinstance(tensor, ort.OrtValue)

    def _mem_for(self, device: str | None) -> tuple[str, int]:
        if device is None:
            return self._default_mem
        d = self.find_device(device)
        return provider_kind(d.name).memory, self.device_index(device)
