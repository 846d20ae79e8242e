"""OpenVINO devices (``Core().available_devices``) as nnrt devices."""
from __future__ import annotations

from typing import Any

from nnrt_openvino._core import ConfigError, DeviceInfo

__all__ = ["PROPERTIES", "PRECISION_OF_CAPABILITY", "device_id", "list_devices", "match_device"]

#: read-only device properties shown by ``nnrt devices`` (those a device lacks are left out)
PROPERTIES = ("FULL_DEVICE_NAME", "DEVICE_TYPE", "DEVICE_ARCHITECTURE", "OPTIMIZATION_CAPABILITIES",
              "RANGE_FOR_STREAMS", "RANGE_FOR_ASYNC_INFER_REQUESTS", "DEVICE_GOPS")
#: OPTIMIZATION_CAPABILITIES entry -> the precision it lets this backend compute in (INT8 is no
#: compute hint: int8 comes from a quantized model; bf16 is asked for with INFERENCE_PRECISION_HINT)
PRECISION_OF_CAPABILITY = {"FP32": "fp32", "FP16": "fp16", "BF16": "bf16"}
_TYPES = {"CPU": "cpu", "GPU": "gpu", "NPU": "npu"}


def device_id(ov_name: str) -> str:
    """``CPU`` -> ``cpu:0``, ``GPU.1`` -> ``gpu:1``, ``NPU`` -> ``npu:0``."""
    base, _, index = ov_name.partition(".")
    return f"{base.lower()}:{index if index.isdigit() else 0}"


def _plain(value: Any) -> Any:
    """A property value as JSON-friendly data."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)


def list_devices(core: Any, version: str) -> list[DeviceInfo]:
    """One :class:`DeviceInfo` per OpenVINO device, in OpenVINO's order (CPU first)."""
    out = []
    for name in core.available_devices:
        props: dict[str, Any] = {"openvino_device": name, "openvino": version}
        reason = None
        try:
            supported = set(core.get_property(name, "SUPPORTED_PROPERTIES"))
            for key in PROPERTIES:
                if key in supported:
                    props[key] = _plain(core.get_property(name, key))
        except Exception as e:  # a device whose plugin does not answer: listed, not usable
            reason = f"OpenVINO cannot read the properties of {name}: {type(e).__name__}: {e}"
        caps = props.get("OPTIMIZATION_CAPABILITIES") or []
        precisions = tuple(p for c, p in PRECISION_OF_CAPABILITY.items() if c in caps) or ("fp32",)
        out.append(DeviceInfo(id=device_id(name), name=name, type=_TYPES.get(name.split(".")[0], "accelerator"),
                              properties=props, precisions=precisions, available=reason is None, reason=reason))
    return out


def match_device(devices: list[DeviceInfo], selector: str | None) -> DeviceInfo:
    """The device ``selector`` names: an nnrt id (``gpu:0``), an OpenVINO name
    (``GPU.0``, case-insensitive) or a bare type (``GPU`` = its first device);
    ``None``: the first.  :class:`ConfigError` listing the devices otherwise."""
    listing = ", ".join(f"{d.id} ({d.name})" for d in devices) or "none"
    if not devices:
        raise ConfigError(f"backend 'openvino' has no device (OpenVINO lists none); selector {selector!r}")
    if selector is None:
        return devices[0]
    if not isinstance(selector, str):
        raise ConfigError(f"openvino device must be a string such as 'CPU' or 'GPU.0', got {selector!r}; "
                          f"devices: {listing}")
    want = selector.strip()
    for d in devices:
        if want == d.id or want.upper() == d.name.upper():
            return d
    for d in devices:  # "GPU" / "gpu": the first GPU
        if "." not in want and ":" not in want and d.name.split(".")[0].upper() == want.upper():
            return d
    raise ConfigError(f"backend 'openvino' has no device {selector!r}; devices: {listing}")
