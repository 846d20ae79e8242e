"""Which nodes onnxruntime can run, decided by probing, never by a list.

Every distinct node *signature* — domain, op type, opset, input element types
and ranks, output arity and the attributes (tensor attributes by dtype/shape,
sub-graphs by a hash of their ONNX bytes) — is probed once: a one-node model
(:func:`~nnrt_onnxruntime.export.build_probe_model`) is loaded into an
``InferenceSession`` on the CPU provider.  Success means ORT has a kernel for
that signature; failure is recorded with the first line of ORT's message.

Nodes with sub-graphs (If/Loop/Scan) are probed whole, bodies included, so a
body op ORT lacks rejects the node.  A probe only creates a session (it does
not run), so runtime-only failures surface as ``ExecutionError``.

Answers are cached in memory and on disk, in
``$NNRT_CACHE_DIR/ort_capability-<onnxruntime version>.json`` (default
``~/.cache/nnrt``): plain JSON ``{signature: null | reason}``, written
atomically, merged with what other processes wrote, and ignored (then
rewritten) when unreadable or written by another onnxruntime version.
"""
from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

import numpy as np
import xxhash

from nnrt_core.plugin_api import graph_to_onnx
from nnrt_core.ir import AttrKind, Node, OptionalType, SequenceType, TensorType, ValueType
from nnrt_core.plugin_api import get_logger
from nnrt_core.plugin_api import user_cache_file, write_atomic

from nnrt_onnxruntime.export import UntypedInputError, build_probe_model, quiet_session_options
from nnrt_onnxruntime.messages import first_line

__all__ = [
    "CACHE_FORMAT",
    "default_cache_path",
    "node_signature",
    "CapabilityCache",
    "Prober",
    "first_line",
    "clean_ort_message",
    "has_static_dims",
]

log = get_logger("nnrt.onnxruntime")

CACHE_FORMAT = 2  # 2: node signatures hashed with XXH3-128 (was sha1)


def default_cache_path(ort_version: str) -> Path:
    """``$NNRT_CACHE_DIR`` (or ``$XDG_CACHE_HOME/nnrt``, ``~/.cache/nnrt``) / ``ort_capability-<ver>.json``."""
    return user_cache_file("ort_capability", ort_version)


#: compiled on first use (re caches it): only error messages need it
_SRC_RE = r"/onnxruntime_src/\S+:\d+ (?:[^()]*\((?:[^()]|\([^()]*\))*\)(?: const)? )?"


def clean_ort_message(e: BaseException | str) -> str:
    """First line of an ORT error without its C++ source location/signature."""
    return re.sub(_SRC_RE, "", first_line(e)).strip()


# ------------------------------------------------------------- signatures
def _type_sig(t: ValueType | None) -> str:
    if isinstance(t, TensorType):
        return f"{int(t.dtype)}r{'?' if t.shape is None else len(t.shape)}"
    if isinstance(t, SequenceType):
        return f"seq({_type_sig(t.elem)})"
    if isinstance(t, OptionalType):
        return f"opt({_type_sig(t.elem)})"
    return "?"


def _tensor_sig(x: Any) -> list:
    arr = np.asarray(x)
    return [str(arr.dtype), list(arr.shape)]


def _attr_sig(a) -> list:
    k = a.kind
    if a.ref_attr_name:
        return [a.name, int(k), "ref", a.ref_attr_name]
    v = a.value
    if k == AttrKind.TENSOR:
        val: Any = _tensor_sig(v)
    elif k == AttrKind.TENSORS:
        val = [_tensor_sig(x) for x in v]
    elif k == AttrKind.GRAPH:
        val = xxhash.xxh3_128_hexdigest(graph_to_onnx(v).SerializeToString())
    elif k == AttrKind.GRAPHS:
        val = [xxhash.xxh3_128_hexdigest(graph_to_onnx(g).SerializeToString()) for g in v]
    elif k in (AttrKind.TYPE_PROTO, AttrKind.TYPE_PROTOS):
        val = str(v)
    elif k == AttrKind.FLOAT:
        val = repr(float(v))
    elif k == AttrKind.FLOATS:
        val = [repr(float(x)) for x in v]
    else:
        val = v
    return [a.name, int(k), val]


def _shape_sig(t: ValueType | None) -> Any:
    if isinstance(t, TensorType):
        return None if t.shape is None else [d if isinstance(d, int) else None for d in t.shape]
    if isinstance(t, (SequenceType, OptionalType)):
        return _shape_sig(t.elem)
    return None


def has_static_dims(node: Node) -> bool:
    """True when some input has a known dimension (an exact probe could differ)."""
    return any(v is not None and isinstance(s := _shape_sig(v.type), list) and any(d is not None for d in s)
               for v in node.all_inputs())


def node_signature(node: Node, *, exact_shapes: bool = False) -> str:
    """A stable key for everything that decides whether ORT accepts ``node``
    (input ranks, or with ``exact_shapes`` the static dims too)."""
    ins = [None if v is None else _type_sig(v.type) for v in node.inputs]
    if exact_shapes:
        ins = [[s, _shape_sig(v.type) if v is not None else None] for s, v in zip(ins, node.inputs)]
    outer = [_type_sig(v.type) for v in node.outer_inputs()] if node.subgraphs() else []
    outs = [bool(v.name) for v in node.outputs]
    attrs = [_attr_sig(node.attributes[k]) for k in sorted(node.attributes)]
    onnx_opset = node.graph.opset_for("") if (node.domain and node.graph is not None) else None
    body = json.dumps([ins, outer, outs, attrs, onnx_opset], separators=(",", ":"), default=str)
    digest = xxhash.xxh3_128_hexdigest(body.encode())[:24]  # a key, not a seal (no hashlib import: ~3 ms)
    tag = "=" if exact_shapes else "#"
    return f"{node.domain or 'ai.onnx'}::{node.op_type}@{node.opset}{tag}{digest}"


# ------------------------------------------------------------------ cache
class CapabilityCache:
    """Probe answers (``None`` = supported, else the reason), in memory and in
    a JSON file keyed by the onnxruntime version.  Thread-safe."""

    def __init__(self, ort_version: str, path: Path | str | None = None, *, persist: bool = True) -> None:
        self.ort_version = ort_version
        self.path = Path(path) if path is not None else default_cache_path(ort_version)
        self.persist = persist
        self._entries: dict[str, str | None] = {}
        self._new: dict[str, str | None] = {}
        self._loaded = False
        self._corrupt = False  #: the file was unreadable: rewrite it on the next save
        self._lock = threading.Lock()

    def __len__(self) -> int:
        self._ensure_loaded()
        return len(self._entries)

    def _ensure_loaded(self) -> None:
        if not self._loaded:
            with self._lock:
                if not self._loaded:
                    if self.persist:
                        self._entries.update(self._read())
                    self._loaded = True

    def _read(self) -> dict[str, str | None]:
        """Entries of the file; ``{}`` when missing, unreadable or foreign."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except OSError as e:
            log.warning("cannot read capability cache %s: %s", self.path, e)
            return {}
        try:
            data = json.loads(text)
            if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT:
                raise ValueError("unknown format")
            if data.get("onnxruntime") != self.ort_version:
                raise ValueError(f"written by onnxruntime {data.get('onnxruntime')!r}")
            entries = data.get("entries")
            if not isinstance(entries, dict):
                raise ValueError("no entries table")
        except ValueError as e:  # JSONDecodeError is a ValueError
            log.warning("ignoring capability cache %s (%s); it will be rewritten", self.path, first_line(e))
            self._corrupt = True
            return {}
        return {k: v for k, v in entries.items() if isinstance(k, str) and (v is None or isinstance(v, str))}

    def lookup(self, key: str) -> tuple[bool, str | None]:
        """``(found, reason)``."""
        self._ensure_loaded()
        try:
            return True, self._entries[key]
        except KeyError:
            return False, None

    def store(self, key: str, reason: str | None) -> None:
        self._ensure_loaded()
        with self._lock:
            self._entries[key] = reason
            self._new[key] = reason

    @property
    def dirty(self) -> bool:
        return bool(self._new) or self._corrupt

    def save(self) -> None:
        """Merge new answers into the file (atomic replace); errors are logged."""
        if not self.persist or not self.dirty:
            return
        with self._lock:
            merged = self._read()
            merged.update(self._entries)
            data = {"format": CACHE_FORMAT, "onnxruntime": self.ort_version, "entries": merged}
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                write_atomic(self.path, json.dumps(data, separators=(",", ":"), sort_keys=True).encode("utf-8"))
            except OSError as e:
                log.warning("cannot write capability cache %s: %s", self.path, e)
                return
            self._new.clear()
            self._corrupt = False


# ----------------------------------------------------------------- prober
class Prober:
    """Answers "can ORT run this node?" through a :class:`CapabilityCache`."""

    def __init__(self, cache: CapabilityCache) -> None:
        self.cache = cache
        self.probes = 0  #: sessions created (for tests and reports)
        self._so = None
        self._lock = threading.Lock()

    def check(self, node: Node) -> str | None:
        """``None`` when ORT can run ``node``, else the reason.

        The rank-only probe answers for every shape; when it fails and the
        node has static dims, a second probe with those dims decides (ORT's
        shape inference rejects some ops on fully dynamic inputs)."""
        reason = self._check(node, False)
        if reason is not None and has_static_dims(node):
            exact = self._check(node, True)
            if exact is None:
                return None
        return reason

    def _check(self, node: Node, exact: bool) -> str | None:
        try:
            key = node_signature(node, exact_shapes=exact)
        except Exception as e:
            return f"cannot compute the node signature: {type(e).__name__}: {first_line(e)}"
        found, reason = self.cache.lookup(key)
        if found:
            return reason
        try:
            model = build_probe_model(node, exact_shapes=exact)
        except UntypedInputError as e:
            return f"cannot probe onnxruntime: {e}"  # depends on the graph, not cached
        except Exception as e:
            reason = f"cannot export the node for onnxruntime: {type(e).__name__}: {first_line(e)}"
        else:
            reason = self._probe(model.SerializeToString())
        self.cache.store(key, reason)
        return reason

    def _probe(self, model_bytes: bytes) -> str | None:
        import onnxruntime as ort

        with self._lock:
            if self._so is None:
                self._so = quiet_session_options()
            self.probes += 1
        try:
            ort.InferenceSession(model_bytes, self._so, providers=["CPUExecutionProvider"])
        except Exception as e:
            return clean_ort_message(e)
        return None
