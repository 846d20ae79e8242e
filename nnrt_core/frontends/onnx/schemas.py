"""Operator schemas and opset versions known to the installed ``onnx`` (and,
for contrib operators, ``onnxruntime``)."""
from __future__ import annotations

import functools
from typing import Any, Mapping

from nnrt_core.frontends.onnx import onnx_api
from nnrt_core.frontends.onnx.onnx_api import P, real_onnx

__all__ = ["ONNX_DOMAINS", "onnx_domains", "convert_opset", "default_opset", "has_onnx_op", "ir_version_for", "newest_opset_version",
           "newest_domain_version", "oldest_onnx_version", "onnx_op_names", "onnx_schema", "onnxruntime_schemas"]

@functools.lru_cache(maxsize=1)
def onnx_domains() -> frozenset[str]:
    """The domains whose schemas (with shape inference) ship with the installed
    onnx; computed on first use (listing every schema takes ~10 ms)."""
    return frozenset({""} | {s.domain for s in onnx_api.get_all_schemas_with_history()}) - {"ai.onnx"}


def __getattr__(name: str) -> Any:
    if name == "ONNX_DOMAINS":  # the former constant: ``onnx_domains()``
        return onnx_domains()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def newest_opset_version() -> int:
    """The newest version of the default ONNX domain the installed onnx knows."""
    return onnx_api.onnx_opset_version()


def newest_domain_version(domain: str) -> int:
    """The newest version of ONNX domain ``domain`` (1 when it has no schema)."""
    return max((s.since_version for s in onnx_api.get_all_schemas_with_history() if s.domain == domain),
               default=1)


@functools.lru_cache(maxsize=None)
def onnx_op_names(domain: str) -> tuple[str, ...]:
    """Every operator name onnx has a schema for in ``domain``, sorted."""
    return tuple(sorted({s.name for s in onnx_api.get_all_schemas_with_history() if s.domain == domain}))


def has_onnx_op(op_type: str, domain: str) -> bool:
    """True when onnx has a schema of ``op_type`` in ``domain`` (any version)."""
    return onnx_api.has_schema(op_type, domain)


@functools.lru_cache(maxsize=4096)
def onnx_schema(op_type: str, domain: str, opset: int) -> Any | None:
    """onnx's newest ``OpSchema`` of ``op_type`` whose version is <= ``opset``, or ``None``
    (cached: every node of a model asks, and onnx builds a new Python object per call)."""
    try:
        return onnx_api.get_schema(op_type, opset, domain)
    except onnx_api.SchemaError:
        return None


def oldest_onnx_version(op_type: str, domain: str) -> int:
    """The first opset of ``domain`` that has ``op_type`` (which must exist)."""
    return min(s.since_version for s in onnx_api.get_all_schemas_with_history()
               if s.name == op_type and s.domain == domain)


@functools.lru_cache(maxsize=1)
def onnxruntime_schemas() -> dict[tuple[str, str], list[Any]]:
    """(domain, op) -> onnxruntime's contrib schemas of every version, oldest
    first (empty without onnxruntime); operators onnx itself defines are left out."""
    try:
        from onnxruntime.capi import onnxruntime_pybind11_state as ort_state
    except ImportError:
        return {}
    get_all = getattr(ort_state, "get_all_operator_schema", None)
    if get_all is None:
        return {}
    table: dict[tuple[str, str], list[Any]] = {}
    for s in get_all():
        domain = "" if s.domain == "ai.onnx" else s.domain
        if domain in onnx_domains() and onnx_api.has_schema(s.name, domain):
            continue  # onnx's own schema (with shape inference) wins
        table.setdefault((domain, s.name), []).append(s)
    for versions in table.values():
        versions.sort(key=lambda s: s.since_version)
    return table


def ir_version_for(opsets: Mapping[str, int]) -> int:
    """The lowest ONNX IR version that allows ``opsets`` (the newest one for
    opsets onnx's table does not list)."""
    try:
        helper = real_onnx().helper  # its table of IR versions (not on the load path)
        return helper.find_min_ir_version_for(
            [helper.make_opsetid(d, v) for d, v in opsets.items()], ignore_unknown=True)
    except Exception:  # an opset onnx's table does not list
        return P.IR_VERSION


def default_opset(proto: P.ModelProto) -> int | None:
    """The version of the default ONNX domain ``proto`` imports, if any."""
    return next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)


def convert_opset(proto: P.ModelProto, version: int) -> P.ModelProto:
    """``proto`` converted to opset ``version`` by ``onnx.version_converter``
    (which raises for operators it cannot adapt)."""
    real_onnx()  # a rare path: the real package
    from onnx import version_converter
    return version_converter.convert_version(proto, version)
