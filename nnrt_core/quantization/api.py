"""``quantize``: float model + calibration data -> int8 ONNX QDQ model."""
from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nnrt_core.errors import ConfigError, QuantizationError
from nnrt_core.frontends.onnx import (
    ModelCheckError,
    ModelProto,
    check_model,
    convert_opset,
    default_opset,
    parse_model_proto,
    to_onnx,
)
from nnrt_core.ir import Graph, Model, TensorType
from nnrt_core.passes import PassContext, PassManager
from nnrt_core.quantization.calibrate import TensorStats, calibrate, choose_range
from nnrt_core.quantization.config import QuantizationConfig
from nnrt_core.quantization.data import CalibrationSet, load_calibration
from nnrt_core.quantization.qdq import QParams, activation_qparams, apply_plan, plan_quantization
from nnrt_core.registry import Registry, default_registry

__all__ = ["quantize", "QuantizationResult", "QuantizationReport"]

log = logging.getLogger("nnrt.quantization")

#: opset needed for per-axis DequantizeLinear (per-channel weights)
_PER_CHANNEL_OPSET = 13
_QDQ_OPSET = 10
_QUANTIZED_OPS = frozenset({"QuantizeLinear", "DequantizeLinear", "QLinearConv", "QLinearMatMul", "ConvInteger",
                            "MatMulInteger", "DynamicQuantizeLinear"})


@dataclass
class QuantizationReport:
    """What ``quantize`` did, for people (``summary()``) and programs (``to_dict()``)."""

    config: QuantizationConfig
    samples: int
    runs: int
    nodes: int  #: nodes of the float model (after the 'basic' passes: constants and BatchNormalization folded)
    quantized_nodes: list[str]
    op_counts: dict[str, int]  #: quantized nodes per op type
    fused_activations: dict[str, str]  #: tensor kept float -> the Relu/Clip fused after it
    skipped_nodes: dict[str, str]  #: node -> why it stays float
    tensors: dict[str, dict[str, Any]]  #: activation -> range and parameters
    weights: list[dict[str, Any]]
    biases: int
    qdq_nodes: int
    size_before: int  #: serialized bytes of the float model
    size_after: int
    seconds: float
    ignored_arrays: list[str] = field(default_factory=list)
    opset_upgraded: tuple[int, int] | None = None  #: (from, to) when the model was converted first

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["config"] = self.config.to_dict()
        return d

    def summary(self) -> str:
        ops = ", ".join(f"{k}x{v}" for k, v in sorted(self.op_counts.items(), key=lambda kv: (-kv[1], kv[0])))
        lines = [
            f"calibration: {self.samples} sample(s) in {self.runs} run(s), method {self.config.method}"
            + (f" ({self.config.percentile:g}%)" if self.config.method == "percentile" else ""),
            f"quantized nodes: {len(self.quantized_nodes)} of {self.nodes} ({ops})",
            f"activations: {len(self.tensors)} tensor(s), per tensor, "
            + ("symmetric int8" if self.config.symmetric else f"asymmetric {self.config.activation_type}")
            + (f"; {len(self.fused_activations)} fused Relu/Clip" if self.fused_activations else ""),
            f"weights: {len(self.weights)} tensor(s), int8 symmetric "
            + ("per channel" if self.config.per_channel else "per tensor")
            + f"; biases: {self.biases} int32",
            f"size: {self.size_before} -> {self.size_after} bytes "
            f"({self.size_after / max(self.size_before, 1):.2f}x); {self.qdq_nodes} Q/DQ nodes added",
        ]
        if self.skipped_nodes:
            sk = ", ".join(f"{k} ({v})" for k, v in list(self.skipped_nodes.items())[:8])
            more = len(self.skipped_nodes) - 8
            lines.append(f"left in float: {sk}" + (f" and {more} more" if more > 0 else ""))
        if self.opset_upgraded:
            lines.append(f"opset upgraded {self.opset_upgraded[0]} -> {self.opset_upgraded[1]} (onnx.version_converter)")
        if self.ignored_arrays:
            lines.append(f"ignored calibration arrays (no such input): {self.ignored_arrays}")
        return "\n".join(lines)


@dataclass
class QuantizationResult:
    """The quantized model (IR and ONNX) and its report."""

    model: Model
    proto: ModelProto
    report: QuantizationReport

    def save(self, path: str | os.PathLike) -> Path:
        p = Path(path)
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(self.proto.SerializeToString())
        except OSError as e:
            raise QuantizationError(f"cannot write the quantized model to {str(p)!r}: {e}") from None
        return p


def _check_model(model: Model, cfg: QuantizationConfig) -> None:
    g = model.graph
    opset = g.opset_imports.get("", g.opset_imports.get("ai.onnx", 1))
    if opset < _QDQ_OPSET:
        raise QuantizationError(f"the model uses ONNX opset {opset}; QuantizeLinear/DequantizeLinear need opset "
                                f">= {_QDQ_OPSET} (convert the model with onnx.version_converter)")
    if cfg.per_channel and opset < _PER_CHANNEL_OPSET:
        raise QuantizationError(f"the model uses ONNX opset {opset}; per-channel weights need opset >= "
                                f"{_PER_CHANNEL_OPSET} (convert the model, or use per-tensor weights)")
    done = sorted({n.op_type for n in g.walk() if n.op_type in _QUANTIZED_OPS and n.domain in ("", "ai.onnx")})
    if done:
        raise QuantizationError(f"the model is already quantized (it has {', '.join(done)} nodes); quantize its "
                                "float version")
    for v in g.inputs:
        if not isinstance(v.type, TensorType):
            raise QuantizationError(f"model input {v.name!r} is a {v.type}; only tensor inputs can be calibrated")


def _upgrade_opset(model: Any, need: int) -> tuple[Any, tuple[int, int] | None]:
    """An ONNX model (path, bytes, proto) below opset ``need`` converted with
    ``onnx.version_converter``; IR models are returned as they are."""
    if isinstance(model, (Model, Graph)):
        return model, None
    proto, _ = parse_model_proto(model)
    opset = default_opset(proto)
    if opset is None or opset >= need:
        return proto, None
    try:
        converted = convert_opset(proto, need)
    except Exception as e:  # the converter raises bare RuntimeErrors for ops it cannot adapt
        raise QuantizationError(f"the model uses ONNX opset {opset} and quantization needs opset >= {need}; "
                                f"onnx.version_converter could not upgrade it: {str(e).splitlines()[0]}") from None
    log.info("upgraded the model from opset %d to %d for quantization", opset, need)
    return converted, (opset, need)


def _resolve_config(config: QuantizationConfig | None, options: dict[str, Any]) -> QuantizationConfig:
    """``config`` (default: a fresh one) with the keyword ``options`` applied to its fields."""
    cfg = config if config is not None else QuantizationConfig()
    if not isinstance(cfg, QuantizationConfig):
        raise ConfigError(f"config must be a QuantizationConfig, got {type(cfg).__name__}")
    if options:
        known = {f.name for f in dataclasses.fields(QuantizationConfig)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ConfigError(f"unknown quantization option(s) {unknown}; valid: {', '.join(sorted(known))}")
        cfg = cfg.replace(**options)
    return cfg


def _load_float_model(model: Any, cfg: QuantizationConfig) -> tuple[Model, tuple[int, int] | None]:
    """A fresh, topologically sorted IR copy of ``model`` (upgraded to the opset ``cfg`` needs), checked
    for quantization, and the ``(from, to)`` opset upgrade when one was made."""
    from nnrt_core.compiler.load import load_model

    model, upgraded = _upgrade_opset(model, _PER_CHANNEL_OPSET if cfg.per_channel else _QDQ_OPSET)
    m = load_model(model)
    m.graph.topological_sort()
    _check_model(m, cfg)
    return m, upgraded


def _run_basic_passes(g: Graph, reg: Registry) -> None:
    """The 'basic' passes (as ONNX Runtime's pre-processing does): constants folded, BatchNormalization
    and per-channel Mul/Add folded into the Conv before it (one int8 op instead of two), identities gone."""
    evaluator = reg.host_evaluator()
    if evaluator is None:
        raise QuantizationError("calibration runs the model on a host backend that evaluates constants "
                                "(Backend.evaluates_constants, e.g. 'numpy'); none is available")
    PassManager("basic").run(g, PassContext(evaluator=evaluator))
    g.topological_sort()


def _activation_params(activations: list[str], shared: dict[str, str], fixed: dict[str, tuple[float, float]],
                       stats: dict[str, TensorStats], cfg: QuantizationConfig) -> dict[str, QParams]:
    """Parameters of each of a plan's ``activations``: those of the tensor it ``shared`` with, the range
    ``fixed`` by its op, or its calibrated range."""
    params: dict[str, QParams] = {}
    for t in activations:  # topological order: a shared tensor's source is decided first
        src = shared.get(t)
        if src is not None and src in params:
            params[t] = params[src]
        elif t in fixed:
            params[t] = activation_qparams(*fixed[t], cfg)
        else:
            lo, hi = choose_range(stats[t], cfg)
            params[t] = activation_qparams(lo, hi, cfg)
    return params


def _checked_proto(m: Model, ir_version: int) -> ModelProto:
    """``m`` exported to ONNX and passed through the ONNX checker (full check)."""
    try:
        proto = to_onnx(m, ir_version=ir_version)
        proto.producer_name = proto.producer_name or "nnrt"
        check_model(proto, full_check=True)
    except ModelCheckError as e:  # pragma: no cover - a bug
        raise QuantizationError(f"the quantized model does not pass the ONNX checker: {e}") from e
    return proto


def _tensor_report(activations: list[str], shared: dict[str, str], fixed: dict[str, tuple[float, float]],
                   params: dict[str, QParams], stats: dict[str, TensorStats]) -> dict[str, dict[str, Any]]:
    """Per activation: observed range, chosen range and parameters, and where they came from."""
    tensors = {}
    for t in activations:
        p, st = params[t], stats[t]
        tensors[t] = {"observed_min": st.min, "observed_max": st.max, "range": [p.lo, p.hi], "scale": p.scale,
                      "zero_point": p.zero_point, "dtype": p.dtype,
                      **({"shares": shared[t]} if t in shared else {}),
                      **({"fixed_by_op": True} if t in fixed else {})}
    return tensors


def quantize(model: Any, calibration: Any, output: str | os.PathLike | None = None, *,
             config: QuantizationConfig | None = None, progress: bool | None = None,
             registry: Registry | None = None, **options: Any) -> QuantizationResult:
    """Post-training static int8 quantization of ``model``.

    ``model``: a path, bytes, ``onnx.ModelProto`` or IR ``Model``/``Graph``
    (never modified).  ``calibration``: a ``.npz`` file, a folder of ``.npz``
    files, a mapping of input name -> array (leading sample axis) or a list
    of those; see :mod:`nnrt_core.quantization.data`.  ``config`` (or
    keyword ``options`` overriding its fields, e.g. ``method="entropy"``)
    says how.  ``progress``: show a progress bar on stderr (default: when
    stderr is a terminal).  The model is written to ``output`` when given.

    Returns a :class:`QuantizationResult` whose ``proto`` is a standard ONNX
    QDQ model (checked with ``onnx.checker``)."""
    t0 = time.perf_counter()
    cfg = _resolve_config(config, options)
    reg = registry if registry is not None else default_registry()
    m, upgraded = _load_float_model(model, cfg)
    g = m.graph
    data: CalibrationSet = load_calibration(calibration, g.inputs, batch_size=cfg.batch_size)
    _run_basic_passes(g, reg)
    ir_version = max(int(m.ir_version or 0), 7)
    size_before = len(to_onnx(m, ir_version=ir_version).SerializeToString())
    nodes_before = len(g.nodes)
    plan = plan_quantization(g, cfg)
    if not plan.activations:
        raise QuantizationError("the model has no float32 activations to quantize"
                                + (f" (every node stays float: {dict(list(plan.skipped.items())[:5])})"
                                   if plan.skipped else ""))
    stats: dict[str, TensorStats] = calibrate(g, plan.activations, data, cfg, registry=reg, progress=progress)
    params = _activation_params(plan.activations, plan.shared, plan.fixed, stats, cfg)
    rep = apply_plan(g, plan, params, cfg)
    proto = _checked_proto(m, ir_version)
    report = QuantizationReport(
        config=cfg, samples=data.samples, runs=len(data.feeds), nodes=nodes_before,
        quantized_nodes=[n.name for n in plan.nodes], op_counts=dict(Counter(n.op_type for n in plan.nodes)),
        fused_activations=dict(plan.fused), skipped_nodes=dict(plan.skipped),
        tensors=_tensor_report(plan.activations, plan.shared, plan.fixed, params, stats),
        weights=rep.weights, biases=rep.biases, qdq_nodes=rep.qdq_nodes, size_before=size_before,
        size_after=len(proto.SerializeToString()), seconds=time.perf_counter() - t0,
        ignored_arrays=list(data.ignored), opset_upgraded=upgraded,
    )
    result = QuantizationResult(m, proto, report)
    if output is not None:
        result.save(output)
    log.info("quantized %d node(s) in %.2fs", len(plan.nodes), report.seconds)
    return result
