"""``CompileOptions`` -> an OpenVINO compile config (``core.compile_model(..., config)``).

* ``precision``: ``fp32`` -> ``INFERENCE_PRECISION_HINT=f32`` always (OpenVINO's own
  default is bf16 on CPUs with AVX-512-BF16 or AMX, and f16 on GPUs: never used
  unless asked for), ``fp16`` -> ``f16``, ``bf16`` -> ``bf16``.  ``int8`` is not a hint: a
  quantized (QDQ) model runs its int8 parts under any precision.
  Under ``f32`` the CPU's run-time quantization of activations that meet
  compressed (int8/int4) weights is off too (``DYNAMIC_QUANTIZATION_GROUP_SIZE=0``
  where the device has it): it is on by default even with the f32 hint (group
  32) and moved a MatMul over int8 weights widened by ``Cast`` by 4.5e-3 of
  max|out| (0 with it off); ``backend_options`` may set it.
* ``num_threads`` -> ``INFERENCE_NUM_THREADS``; ``performance_mode`` -> ``PERFORMANCE_HINT``.
* ``backend_options={"openvino": {...}}``: the plugin's own keys
  (:data:`PLUGIN_OPTIONS`) and any writable property the device lists in
  ``SUPPORTED_PROPERTIES`` (``INFERENCE_PRECISION_HINT="bf16"`` included: asked
  for, so not behind the user's back); another key is a ``ConfigError`` naming it.
"""
from __future__ import annotations

from typing import Any, Mapping

from nnrt_openvino._core import CompileOptions, ConfigError

__all__ = ["PLUGIN_OPTIONS", "PRECISION_HINTS", "PERFORMANCE_HINTS", "writable_properties", "compile_config",
           "hint_of", "precision_problem", "check_keys", "check_plugin_options"]

#: keys of ``backend_options["openvino"]`` the plugin reads itself (not OpenVINO properties)
PLUGIN_OPTIONS = frozenset({"capability_cache", "known_deviations"})
#: nnrt precision -> OpenVINO INFERENCE_PRECISION_HINT ("auto": fp32; the build's precision
#: search asks for each reduced precision of the device explicitly)
PRECISION_HINTS = {"fp32": "f32", "auto": "f32", "fp16": "f16", "bf16": "bf16"}
#: the CPU property that quantizes activations at run time for compressed weights (0 = off)
DYNAMIC_QUANTIZATION = "DYNAMIC_QUANTIZATION_GROUP_SIZE"
#: nnrt performance_mode -> OpenVINO PERFORMANCE_HINT ("none": OpenVINO's default, LATENCY on CPU)
PERFORMANCE_HINTS = {"low": "LATENCY", "medium": "LATENCY", "high": "THROUGHPUT", "extreme": "THROUGHPUT"}
#: device capability a hint needs (OPTIMIZATION_CAPABILITIES)
_CAPABILITY_OF_HINT = {"f32": "FP32", "f16": "FP16", "bf16": "BF16"}


def writable_properties(core: Any, device: str) -> frozenset[str]:
    """The properties ``device`` lists as settable (``RW``/``WO``)."""
    props = core.get_property(device, "SUPPORTED_PROPERTIES")
    return frozenset(k for k, mode in dict(props).items() if str(mode) != "RO")


def hint_of(options: CompileOptions) -> str | None:
    """The INFERENCE_PRECISION_HINT these options ask for (``None``: int8, no hint exists)."""
    extra = options.extra or {}
    if "INFERENCE_PRECISION_HINT" in extra:
        return str(extra["INFERENCE_PRECISION_HINT"]).lower()
    return PRECISION_HINTS.get(options.precision)


def compile_config(options: CompileOptions, writable: frozenset[str], capabilities: list[str],
                   device: str) -> dict[str, Any]:
    """The OpenVINO config for ``options`` on ``device``; :class:`ConfigError`
    for an option the device cannot honour (named with the valid ones) or a
    precision it cannot compute in."""
    extra = dict(options.extra or {})
    check_keys(extra, writable, device)
    config: dict[str, Any] = {}
    problem = precision_problem(options, capabilities, device)
    if problem is not None:
        raise ConfigError(problem)
    config["INFERENCE_PRECISION_HINT"] = hint_of(options)
    if config["INFERENCE_PRECISION_HINT"] == "f32" and DYNAMIC_QUANTIZATION in writable:
        config[DYNAMIC_QUANTIZATION] = 0  # fp32 asked: no int8 activations behind the user's back
    if options.num_threads:
        config["INFERENCE_NUM_THREADS"] = int(options.num_threads)
    perf = PERFORMANCE_HINTS.get(options.performance_mode)
    if perf is not None:
        config["PERFORMANCE_HINT"] = perf
    for key, value in extra.items():
        if key not in PLUGIN_OPTIONS:
            config[key] = value if isinstance(value, (str, int, float, bool)) else str(value)
    return config


def check_keys(extra: Mapping[str, Any], writable: frozenset[str], device: str) -> None:
    """:class:`ConfigError` naming the keys of ``backend_options["openvino"]``
    that are neither the plugin's nor a settable property of ``device``."""
    unknown = sorted(k for k in extra if k not in PLUGIN_OPTIONS and k not in writable)
    if unknown:
        raise ConfigError(f"unknown openvino option(s) {unknown} for device {device}; valid: "
                          f"{', '.join(sorted(PLUGIN_OPTIONS | writable))}")
    check_plugin_options(extra)


def precision_problem(options: CompileOptions, capabilities: list[str], device: str) -> str | None:
    """Why ``device`` cannot compute in the precision ``options`` ask for, or ``None``."""
    hint = hint_of(options)
    if hint is None:
        return (f"openvino has no precision hint for precision={options.precision!r}: int8 comes from a quantized "
                "(QDQ) model, which runs at precision='fp32'")
    need = _CAPABILITY_OF_HINT.get(hint)
    if need is None:
        return f"openvino INFERENCE_PRECISION_HINT {hint!r} is not one of {', '.join(_CAPABILITY_OF_HINT)}"
    if capabilities and need not in capabilities:
        return (f"OpenVINO device {device} cannot compute in {hint} (its OPTIMIZATION_CAPABILITIES: "
                f"{', '.join(capabilities)})")
    return None


def check_plugin_options(extra: Mapping[str, Any]) -> None:
    """Types of the plugin's own keys."""
    choice = extra.get("capability_cache")
    if choice is not None and choice is not False and not isinstance(choice, str):
        raise ConfigError(f"openvino option 'capability_cache' must be a path or false, got {choice!r}")
    kd = extra.get("known_deviations")
    if kd is not None and not isinstance(kd, bool):
        raise ConfigError(f"openvino option 'known_deviations' must be true or false, got {kd!r}")
