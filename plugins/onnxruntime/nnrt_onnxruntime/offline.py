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
``nnrt compile`` keep the portable, unoptimized partition.
"""
from __future__ import annotations

import os
import platform
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from nnrt_core.errors import CompileError
from nnrt_core.frontends.onnx import ExternalWeights

__all__ = ["OptimizedModel", "machine_fingerprint", "optimize_and_save", "external_arrays", "OPTIMIZED_WEIGHTS",
           "PARTITION_WEIGHTS"]

#: CPU features that change the kernels (and layouts) ORT's optimizers pick
_FEATURES = ("sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512dq",
             "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_tile", "amx_int8", "amx_bf16", "asimd", "sve")

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
    when ORT wrote nothing usable)."""
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
    return sess, OptimizedModel(model, weights)


def external_arrays(model: bytes, weights: Any, what: str, location: str = OPTIMIZED_WEIGHTS) -> ExternalWeights:
    """Every external tensor of ``model`` (all must point at ``location``)
    resolved to a numpy view of ``weights`` (no copy).  Offsets, lengths,
    dtypes and shapes are checked: the bytes come from a file."""
    import onnx
    from onnx import TensorProto, helper

    try:
        proto = onnx.load_model_from_string(bytes(model))
    except Exception as e:  # protobuf raises its own DecodeError
        raise CompileError(f"{what}: the optimized onnxruntime graph does not parse: {e}") from None
    region = memoryview(weights).cast("B")
    out = ExternalWeights(location)
    out.size = len(region)
    for t in proto.graph.initializer:
        if t.data_location != TensorProto.EXTERNAL:
            continue
        info = {e.key: e.value for e in t.external_data}
        if info.get("location") != location:
            raise CompileError(f"{what}: initializer {t.name!r} points outside the stored weights "
                               f"(location {info.get('location')!r})")
        try:
            dtype = np.dtype(helper.tensor_dtype_to_np_dtype(t.data_type))
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
