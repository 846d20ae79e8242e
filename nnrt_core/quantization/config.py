"""``QuantizationConfig``: what to quantize and how, validated on construction."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from nnrt_core.errors import ConfigError

__all__ = ["QuantizationConfig", "METHODS", "ACTIVATION_TYPES"]

#: calibration methods (how an activation's clipping range is chosen)
METHODS = ("minmax", "percentile", "entropy")
#: element types of quantized activations
ACTIVATION_TYPES = ("int8", "uint8")


@dataclass(frozen=True)
class QuantizationConfig:
    """Post-training static quantization options.

    method
        ``minmax`` (observed range), ``percentile`` (clip at ``percentile`` of
        the value distribution) or ``entropy`` (TensorRT-style KL-divergence
        threshold).
    percentile
        for ``percentile``: the percentage of values kept inside the range
        (each tail for asymmetric ranges, of ``|x|`` for symmetric ones).
    symmetric
        activations symmetric around zero (int8, zero point 0; what e.g.
        TensorRT expects) instead of asymmetric (a zero point fitted to the
        range; ReLU outputs use all 256 levels).
    activation_type
        ``int8`` or ``uint8`` for asymmetric activations (symmetric ones are int8).
    per_channel
        weights of Conv/Gemm/MatMul quantized per output channel (else per tensor).
    num_bins
        histogram bins over ``[0, max|x|]`` for percentile/entropy.
    batch_size
        samples per run when the model's batch dimension is dynamic.
    op_types
        quantize only nodes of these op types (``None`` = every float op).
    exclude_nodes
        node names left in float.
    quantize_outputs
        also quantize graph outputs (needed for an int8-only accelerator to
        run the last op; the output stays float, through DequantizeLinear).
    """

    method: str = "minmax"
    percentile: float = 99.99
    symmetric: bool = False
    activation_type: str = "int8"
    per_channel: bool = True
    num_bins: int = 2048
    batch_size: int = 32
    op_types: tuple[str, ...] | None = None
    exclude_nodes: tuple[str, ...] = field(default_factory=tuple)
    quantize_outputs: bool = True

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ConfigError(f"quantization method must be one of {list(METHODS)}, got {self.method!r}")
        p = self.percentile
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not math.isfinite(p) or not 50.0 < p <= 100.0:
            raise ConfigError(f"percentile must be a number in (50, 100], got {p!r}")
        object.__setattr__(self, "percentile", float(p))
        if self.activation_type not in ACTIVATION_TYPES:
            raise ConfigError(f"activation_type must be one of {list(ACTIVATION_TYPES)}, got {self.activation_type!r}")
        for name in ("symmetric", "per_channel", "quantize_outputs"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be true or false, got {getattr(self, name)!r}")
        if self.symmetric and self.activation_type == "uint8":
            raise ConfigError("symmetric activations are int8 (zero point 0); use activation_type='int8' "
                              "or asymmetric quantization for uint8")
        for name, lo, hi in (("num_bins", 128, 1 << 16), ("batch_size", 1, 1 << 16)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise ConfigError(f"{name} must be an integer in [{lo}, {hi}], got {v!r}")
        if self.op_types is not None:
            ops = self.op_types
            if isinstance(ops, str) or not all(isinstance(o, str) and o for o in ops):
                raise ConfigError(f"op_types must be a list of op type names, got {ops!r}")
            object.__setattr__(self, "op_types", tuple(ops))
        ex = self.exclude_nodes
        if isinstance(ex, str) or not all(isinstance(n, str) for n in ex):
            raise ConfigError(f"exclude_nodes must be a list of node names, got {ex!r}")
        object.__setattr__(self, "exclude_nodes", tuple(ex))

    def replace(self, **changes: Any) -> "QuantizationConfig":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["op_types"] = list(self.op_types) if self.op_types is not None else None
        d["exclude_nodes"] = list(self.exclude_nodes)
        return d
