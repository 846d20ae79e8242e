"""Execution providers as nnrt devices, and ``CompileOptions`` -> ORT session options."""
from __future__ import annotations

from typing import Any, Mapping

from nnrt_core.plugin_api import CompileOptions, DeviceInfo
from nnrt_core.errors import ConfigError
from nnrt_core.plugin_api import get_logger
from nnrt_core.plugin_api import FrozenRecord

__all__ = [
    "ProviderKind",
    "PROVIDER_KINDS",
    "provider_kind",
    "list_devices",
    "EXTRA_OPTIONS",
    "OPT_LEVELS",
    "make_session_options",
    "normalize_providers",
    "requested_providers",
    "device_index",
]

log = get_logger("nnrt.onnxruntime")


class ProviderKind(FrozenRecord):
    """How one ORT execution provider shows up as an nnrt device."""

    __slots__ = ("short", "type", "memory", "precisions", "takes_device_id")
    short: str  #: device id prefix ("cuda" -> "cuda:0")
    type: str  #: nnrt device type: cpu | gpu | npu
    memory: str  #: OrtValue device type of its memory ("cpu", "cuda", "dml")
    precisions: tuple[str, ...]
    takes_device_id: bool

    def __init__(self, short: str, type: str, memory: str, precisions: tuple[str, ...] = ("fp32",),
                 takes_device_id: bool = False) -> None:
        for k, v in (("short", short), ("type", type), ("memory", memory), ("precisions", precisions),
                     ("takes_device_id", takes_device_id)):
            object.__setattr__(self, k, v)


#: known providers, in default-preference order (first available = default device;
#: CUDA before TensorRT, whose engine builds are slow and often fail)
PROVIDER_KINDS: dict[str, ProviderKind] = {
    "CUDAExecutionProvider": ProviderKind("cuda", "gpu", "cuda", ("fp32", "fp16"), True),
    "TensorrtExecutionProvider": ProviderKind("tensorrt", "gpu", "cuda", ("fp32", "fp16", "int8"), True),
    "ROCMExecutionProvider": ProviderKind("rocm", "gpu", "cuda", ("fp32", "fp16"), True),
    "MIGraphXExecutionProvider": ProviderKind("migraphx", "gpu", "cuda", ("fp32", "fp16"), True),
    "DmlExecutionProvider": ProviderKind("dml", "gpu", "dml", ("fp32", "fp16"), True),
    "WebGpuExecutionProvider": ProviderKind("webgpu", "gpu", "cpu"),
    "CoreMLExecutionProvider": ProviderKind("coreml", "npu", "cpu", ("fp32", "fp16")),
    "QNNExecutionProvider": ProviderKind("qnn", "npu", "cpu", ("fp32", "fp16", "int8")),
    "NnapiExecutionProvider": ProviderKind("nnapi", "npu", "cpu", ("fp32", "fp16")),
    "OpenVINOExecutionProvider": ProviderKind("openvino", "cpu", "cpu", ("fp32", "fp16")),
    "DnnlExecutionProvider": ProviderKind("dnnl", "cpu", "cpu"),
    "XnnpackExecutionProvider": ProviderKind("xnnpack", "cpu", "cpu"),
    "ACLExecutionProvider": ProviderKind("acl", "cpu", "cpu"),
    "ArmNNExecutionProvider": ProviderKind("armnn", "cpu", "cpu"),
    "CPUExecutionProvider": ProviderKind("cpu", "cpu", "cpu"),
}
#: providers that are not local devices
_NOT_DEVICES = frozenset({"AzureExecutionProvider"})



def provider_kind(name: str) -> ProviderKind:
    kind = PROVIDER_KINDS.get(name)
    if kind is not None:
        return kind
    short = name.removesuffix("ExecutionProvider").lower() or name.lower()
    return ProviderKind(short, "accelerator", "cpu")


def list_devices(available: list[str]) -> list[DeviceInfo]:
    """One device per available provider, default (preferred) first, CPU last."""
    import onnxruntime as ort

    names = [p for p in available if p not in _NOT_DEVICES]
    rank = {p: i for i, p in enumerate(PROVIDER_KINDS)}
    names.sort(key=lambda p: rank.get(p, len(rank) - 1.5))  # unknown ones just before CPU
    out = []
    for p in names:
        k = provider_kind(p)
        out.append(DeviceInfo(
            id=f"{k.short}:0",
            name=p,
            type=k.type,
            properties={"provider": p, "onnxruntime": ort.__version__, "memory": k.memory,
                        "build_device": ort.get_device()},
            precisions=("fp32",),  # fp16 conversion is not implemented by this plugin
        ))
    return out


# -------------------------------------------------------- session options
OPT_LEVELS = {
    "disable": "ORT_DISABLE_ALL",
    "none": "ORT_DISABLE_ALL",
    "basic": "ORT_ENABLE_BASIC",
    "extended": "ORT_ENABLE_EXTENDED",
    "layout": "ORT_ENABLE_LAYOUT",
    "all": "ORT_ENABLE_ALL",
}
EXECUTION_MODES = {"sequential": "ORT_SEQUENTIAL", "parallel": "ORT_PARALLEL"}

#: keys of ``ScheduleConfig.backend_options["onnxruntime"]`` this backend reads
EXTRA_OPTIONS = frozenset({
    "graph_optimization_level",
    "execution_mode",
    "intra_op_num_threads",
    "inter_op_num_threads",
    "providers",
    "provider_options",
    "log_severity_level",
    "enable_mem_pattern",
    "enable_cpu_mem_arena",
    "session_config",
    "capability_cache",
    "known_deviations",
    "precise_kernels",
    "warm_up",
})


def _int(extra: Mapping[str, Any], key: str, lo: int, hi: int) -> int | None:
    v = extra.get(key)
    if v is None:
        return None
    if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
        raise ConfigError(f"onnxruntime option {key!r} must be an integer in {lo}..{hi}, got {v!r}")
    return v


def _bool(extra: Mapping[str, Any], key: str) -> bool | None:
    v = extra.get(key)
    if v is None:
        return None
    if not isinstance(v, bool):
        raise ConfigError(f"onnxruntime option {key!r} must be true or false, got {v!r}")
    return v


def make_session_options(options: CompileOptions, cpu_only: bool = False) -> tuple[Any, dict[str, Any]]:
    """``(ort.SessionOptions, summary)`` for ``options``.

    ``num_threads`` -> ``intra_op_num_threads``; extension attributes (see
    :data:`EXTRA_OPTIONS`) are validated and applied; unknown ones raise
    :class:`ConfigError` naming the valid keys.  ``cpu_only`` (the session
    runs on the CPU provider alone): ORT's memory pattern is on (ORT's own
    default, stated in the summary) unless ``enable_mem_pattern`` says
    otherwise (see :mod:`.warmup`).
    """
    import onnxruntime as ort

    extra = dict(options.extra or {})
    unknown = sorted(set(extra) - EXTRA_OPTIONS)
    if unknown:
        raise ConfigError(f"unknown onnxruntime option(s) {unknown}; valid: {', '.join(sorted(EXTRA_OPTIONS))}")
    so = ort.SessionOptions()
    summary: dict[str, Any] = {}
    intra = _int(extra, "intra_op_num_threads", 0, 1024)
    if intra is None and options.num_threads:
        intra = options.num_threads
    if intra:
        so.intra_op_num_threads = intra
        summary["intra_op_num_threads"] = intra
    inter = _int(extra, "inter_op_num_threads", 0, 1024)
    if inter:
        so.inter_op_num_threads = inter
        summary["inter_op_num_threads"] = inter
    level = extra.get("graph_optimization_level")
    if level is not None:
        if level not in OPT_LEVELS or not hasattr(ort.GraphOptimizationLevel, OPT_LEVELS[level]):
            raise ConfigError(f"onnxruntime option 'graph_optimization_level' must be one of "
                              f"{', '.join(OPT_LEVELS)}; got {level!r}")
        so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, OPT_LEVELS[level])
    summary["graph_optimization_level"] = level or "all"
    mode = extra.get("execution_mode")
    if mode is not None:
        if mode not in EXECUTION_MODES:
            raise ConfigError(f"onnxruntime option 'execution_mode' must be one of "
                              f"{', '.join(EXECUTION_MODES)}; got {mode!r}")
        so.execution_mode = getattr(ort.ExecutionMode, EXECUTION_MODES[mode])
        summary["execution_mode"] = mode
    sev = _int(extra, "log_severity_level", 0, 4)
    so.log_severity_level = 3 if sev is None else sev  # ORT's warnings go through our log instead
    for key in ("enable_mem_pattern", "enable_cpu_mem_arena"):
        b = _bool(extra, key)
        if b is None and key == "enable_mem_pattern" and cpu_only:
            b = True  # ORT's default, as raw ORT runs: off cost 2-8 % of every run of small models (docs/plugins.md)
        if b is not None:
            setattr(so, key, b)
            summary[key] = b
    cfg = extra.get("session_config")
    if cfg is not None:
        if not isinstance(cfg, Mapping):
            raise ConfigError(f"onnxruntime option 'session_config' must be a table of strings, got {cfg!r}")
        for k, v in cfg.items():
            so.add_session_config_entry(str(k), str(v))
        summary["session_config"] = {str(k): str(v) for k, v in cfg.items()}
    return so, summary


def normalize_providers(value: Any) -> list[tuple[str, dict[str, str]]]:
    """The ``providers`` option as ``[(name, options)]``."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(f"onnxruntime option 'providers' must be a non-empty list, got {value!r}")
    out = []
    for p in value:
        if isinstance(p, str):
            out.append((p, {}))
        elif isinstance(p, (list, tuple)) and len(p) == 2 and isinstance(p[0], str) and isinstance(p[1], Mapping):
            out.append((p[0], {str(k): str(v) for k, v in p[1].items()}))
        else:
            raise ConfigError(f"onnxruntime provider entries must be a name or [name, {{options}}], got {p!r}")
    return out


def device_index(selector: str | None) -> int:
    """The device number of a selector such as ``cuda:1`` (0 without one)."""
    if selector and ":" in selector:
        idx = selector.split(":", 1)[1]
        if not idx.isdigit():
            raise ConfigError(f"device {selector!r}: the index after ':' must be a number")
        return int(idx)
    return 0


def requested_providers(backend: Any, options: CompileOptions) -> tuple[list[tuple[str, dict[str, str]]], int, str | None]:
    """(the providers a session asks for, with their options; the device
    index; the device id, or None when the providers were named explicitly)."""
    extra = options.extra or {}
    if extra.get("providers") is not None:
        return normalize_providers(extra["providers"]), 0, None
    device = backend.find_device(options.device)
    index = device_index(options.device)
    popts = {str(k): str(v) for k, v in dict(extra.get("provider_options") or {}).items()}
    if provider_kind(device.name).takes_device_id:
        popts.setdefault("device_id", str(index))
    requested = [(device.name, popts)]
    if device.name != "CPUExecutionProvider":
        requested.append(("CPUExecutionProvider", {}))
    return requested, index, f"{device.id.split(':')[0]}:{index}"
