"""``OpenVinoBackend``: runs partitions as OpenVINO compiled models."""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from nnrt_openvino import runtime
from nnrt_openvino._core import (Backend, Capability, CompileError, CompiledPartition, CompileOptions, DeviceInfo,
                                 Graph, NnrtError, get_logger, to_onnx)
from nnrt_openvino.blob import pack_blob, unpack_blob
from nnrt_openvino.capability import CapabilityCache, Prober, first_line
from nnrt_openvino.deviations import dtype_problem, known_deviation, rules_digest, runaway_risk
from nnrt_openvino.devices import list_devices, match_device
from nnrt_openvino.options import check_keys, check_plugin_options, compile_config, precision_problem, writable_properties
from nnrt_openvino.partition import OvPartition
from nnrt_openvino.version import __version__

__all__ = ["OpenVinoBackend"]

log = get_logger("nnrt.openvino")
_OV_VERSION = runtime.ov_version()


class OpenVinoBackend(Backend):
    """Partitions exported to ONNX and compiled by OpenVINO on one of its
    devices (CPU, GPU.N, NPU).  Host memory: numpy arrays in and out."""

    name = "openvino"
    version = f"{__version__}+ov{_OV_VERSION.split('-')[0]}"
    device_type = "cpu"
    #: below onnxruntime (50): with backends="auto" and no measurement, ORT keeps what it runs
    default_priority = 45
    supported_options = frozenset({"precision", "num_threads", "performance_mode"})
    host_memory = True
    fresh_outputs = True  # outputs are copied out of the infer request
    compiles_read_only = True  # compile only exports the partition

    def __init__(self) -> None:
        self._core = runtime.core()
        self._devices = list_devices(self._core, _OV_VERSION)
        if self._devices:
            self.device_type = self._devices[0].type
        self._probers: dict[str | None, Prober] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------- devices
    def _availability(self) -> str | None:
        if not any(d.available for d in self._devices):
            return f"OpenVINO {_OV_VERSION} lists no usable device ({[d.name for d in self._devices]})"
        return None

    def devices(self) -> list[DeviceInfo]:
        return list(self._devices)

    def find_device(self, selector: str | None) -> DeviceInfo:
        """By nnrt id (``gpu:0``), OpenVINO name (``GPU.0``) or type (``GPU``)."""
        return match_device(self._devices, selector)

    def cache_fingerprint(self) -> dict[str, Any]:
        """The base facts (devices with their names and capabilities), the OpenVINO
        build and the known-deviation rules (a changed rule changes placement)."""
        return {**super().cache_fingerprint(), "openvino": _OV_VERSION, "deviation_rules": rules_digest()}

    def compile_config(self, options: CompileOptions) -> tuple[DeviceInfo, dict[str, Any]]:
        """(the device, the OpenVINO config) for ``options``; ``ConfigError`` when invalid."""
        check_plugin_options(options.extra or {})
        dev = self.find_device(options.device)
        caps = list(dev.properties.get("OPTIMIZATION_CAPABILITIES") or [])
        return dev, compile_config(options, writable_properties(self._core, dev.name), caps, dev.name)

    # ---------------------------------------------------------- capability
    def prober(self, options: CompileOptions | None = None) -> Prober:
        """The prober for the cache ``extra["capability_cache"]`` chooses (a
        path, ``False`` for memory only, default: the per-user cache)."""
        choice = (options.extra or {}).get("capability_cache") if options is not None else None
        key = None if choice is None else str(choice)
        with self._lock:
            p = self._probers.get(key)
            if p is None:
                if choice is False:
                    cache = CapabilityCache(_OV_VERSION, Path("/nonexistent"), persist=False)
                else:
                    cache = CapabilityCache(_OV_VERSION, None if choice is None else Path(choice))
                p = self._probers[key] = Prober(cache, self._core)
        return p

    def _capability(self, graph: Graph, options: CompileOptions) -> Capability:
        dev = self.find_device(options.device)  # a bad device or option: ConfigError, on purpose
        check_keys(options.extra or {}, writable_properties(self._core, dev.name), dev.name)
        cap = Capability(self.name)
        caps = list(dev.properties.get("OPTIMIZATION_CAPABILITIES") or [])
        problem = precision_problem(options, caps, dev.name)
        if problem is not None:  # never computed in another precision: every node declined
            cap.rejected = {n.name: problem for n in graph.nodes}
            return cap
        deviations = (options.extra or {}).get("known_deviations", True) is not False
        todo = []
        for node in graph.nodes:
            reason = dtype_problem(node) or runaway_risk(node) or (known_deviation(node) if deviations else None)
            if reason is None:
                todo.append(node)
            else:
                cap.rejected[node.name] = reason
        prober = self.prober(options)
        try:
            answers = prober.check_all(todo, dev.name) if todo else {}
        finally:
            prober.cache.save()
        for name, reason in answers.items():
            if reason is None:
                cap.supported.add(name)
            else:
                cap.rejected[name] = reason
        return cap

    # ------------------------------------------------------------- compile
    def _compile(self, graph: Graph, options: CompileOptions) -> CompiledPartition:
        dev, config = self.compile_config(options)
        onnx_bytes = to_onnx(graph).SerializeToString()
        try:
            compiled = self.compile_bytes(onnx_bytes, dev.name, config)
        except Exception as e:
            raise CompileError(f"OpenVINO could not compile partition {graph.name!r} on {dev.name}: "
                               f"{first_line(e)}") from e
        return self._partition(graph.name, [v.name for v in graph.inputs], [v.name for v in graph.outputs],
                               compiled, onnx_bytes, dev, config, {n.name: n.op_type for n in graph.nodes}, "onnx")

    def compile_bytes(self, onnx_bytes: bytes, device: str, config: dict[str, Any]) -> Any:
        """``Core.compile_model`` of an ONNX model given as bytes (OpenVINO errors propagate)."""
        return self._core.compile_model(self._core.read_model(onnx_bytes), device, config)

    def _partition(self, name: str, inputs: list[str], outputs: list[str], compiled: Any, onnx_bytes: bytes,
                   dev: DeviceInfo, config: dict[str, Any], node_ops: dict[str, str], loaded_from: str
                   ) -> OvPartition:
        got = str(compiled.get_property("INFERENCE_PRECISION_HINT")).lower()
        want = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}.get(config["INFERENCE_PRECISION_HINT"])
        if want is not None and want not in got:
            raise CompileError(f"OpenVINO compiled partition {name!r} for {got}, not the {want} asked for")
        info: dict[str, Any] = {
            "device": dev.name, "device_id": dev.id, "openvino": _OV_VERSION, "config": dict(config),
            "inference_precision": got, "loaded_from": loaded_from, "nodes": len(node_ops),
            "num_streams": _prop(compiled, "NUM_STREAMS"), "inference_num_threads": _prop(compiled, "INFERENCE_NUM_THREADS"),
            "optimal_requests": _prop(compiled, "OPTIMAL_NUMBER_OF_INFER_REQUESTS"),
        }
        part = OvPartition(self, name, inputs, outputs, compiled, onnx_bytes, info)
        part.node_ops = node_ops
        return part

    # ------------------------------------------------------- serialization
    def pack(self, part: OvPartition) -> bytes:
        """``part`` as bytes :meth:`load_compiled` reads (see :mod:`.blob`)."""
        try:
            exported = part.compiled.export_model().getvalue()
        except Exception as e:  # the ONNX form still loads (compiled again)
            log.info("openvino: partition %s cannot be exported (%s); storing the ONNX form only", part.name, e)
            exported = b""
        info = part.describe()
        header = {"name": part.name, "inputs": part.input_names, "outputs": part.output_names,
                  "node_ops": getattr(part, "node_ops", {}), "openvino": _OV_VERSION, "device": info["device"],
                  "device_name": self._full_name(info["device"]), "config": info["config"]}
        return pack_blob(header, part.onnx_bytes, exported)

    def _full_name(self, device: str) -> Any:
        return next((d.properties.get("FULL_DEVICE_NAME") for d in self._devices if d.name == device), None)

    def load_compiled(self, blob: bytes, options: CompileOptions) -> CompiledPartition:
        """The export when it was made here (same OpenVINO, device and config), else the ONNX form compiled again."""
        header, onnx_bytes, exported = unpack_blob(blob)
        dev, config = self.compile_config(options)
        same = (exported and header.get("openvino") == _OV_VERSION and header.get("device") == dev.name
                and header.get("device_name") == self._full_name(dev.name) and header.get("config") == config)
        try:
            if same:
                compiled, source = self._core.import_model(exported, dev.name, config), "export"
            else:
                compiled, source = self.compile_bytes(onnx_bytes, dev.name, config), "onnx"
            node_ops = header.get("node_ops") if isinstance(header.get("node_ops"), dict) else {}
            return self._partition(str(header["name"]), [str(x) for x in header["inputs"]],
                                   [str(x) for x in header["outputs"]], compiled, onnx_bytes, dev, config,
                                   node_ops, source)
        except NnrtError:
            raise
        except Exception as e:
            raise CompileError(f"backend 'openvino' could not load compiled partition {header.get('name')!r}: "
                               f"{first_line(e)}") from e


def _prop(compiled: Any, key: str) -> Any:
    try:
        value = compiled.get_property(key)
    except Exception:
        return None
    return value if isinstance(value, (int, str, bool)) else str(value)
