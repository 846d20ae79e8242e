"""Partitions stored already optimized, for fast warm starts.

Creating an ``InferenceSession`` for ResNet50 from plain ONNX bytes costs
150–200 ms here: the protobuf parse of 100 MB of weights, ORT's graph
optimizers, and the NCHWc layout transform.  When the core says a partition
will be cached (``CompileOptions.serializable``), the first session also
writes ORT's own optimized graph (``optimized_model_filepath``) with its
weights as external data.  A warm start then loads that graph with ORT's
optimizers off and hands the weights over as ``OrtValue`` s that point into
the cache file's bytes (``add_external_initializers``): 15–60 ms, the same
outputs and the same run time.

ORT's optimized graphs at level "all" are specific to the machine (the
NCHWc block size follows the CPU's vector width), so they are stored with
:func:`machine_fingerprint` and refused elsewhere; the onnxruntime backend
also puts the fingerprint in its cache key.  Offline files written by
``nnrt compile`` keep the portable, unoptimized partition, unless the build
asked for machine-specific forms (``ScheduleConfig(machine_specific=True)``,
``nnrt compile --machine-specific``): then they store the optimized graph too
and start like a warm cache entry (SqueezeNet's ``InferenceSession``: 18 ms of
CPU from the portable graph, 4 ms from the optimized one).

ONNX Runtime (1.32) copies every initializer into memory of its own when it
creates a session, the ones handed over with ``add_external_initializers``
included: for ResNet50 that copy (100 MB of fresh pages) was most of a warm
session's creation.  :func:`feed_as_inputs` turns the weights whose
consumers are plain kernels into graph inputs instead, fed on every run from
the same read-only views (ORT reads input buffers in place): session
creation then touches none of them.
"""
from __future__ import annotations

import os
import platform
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from nnrt_core.errors import CompileError
from nnrt_core.plugin_api import ExternalWeights
from nnrt_core.plugin_api import P
from nnrt_core.plugin_api import EXTERNAL, make_tensor_value_info, read_initializers, tensor_dtype_to_np_dtype
from nnrt_core.plugin_api import get_logger, nested_external_tensors

__all__ = ["OptimizedModel", "machine_fingerprint", "optimize_and_save", "external_arrays", "feed_as_inputs",
           "FEED_MIN_BYTES", "OPTIMIZED_WEIGHTS", "PARTITION_WEIGHTS"]

#: CPU features that change the kernels (and layouts) ORT's optimizers pick
_FEATURES = ("sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512dq",
             "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_tile", "amx_int8", "amx_bf16", "asimd", "sve")

#: (domain, op type) of kernels that take a weight as an ordinary input (no
#: constant required; ORT's CPU kernels then skip only their pre-packing)
_FEEDABLE_OPS = frozenset({
    ("", "Conv"), ("", "ConvTranspose"), ("", "Gemm"), ("", "MatMul"), ("", "Add"), ("", "Sub"), ("", "Mul"),
    ("", "Div"), ("", "BatchNormalization"), ("", "InstanceNormalization"), ("", "LayerNormalization"),
    ("", "PRelu"), ("", "Gather"), ("", "Concat"), ("com.microsoft.nchwc", "Conv"), ("com.microsoft", "FusedConv"),
    ("com.microsoft", "FusedGemm"), ("com.microsoft", "FusedMatMul")})
#: numpy dtypes ORT's Python binding reads in place as run inputs
_FEEDABLE_DTYPES = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.float16, np.int8, np.uint8, np.int16,
                                                    np.uint16, np.int32, np.uint32, np.int64, np.uint64, np.bool_))

#: smaller weights stay initializers: copying them costs ORT less than feeding
#: them costs every run (a few microseconds per input)
FEED_MIN_BYTES = 64 << 10
#: rewriting the graph to feed weights needs onnx's protos: a process that has
#: not imported onnx (a session file's load) rewrites only when ORT would
#: otherwise copy at least this much (~40 ms of fresh pages, about what
#: importing onnx costs)
FEED_IMPORT_BYTES = 96 << 20

log = get_logger("nnrt.onnxruntime")

_OPT_NAME, _BIN_NAME = "optimized.onnx", "optimized.bin"
#: external-data locations: ORT's optimized graph's weights, and a plain
#: partition's weights (its large initializers, kept out of the model bytes)
OPTIMIZED_WEIGHTS, PARTITION_WEIGHTS = _BIN_NAME, "weights.bin"


@lru_cache(maxsize=1)
def machine_fingerprint() -> dict[str, Any]:
    """onnxruntime's version, the CPU architecture and its vector features."""
    import onnxruntime as ort

    flags: set[str] = set()
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith(("flags", "Features")):
                flags = set(line.split(":", 1)[1].split())
                break
    except OSError:
        pass
    return {"onnxruntime": ort.__version__, "arch": platform.machine(),
            "features": sorted(f for f in _FEATURES if f in flags)}


class OptimizedModel:
    """ORT's optimized graph (weights external) and its weights region."""

    def __init__(self, model: bytes, weights: bytes) -> None:
        self.model = model
        self.weights = weights


def optimize_and_save(create_session: Any, so: Any) -> tuple[Any, OptimizedModel | None]:
    """Run ``create_session(so)`` with ORT writing its optimized graph to a
    temporary folder, and return (session, the optimized model or ``None``
    when ORT wrote nothing usable: also when a weight it wrote external sits
    in a sub-graph, e.g. an ``If`` branch, which a warm start cannot hand over
    with ``add_external_initializers``; the portable form is stored then)."""
    import tempfile  # with shutil, random, bz2, lzma: only builds that store ORT's optimized graph

    with tempfile.TemporaryDirectory(prefix="nnrt-ort-") as d:
        so.optimized_model_filepath = os.path.join(d, _OPT_NAME)
        so.add_session_config_entry("session.optimized_model_external_initializers_file_name", _BIN_NAME)
        so.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
        sess = create_session(so)
        try:
            model = Path(d, _OPT_NAME).read_bytes()
            weights = Path(d, _BIN_NAME).read_bytes() if Path(d, _BIN_NAME).exists() else b""
        except OSError:
            return sess, None
    try:
        nested = nested_external_tensors(model)
    except ValueError:
        return sess, None
    if nested:
        log.info("onnxruntime: optimized graph not kept: %d weight(s) in sub-graphs are external (%s)",
                 len(nested), nested[0])
        return sess, None
    return sess, OptimizedModel(model, weights)


def external_arrays(model: bytes, weights: Any, what: str, location: str = OPTIMIZED_WEIGHTS) -> ExternalWeights:
    """Every external tensor of ``model`` (all must point at ``location``)
    resolved to a numpy view of ``weights`` (no copy).  Offsets, lengths,
    dtypes and shapes are checked: the bytes come from a file."""
    try:
        initializers = read_initializers(model)  # no onnx: a session file's load imports none
    except (ValueError, UnicodeDecodeError) as e:
        raise CompileError(f"{what}: the optimized onnxruntime graph does not parse: {e}") from None
    region = memoryview(weights).cast("B")
    out = ExternalWeights(location)
    out.size = len(region)
    for t in initializers:
        if t.data_location != EXTERNAL:
            continue
        info = {e.key: e.value for e in t.external_data}
        if info.get("location") != location:
            raise CompileError(f"{what}: initializer {t.name!r} points outside the stored weights "
                               f"(location {info.get('location')!r})")
        try:
            dtype = np.dtype(tensor_dtype_to_np_dtype(t.data_type))
            off, n = int(info.get("offset", 0)), int(info["length"])
        except (KeyError, ValueError, TypeError) as e:
            raise CompileError(f"{what}: initializer {t.name!r} has malformed external data ({e})") from None
        count = int(np.prod(t.dims, dtype=np.int64)) if len(t.dims) else 1
        if off < 0 or n != count * dtype.itemsize or off + n > len(region) or dtype.kind in "OUSV":
            raise CompileError(f"{what}: initializer {t.name!r} ({dtype} {list(t.dims)}) does not fit the stored "
                               f"weights (offset {off}, length {n}, region {len(region)} bytes)")
        out.names.append(t.name)
        out.arrays.append(np.frombuffer(region, dtype, count, off).reshape(tuple(t.dims)))
        out.offsets.append(off)
    return out


def worth_feeding(weights: ExternalWeights) -> bool:
    """Whether :func:`feed_as_inputs` pays here: onnx is imported already, or
    the weights it would feed hold :data:`FEED_IMPORT_BYTES` or more."""
    import sys

    if "onnx" in sys.modules:
        return True
    return sum(a.nbytes for a in weights.arrays
               if a.dtype in _FEEDABLE_DTYPES and a.nbytes >= FEED_MIN_BYTES) >= FEED_IMPORT_BYTES


def feed_as_inputs(model: bytes, weights: ExternalWeights) -> tuple[bytes, ExternalWeights, dict[str, np.ndarray]]:
    """(``model`` with some of ``weights`` turned from initializers into graph
    inputs, the weights left as initializers, ``{name: array}`` of the ones to
    feed on every run).  A weight is fed when it has at least
    :data:`FEED_MIN_BYTES`, every node using it is a :data:`_FEEDABLE_OPS`
    kernel of the main graph and its dtype one ORT reads in place; the others
    stay initializers (ORT copies them)."""
    proto = P.ModelProto.FromString(bytes(model))
    arrays = dict(zip(weights.names, weights.arrays))
    ok = {n for n, a in arrays.items() if a.dtype in _FEEDABLE_DTYPES and a.nbytes >= FEED_MIN_BYTES}
    for node in proto.graph.node:
        if (node.domain if node.domain != "ai.onnx" else "", node.op_type) not in _FEEDABLE_OPS:
            ok.difference_update(node.input)
    ok.difference_update(o.name for o in proto.graph.output)  # a weight that is itself an output stays too
    for sub in _subgraphs(proto.graph):  # a weight used inside a sub-graph stays an initializer
        for node in sub.node:
            ok.difference_update(node.input)
    if not ok:
        return model, weights, {}
    fed, kept = {}, []
    for t in proto.graph.initializer:
        if t.name in ok:
            fed[t.name] = arrays[t.name]
            proto.graph.input.append(make_tensor_value_info(t.name, t.data_type, list(t.dims)))
        else:
            kept.append(t)
    del proto.graph.initializer[:]
    proto.graph.initializer.extend(kept)
    rest = ExternalWeights(weights.location)
    rest.size = weights.size
    for name, arr, off in zip(weights.names, weights.arrays, weights.offsets):
        if name not in fed:
            rest.names.append(name)
            rest.arrays.append(arr)
            rest.offsets.append(off)
    return proto.SerializeToString(), rest, fed


def _subgraphs(graph: Any) -> list[Any]:
    """Every graph nested in ``graph``'s nodes (If/Loop/Scan bodies), recursively."""
    AttributeProto = P.AttributeProto
    out = []
    for node in graph.node:
        for a in node.attribute:
            subs = [a.g] if a.type == AttributeProto.GRAPH else list(a.graphs) if a.type == AttributeProto.GRAPHS \
                else []
            for g in subs:
                out += [g, *_subgraphs(g)]
    return out
