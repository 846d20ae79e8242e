"""``model_digest``: the sha256 that keys a model in the compiled-model cache."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator

from nnrt_core.frontends.detect import is_tflite_source
from nnrt_core.frontends.onnx.export import to_onnx
from nnrt_core.frontends.onnx.onnx_api import P
from nnrt_core.frontends.onnx.protos import attribute_graphs, subgraphs
from nnrt_core.ir import Graph, Model

__all__ = ["model_digest"]


def model_digest(model: Any) -> str | None:
    """A sha256 over the model's bytes (and its external data files' names,
    sizes and times), or ``None`` when the model cannot be keyed."""
    import hashlib  # only sessions with a cache folder key their model (~3 ms to import)

    h = hashlib.sha256()
    if isinstance(model, (bytes, bytearray, memoryview)):
        h.update(bytes(model))
    elif isinstance(model, (str, os.PathLike)):
        p = Path(model)
        try:
            data = p.read_bytes()
        except OSError:
            return None  # the loader reports a missing file properly
        h.update(data)
        if b"location" in data and not is_tflite_source(data):  # maybe external data: key its files too
            try:
                for entry in _external_files(P.ModelProto.FromString(data), p.parent):
                    h.update(entry.encode())
            except Exception:
                return None
    elif isinstance(model, P.ModelProto) or \
            getattr(getattr(model, "DESCRIPTOR", None), "full_name", None) == "onnx.ModelProto":
        h.update(model.SerializeToString())
    elif isinstance(model, (Model, Graph)):
        try:
            h.update(to_onnx(model).SerializeToString())
        except Exception:
            return None
    else:
        return None
    return h.hexdigest()


def _external_files(proto: P.ModelProto, folder: Path) -> Iterator[str]:
    """"location:size:mtime" of every external tensor's file (-1 for a missing file)."""
    for t in _tensors(proto):
        if t.HasField("data_location") and t.data_location == P.TensorProto.EXTERNAL:
            loc = next((e.value for e in t.external_data if e.key == "location"), "")
            f = folder / loc
            st = f.stat() if f.is_file() else None
            yield f"{loc}:{st.st_size if st else -1}:{st.st_mtime_ns if st else -1}"


def _tensors(proto: P.ModelProto) -> Iterator[P.TensorProto]:
    """The model's tensors in the order the digest has always used: the
    initializers of every graph, then the tensor attributes of every graph,
    then those of local functions."""
    yield from _initializers(proto.graph)
    yield from _attribute_tensors(proto.graph)
    for f in proto.functions:
        yield from _attribute_tensors(f)


def _initializers(g: P.GraphProto) -> Iterator[P.TensorProto]:
    yield from g.initializer
    for n in g.node:
        for sub in subgraphs(n):
            yield from _initializers(sub)


def _attribute_tensors(g: P.GraphProto | P.FunctionProto) -> Iterator[P.TensorProto]:
    for n in g.node:
        for a in n.attribute:
            if a.HasField("t"):
                yield a.t
            yield from a.tensors
            for sub in attribute_graphs(a):
                yield from _attribute_tensors(sub)
