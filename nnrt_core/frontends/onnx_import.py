"""ONNX file / bytes / ``ModelProto`` -> nnrt IR.

Parsing, checking, function inlining and shape inference are done by the
``onnx`` package; this module only translates protos into IR objects and adds
the safety checks an untrusted file needs: external data must stay inside the
model's folder, and no tensor may claim more bytes than its data holds or than
``MAX_TENSOR_BYTES``.

:func:`load_onnx` maps external data files instead of reading them: a tensor
of ``MMAP_MIN_BYTES`` or more that numpy can view in place (any fixed-width
type that is not bit-packed, at an offset aligned to its item size) becomes a
read-only array over one ``mmap`` of its file (one map per file and load), so
its bytes are never copied.  Other external tensors are read into the proto.
"""
from __future__ import annotations

import heapq
import logging
import mmap
import os
import sys
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import onnx
import onnx.inliner
from onnx import numpy_helper

from nnrt_core.errors import ConfigError, ModelLoadError
from nnrt_core.ir import (
    Attribute,
    AttrKind,
    DataType,
    Graph,
    Model,
    Node,
    OptionalType,
    SequenceType,
    TensorType,
    Value,
    ValueType,
)

__all__ = ["load_onnx", "MAX_TENSOR_BYTES", "MMAP_MIN_BYTES", "parse_model_proto", "apply_input_shapes",
           "clear_unknown_dims", "refine_static_shapes", "sort_nodes"]

log = logging.getLogger("nnrt.onnx")

#: Largest tensor (bytes) a model may declare; larger ones are refused before allocation.
MAX_TENSOR_BYTES = int(os.environ.get("NNRT_MAX_TENSOR_BYTES", 8 << 30))

#: external tensors smaller than this are read into the proto rather than
#: mapped: shape inference needs the values of small ones (Reshape targets,
#: Slice bounds) and cannot read external data
MMAP_MIN_BYTES = 4096

ModelSource = str | os.PathLike | bytes | onnx.ModelProto


def parse_model_proto(source: ModelSource) -> tuple[onnx.ModelProto, str | None]:
    """Parse ``source`` into a ``ModelProto`` with external data resolved.

    Returns the proto and the folder external data was resolved against.
    External data is read into the tensors' ``raw_data`` (a copy);
    :func:`load_onnx` maps it instead.
    """
    proto, base_dir = _parse_source(source)
    _load_external_data(proto, base_dir)
    return proto, base_dir


def _parse_source(source: ModelSource) -> tuple[onnx.ModelProto, str | None]:
    """``source`` as a ``ModelProto`` (external data not resolved) and its folder."""
    base_dir: str | None = None
    if isinstance(source, onnx.ModelProto):
        proto = source
    elif isinstance(source, (bytes, bytearray, memoryview)):
        proto = _parse_bytes(bytes(source), "<bytes>")
    elif isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.is_file():
            raise ModelLoadError(f"model file {str(path)!r} does not exist or is not a file")
        base_dir = str(path.resolve().parent)
        proto = _parse_bytes(path.read_bytes(), str(path))
    else:
        raise ModelLoadError(
            f"cannot load a model from {type(source).__name__}; expected a path, bytes, "
            "onnx.ModelProto or nnrt_core.ir.Model"
        )
    return proto, base_dir


def load_onnx(
    source: ModelSource,
    *,
    check: bool = True,
    infer_shapes: bool = True,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
) -> Model:
    """Load an ONNX model into the IR (see module docstring).

    ``input_shapes`` (input name -> concrete shape) fixes free input
    dimensions before shape inference, like ONNX Runtime's free-dimension
    overrides or OpenVINO's ``reshape``: the static shapes then propagate
    through the graph.  A name that is no graph input, a wrong rank or a size
    that contradicts a fixed dimension is a :class:`ConfigError`."""
    proto, base_dir = _parse_source(source)
    mapped: dict[str, np.ndarray] = {}  # mapped external data, see _load_external_data
    _load_external_data(proto, base_dir, mapped)
    if _needs_sorting(proto):  # ONNX Runtime accepts unsorted graphs (e.g. from fp16 converters): so do we
        proto = _copy(proto) if proto is source else proto
        sort_nodes(proto.graph)
    if check:
        try:
            onnx.checker.check_model(_for_checker(proto) if mapped else proto)
        except (onnx.checker.ValidationError, ValueError) as e:
            raise ModelLoadError(f"ONNX model is invalid: {_first_line(e)}") from e
    if proto.functions:
        try:
            proto = onnx.inliner.inline_local_functions(proto)
        except Exception as e:  # pragma: no cover - depends on onnx internals
            raise ModelLoadError(f"could not inline the model's local functions: {_first_line(e)}") from e
    owned = proto is not source  # never modify a ModelProto the caller handed us
    if _has_unknown_dims(proto):
        if not owned:
            proto, owned = _copy(proto), True
        clear_unknown_dims(proto)
    if input_shapes:
        if not owned:
            proto, owned = _copy(proto), True
        apply_input_shapes(proto, input_shapes)
    if infer_shapes:
        try:
            proto = onnx.shape_inference.infer_shapes(proto, strict_mode=False, data_prop=True)
        except Exception as e:
            log.warning("ONNX shape inference failed, continuing without it: %s", _first_line(e))
    model = _ProtoConverter(mapped).model(proto)
    model.base_dir = base_dir
    return model


# -------------------------------------------------------- node order
def _subgraphs(n: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    """The graphs in ``n``'s attributes (If branches, Loop/Scan bodies)."""
    for a in n.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            yield a.g
        elif a.type == onnx.AttributeProto.GRAPHS:
            yield from a.graphs


def _node_reads(n: onnx.NodeProto) -> Iterator[str]:
    """Names ``n`` reads: its inputs and what its sub-graphs read from outside."""
    yield from (x for x in n.input if x)
    for g in _subgraphs(n):
        inner = {x.name for x in g.input} | {t.name for t in g.initializer} | {o for m in g.node for o in m.output}
        for m in g.node:
            yield from (x for x in _node_reads(m) if x not in inner)


def _unsorted(g: onnx.GraphProto, outer: set[str]) -> bool:
    known = set(outer) | {x.name for x in g.input} | {t.name for t in g.initializer}
    produced = {o for n in g.node for o in n.output}
    for n in g.node:
        if any(x in produced and x not in known for x in _node_reads(n)):
            return True
        known.update(n.output)
        if any(_unsorted(sub, known) for sub in _subgraphs(n)):
            return True
    return False


def _needs_sorting(proto: onnx.ModelProto) -> bool:
    return _unsorted(proto.graph, set())


def sort_nodes(g: onnx.GraphProto) -> None:
    """Put the nodes of ``g`` (and of its sub-graphs) in a topological order,
    in place, keeping the given order wherever it is already valid.  Names no
    node produces (inputs, initializers, outer values) count as available;
    a cycle leaves the remaining nodes in their order (the checker reports it)."""
    for n in g.node:
        for sub in _subgraphs(n):
            sort_nodes(sub)
    nodes = list(g.node)
    producer = {o: i for i, n in enumerate(nodes) for o in n.output if o}
    deps = [{producer[x] for x in _node_reads(n) if x in producer and producer[x] != i}
            for i, n in enumerate(nodes)]
    users: list[list[int]] = [[] for _ in nodes]
    for i, d in enumerate(deps):
        for j in d:
            users[j].append(i)
    missing = [len(d) for d in deps]
    ready = [i for i, m in enumerate(missing) if m == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for u in users[i]:
            missing[u] -= 1
            if missing[u] == 0:
                heapq.heappush(ready, u)
    if len(order) < len(nodes):  # a cycle: keep the rest as it was
        done = set(order)
        order += [i for i in range(len(nodes)) if i not in done]
    sorted_nodes = [nodes[i] for i in order]
    copies = [onnx.NodeProto() for _ in sorted_nodes]
    for c, n in zip(copies, sorted_nodes):
        c.CopyFrom(n)
    del g.node[:]
    g.node.extend(copies)


# ------------------------------------------------------ free dimensions
def _value_infos(g: onnx.GraphProto) -> Iterator[onnx.ValueInfoProto]:
    """Every typed value declaration of ``g`` and its sub-graphs."""
    yield from g.input
    yield from g.output
    yield from g.value_info
    for n in g.node:
        for sub in _subgraphs(n):
            yield from _value_infos(sub)


def _tensor_shapes(tp: onnx.TypeProto) -> Iterator[onnx.TensorShapeProto]:
    kind = tp.WhichOneof("value")
    if kind in ("tensor_type", "sparse_tensor_type"):
        tt = getattr(tp, kind)
        if tt.HasField("shape"):
            yield tt.shape
    elif kind == "sequence_type":
        yield from _tensor_shapes(tp.sequence_type.elem_type)
    elif kind == "optional_type":
        yield from _tensor_shapes(tp.optional_type.elem_type)


def _unknown_dim(d: onnx.TensorShapeProto.Dimension) -> bool:
    """A dimension that says "any size" in a non-standard way: a negative
    ``dim_value`` (Paddle2ONNX writes -1) or the ``dim_param`` "?" (which
    ONNX would otherwise take for one symbol shared by every such dim)."""
    return (d.HasField("dim_value") and d.dim_value < 0) or (d.HasField("dim_param") and d.dim_param == "?")


def _has_unknown_dims(proto: onnx.ModelProto) -> bool:
    return any(_unknown_dim(d) for vi in _value_infos(proto.graph) for s in _tensor_shapes(vi.type)
               for d in s.dim)


def clear_unknown_dims(proto: onnx.ModelProto) -> int:
    """Turn negative ``dim_value`` s and ``dim_param: "?"`` into unknown
    dimensions, in place (ONNX Runtime treats both as dynamic).  Returns how
    many dimensions changed."""
    changed = 0
    for vi in _value_infos(proto.graph):
        for s in _tensor_shapes(vi.type):
            for d in s.dim:
                if _unknown_dim(d):
                    d.ClearField("dim_value")
                    d.ClearField("dim_param")
                    changed += 1
    return changed


def _dims_text(shape: onnx.TensorShapeProto) -> str:
    return "[" + ", ".join(str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?")
                           for d in shape.dim) + "]"


def apply_input_shapes(proto: onnx.ModelProto, input_shapes: Mapping[str, Sequence[int]]) -> None:
    """Fix the shapes of graph inputs of ``proto`` in place (see
    :func:`load_onnx`).  Shape inference then refines the recorded shapes
    of intermediate values (a symbolic dimension merges with the static one
    inferred)."""
    g = proto.graph
    inits = {t.name for t in g.initializer}
    inputs = {vi.name: vi for vi in g.input if vi.name not in inits}
    unknown = sorted(set(input_shapes) - set(inputs))
    if unknown:
        raise ConfigError(f"input_shapes names unknown input(s) {unknown}; the model's inputs are "
                          + ", ".join(f"{n} {_dims_text(vi.type.tensor_type.shape)}"
                                      if vi.type.HasField("tensor_type") else n for n, vi in inputs.items()))
    for name, dims in input_shapes.items():
        vi = inputs[name]
        if not vi.type.HasField("tensor_type"):
            raise ConfigError(f"input_shapes: input {name!r} is not a tensor; its shape cannot be fixed")
        tt = vi.type.tensor_type
        dims = [int(x) for x in dims]
        if tt.HasField("shape"):
            shape = tt.shape
            if len(shape.dim) != len(dims):
                raise ConfigError(f"input_shapes: input {name!r} has rank {len(shape.dim)} (shape "
                                  f"{_dims_text(shape)}), got {len(dims)} dimensions {dims}")
            for i, (d, n) in enumerate(zip(shape.dim, dims)):
                if d.HasField("dim_value") and d.dim_value >= 0 and d.dim_value != n:
                    raise ConfigError(f"input_shapes: input {name!r} has a fixed dimension {i} of size "
                                      f"{d.dim_value} (shape {_dims_text(shape)}); got {dims}")
        del tt.shape.dim[:]
        for n in dims:
            tt.shape.dim.add().dim_value = n


#: initializers with more elements than this are handed to shape inference as
#: typed inputs without data (no op infers a shape from a large tensor's values)
_REFINE_DATA_LIMIT = 4096


def refine_static_shapes(graph: Graph) -> int:
    """Re-run ONNX shape inference over ``graph`` (after graph passes have
    folded Shape chains into constants) and give every top-level node output
    whose type is not static the static type inferred for it, when that type
    agrees with what was known (element type, rank, fixed dimensions).

    Used when ``ScheduleConfig.input_shapes`` made the inputs static: ONNX's
    data propagation stops at ops like Cast, so Reshape targets computed from
    ``Shape`` stay unknown until nnrt has folded them.  Returns the number of
    values refined; inference problems leave the graph unchanged."""
    from nnrt_core.frontends.onnx_export import to_onnx

    pending = {v.name: v for n in graph.nodes for v in n.outputs
               if v.name and not (isinstance(v.type, TensorType) and v.type.is_static)}
    if not pending:
        return 0
    try:
        proto = to_onnx(graph)
        g = proto.graph
        keep = [vi for vi in g.value_info if vi.name not in pending]  # static (or non-tensor) types stay
        del g.value_info[:]
        g.value_info.extend(keep)
        big = [t for t in g.initializer if int(np.prod(t.dims, dtype=np.int64)) > _REFINE_DATA_LIMIT]
        if big:
            small = [t for t in g.initializer if int(np.prod(t.dims, dtype=np.int64)) <= _REFINE_DATA_LIMIT]
            for t in big:
                g.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
            del g.initializer[:]
            g.initializer.extend(small)
        inferred = onnx.shape_inference.infer_shapes(proto, strict_mode=False, data_prop=True)
    except Exception as e:  # an exotic graph: keep the types we have
        log.info("shape refinement skipped: %s", _first_line(e))
        return 0
    refined = 0
    for vi in list(inferred.graph.value_info) + list(inferred.graph.output):
        v = pending.get(vi.name)
        new = type_from_proto(vi.type)
        if v is None or not isinstance(new, TensorType) or not new.is_static:
            continue
        old = v.type
        if isinstance(old, TensorType):
            if old.dtype not in (DataType.UNDEFINED, new.dtype):
                continue
            if old.shape is not None and (len(old.shape) != len(new.shape) or any(
                    isinstance(a, int) and a != b for a, b in zip(old.shape, new.shape))):
                continue
        elif old is not None:
            continue
        v.type = new
        refined += 1
    return refined


def _copy(proto: onnx.ModelProto) -> onnx.ModelProto:
    c = onnx.ModelProto()
    c.CopyFrom(proto)
    return c


# ----------------------------------------------------------------- parsing
def _parse_bytes(data: bytes, what: str) -> onnx.ModelProto:
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except Exception as e:
        raise ModelLoadError(f"{what} is not a valid ONNX protobuf: {_first_line(e)}") from e
    if not proto.HasField("graph"):
        raise ModelLoadError(f"{what} holds no ONNX graph (is it an ONNX model?)")
    return proto


def _all_tensors(proto: onnx.ModelProto):
    def from_graph(g: onnx.GraphProto):
        yield from g.initializer
        for n in g.node:
            for a in n.attribute:
                if a.type == onnx.AttributeProto.TENSOR:
                    yield a.t
                elif a.type == onnx.AttributeProto.TENSORS:
                    yield from a.tensors
                elif a.type == onnx.AttributeProto.SPARSE_TENSOR:
                    yield a.sparse_tensor.values
                    yield a.sparse_tensor.indices
                elif a.type == onnx.AttributeProto.GRAPH:
                    yield from from_graph(a.g)
                elif a.type == onnx.AttributeProto.GRAPHS:
                    for g2 in a.graphs:
                        yield from from_graph(g2)

    yield from from_graph(proto.graph)
    for f in proto.functions:
        for n in f.node:
            for a in n.attribute:
                if a.type == onnx.AttributeProto.TENSOR:
                    yield a.t


#: external_data key that marks a mapped tensor (its value: the key in ``mapped``)
_MAPPED_KEY = "nnrt.mapped"


def _load_external_data(proto: onnx.ModelProto, base_dir: str | None,
                        mapped: dict[str, np.ndarray] | None = None) -> None:
    """Resolve external tensor data, refusing paths outside ``base_dir``.

    Without ``mapped`` every external tensor's bytes are read into its
    ``raw_data``.  With it (a dict to fill), a tensor numpy can view in place
    (:func:`_mappable_dtype`, at least ``MMAP_MIN_BYTES``, its offset aligned
    to its item size) keeps ``data_location: EXTERNAL`` with one more
    ``external_data`` entry, ``nnrt.mapped``, naming its entry in ``mapped``:
    a read-only ``uint8`` array over a ``mmap`` of the file (mode read, one
    map per file), which :func:`tensor_to_array` views with the tensor's
    type and shape.  The other tensors are read into ``raw_data`` as before.
    """
    maps: dict[str, mmap.mmap | None] = {}  # real path -> its map (None: empty or unmappable file)
    used: set[str] = set()  # paths with mapped tensors: their maps must stay open
    root = os.path.realpath(base_dir) if base_dir is not None else ""
    try:
        for t in _all_tensors(proto):
            if t.data_location != onnx.TensorProto.EXTERNAL:
                continue
            info = {e.key: e.value for e in t.external_data}
            where = f"tensor {t.name!r}"
            if base_dir is None:
                raise ModelLoadError(
                    f"{where} stores its data in an external file, which needs the model to be loaded "
                    "from a path (its folder locates the data)"
                )
            location = info.get("location", "")
            if not location or os.path.isabs(location):
                raise ModelLoadError(f"{where}: external data location {location!r} must be a relative path")
            path = os.path.realpath(os.path.join(root, location))
            if os.path.commonpath([root, path]) != root:
                raise ModelLoadError(
                    f"{where}: external data path {location!r} escapes the model folder {root!r}; refused"
                )
            if not os.path.isfile(path):
                raise ModelLoadError(f"{where}: external data file {location!r} not found in {root!r}")
            if mapped is not None and path not in maps:
                maps[path] = _map_file(path)
            mm = maps.get(path)
            size = len(mm) if mm is not None else os.path.getsize(path)
            try:
                offset = int(info.get("offset", 0))
                length = int(info["length"]) if "length" in info else size - offset
            except ValueError as e:
                raise ModelLoadError(f"{where}: bad external data offset/length: {e}") from e
            expected = _declared_bytes(t)  # refuses absurd sizes before anything is read
            if offset < 0 or length < 0 or offset + length > size:
                raise ModelLoadError(
                    f"{where}: external data range [{offset}, {offset + length}) is outside "
                    f"{location!r} ({size} bytes)"
                )
            if expected is not None and length != expected:
                raise ModelLoadError(
                    f"{where}: declares {expected} bytes of data but external data holds {length}"
                )
            del t.external_data[:]
            dtype = _mappable_dtype(t) if mm is not None and length >= MMAP_MIN_BYTES else None
            if mapped is not None and dtype is not None and offset % dtype.itemsize == 0:
                key = str(len(mapped))
                mapped[key] = np.frombuffer(mm, dtype=np.uint8, count=length, offset=offset)
                used.add(path)
                for k, v in (("location", location), ("offset", str(offset)), ("length", str(length)),
                             (_MAPPED_KEY, key)):
                    t.external_data.add(key=k, value=v)
                continue
            if mm is not None:
                t.raw_data = mm[offset:offset + length]
            else:
                with open(path, "rb") as f:
                    f.seek(offset)
                    t.raw_data = f.read(length)
            t.data_location = onnx.TensorProto.DEFAULT
    finally:
        for path, mm in maps.items():
            if mm is not None and path not in used:
                mm.close()


def _map_file(path: str) -> mmap.mmap | None:
    """A read-only map of ``path``; ``None`` for an empty file or one that
    cannot be mapped (its tensors are then read)."""
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                return None
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as e:
        log.info("external data file %r not mapped (%s); reading it", path, _first_line(e))
        return None


def _mappable_dtype(t: onnx.TensorProto) -> np.dtype | None:
    """The numpy type that views ``t``'s raw bytes as they are (what
    ``numpy_helper.to_array`` decodes raw data to), or ``None`` where the
    data needs decoding: strings, bit-packed types (int4, float4, 2- and
    6-bit types), unknown types, segments, or a big-endian host."""
    if sys.byteorder != "little" or t.data_type in (onnx.TensorProto.STRING, onnx.TensorProto.UNDEFINED) \
            or t.HasField("segment"):
        return None
    try:
        dt = DataType(t.data_type)
        if dt in _PACKED_TYPES:
            return None
        np_dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.data_type))
    except (ValueError, KeyError, TypeError):
        return None
    return np_dtype if np_dtype.itemsize == dt.itemsize and not np_dtype.hasobject else None


def _for_checker(proto: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``proto`` the ONNX checker accepts: it would look for mapped
    tensors' files relative to the working directory, so they become empty
    tensors of their type (the checker does not relate initializer shapes to
    nodes).  Cheap: mapped data is not in the proto."""
    c = _copy(proto)
    for t in _all_tensors(c):
        if t.data_location == onnx.TensorProto.EXTERNAL and any(e.key == _MAPPED_KEY for e in t.external_data):
            del t.external_data[:]
            t.data_location = onnx.TensorProto.DEFAULT
            del t.dims[:]
            t.dims.append(0)
    return c


def _declared_bytes(t: onnx.TensorProto) -> int | None:
    """Bytes a fixed-width tensor must hold, after checking the size limit."""
    n = 1
    for d in t.dims:
        if d < 0:
            raise ModelLoadError(f"tensor {t.name!r} has a negative dimension {list(t.dims)}")
        n *= d
    try:
        dtype = DataType(t.data_type)
    except ValueError:
        raise ModelLoadError(f"tensor {t.name!r} has unknown element type {t.data_type}") from None
    if dtype == DataType.STRING:
        return None
    packed = dtype in _PACKED_TYPES  # sub-byte types: several elements per byte
    nbytes = n if packed else n * (dtype.itemsize if dtype != DataType.UNDEFINED else 1)
    if nbytes > MAX_TENSOR_BYTES:
        raise ModelLoadError(
            f"tensor {t.name!r} declares shape {list(t.dims)} ({nbytes} bytes), above the "
            f"limit of {MAX_TENSOR_BYTES} bytes (NNRT_MAX_TENSOR_BYTES); refused"
        )
    return None if packed else nbytes


_PACKED_TYPES = frozenset(
    {DataType.INT4, DataType.UINT4, DataType.FLOAT4E2M1, DataType.INT2, DataType.UINT2,
     DataType.FLOAT6E2M3, DataType.FLOAT6E3M2}
)


def tensor_to_array(t: onnx.TensorProto, mapped: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
    """Decode a ``TensorProto``, refusing inconsistent or oversized data.

    A tensor :func:`_load_external_data` mapped is a read-only view of its
    entry in ``mapped`` (no copy); any other external tensor is refused (its
    file was never checked)."""
    declared = _declared_bytes(t)
    if t.data_location == onnx.TensorProto.EXTERNAL:
        key = next((e.value for e in t.external_data if e.key == _MAPPED_KEY), None)
        raw = mapped.get(key) if mapped is not None and key is not None else None
        dtype = _mappable_dtype(t)
        if raw is None or dtype is None:
            raise ModelLoadError(f"tensor {t.name!r} stores its data in an external file that was not loaded "
                                 "(only initializers and tensor attributes of a model loaded from a path are)")
        if declared is None or raw.nbytes != declared:
            raise ModelLoadError(f"tensor {t.name!r} declares shape {list(t.dims)} ({declared} bytes) "
                                 f"but its external data holds {raw.nbytes} bytes")
        return raw.view(dtype).reshape(tuple(t.dims))
    if t.HasField("raw_data") and declared is not None and len(t.raw_data) != declared:
        raise ModelLoadError(
            f"tensor {t.name!r} declares shape {list(t.dims)} ({declared} bytes) "
            f"but holds {len(t.raw_data)} bytes of data"
        )
    try:
        arr = numpy_helper.to_array(t)
    except Exception as e:
        raise ModelLoadError(f"tensor {t.name!r} could not be decoded: {_first_line(e)}") from e
    if arr.dtype == object:
        arr = np.array([x.decode("utf-8") if isinstance(x, bytes) else x for x in arr.flat],
                       dtype=object).reshape(arr.shape)
    return arr


# --------------------------------------------------------------- conversion
def type_from_proto(tp: onnx.TypeProto) -> ValueType | None:
    kind = tp.WhichOneof("value")
    if kind == "tensor_type" or kind == "sparse_tensor_type":
        tt = getattr(tp, kind)
        shape = None
        if tt.HasField("shape"):
            # a negative dim_value (Paddle2ONNX's -1) or dim_param "?" means "any size"
            shape = tuple(
                None if _unknown_dim(d) else d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                for d in tt.shape.dim
            )
        try:
            dtype = DataType(tt.elem_type)
        except ValueError:
            dtype = DataType.UNDEFINED
        return TensorType(dtype, shape)
    if kind == "sequence_type":
        return SequenceType(type_from_proto(tp.sequence_type.elem_type))
    if kind == "optional_type":
        return OptionalType(type_from_proto(tp.optional_type.elem_type))
    return None


class _ProtoConverter:
    """Translates protos into IR, resolving names through nested scopes.

    ``mapped``: the external data :func:`_load_external_data` mapped."""

    def __init__(self, mapped: Mapping[str, np.ndarray] | None = None) -> None:
        self.mapped = mapped

    def model(self, proto: onnx.ModelProto) -> Model:
        opsets = {(o.domain or ""): o.version for o in proto.opset_import}
        graph = self.graph(proto.graph, opsets, parent=None, scope=[])
        return Model(
            graph=graph,
            ir_version=proto.ir_version,
            producer_name=proto.producer_name,
            producer_version=proto.producer_version,
            domain=proto.domain,
            model_version=proto.model_version,
            doc=proto.doc_string,
            metadata={p.key: p.value for p in proto.metadata_props},
        )

    def graph(
        self,
        gp: onnx.GraphProto,
        opsets: dict[str, int],
        parent: Graph | None,
        scope: list[dict[str, Value]],
    ) -> Graph:
        g = Graph(gp.name or "graph", opset_imports=opsets if parent is None else {}, parent=parent,
                  doc=gp.doc_string)
        local: dict[str, Value] = {}
        types = {vi.name: type_from_proto(vi.type) for vi in gp.value_info}
        for vi in gp.output:
            types.setdefault(vi.name, type_from_proto(vi.type))
        for t in gp.initializer:
            v = Value(t.name, const=tensor_to_array(t, self.mapped))
            g.add_initializer(v)
            local[t.name] = v
        for vi in gp.input:
            if vi.name in local:
                # IR < 4 models list initializers as inputs too; we keep them as constants
                continue
            v = Value(vi.name, type_from_proto(vi.type))
            g.inputs.append(v)
            local[vi.name] = v
        chain = scope + [local]

        def lookup(name: str, node_desc: str, i: int) -> Value:
            for frame in reversed(chain):
                if name in frame:
                    return frame[name]
            raise ModelLoadError(
                f"graph {g.name!r}: {node_desc} input {i} reads {name!r}, which no earlier node, "
                "graph input or initializer defines"
            )

        for k, np_ in enumerate(gp.node):
            desc = f"node {np_.name or f'#{k}'!r} ({np_.op_type})"
            inputs = [lookup(n, desc, i) if n else None for i, n in enumerate(np_.input)]
            outputs = []
            for n in np_.output:
                v = Value(n, types.get(n))
                if n:
                    if n in local:
                        raise ModelLoadError(f"graph {g.name!r}: {desc} redefines value {n!r}")
                    local[n] = v
                outputs.append(v)
            attrs = [self.attribute(a, g, chain, desc) for a in np_.attribute]
            node = Node(
                np_.op_type,
                inputs,
                outputs,
                name=np_.name or f"{np_.op_type}_{k}",
                domain=np_.domain,
                attributes=attrs,
                doc=np_.doc_string,
            )
            g.add_node(node)
        for vi in gp.output:
            v = local.get(vi.name)
            if v is None:
                try:
                    v = lookup(vi.name, "graph output", 0)
                except ModelLoadError:
                    raise ModelLoadError(f"graph {g.name!r}: output {vi.name!r} is never produced") from None
            if v.type is None:
                v.type = type_from_proto(vi.type)
            g.outputs.append(v)
        for name, t in types.items():
            if name in local and local[name].type is None:
                local[name].type = t
        _make_names_unique(g)
        return g

    def attribute(self, a: onnx.AttributeProto, g: Graph, chain: list[dict[str, Value]], desc: str) -> Attribute:
        kind = AttrKind(a.type)
        value: Any
        try:
            if kind == AttrKind.FLOAT:
                value = float(a.f)
            elif kind == AttrKind.INT:
                value = int(a.i)
            elif kind == AttrKind.STRING:
                value = a.s.decode("utf-8", errors="surrogateescape")
            elif kind == AttrKind.TENSOR:
                value = tensor_to_array(a.t, self.mapped)
            elif kind == AttrKind.GRAPH:
                value = self.graph(a.g, {}, g, chain)
            elif kind == AttrKind.FLOATS:
                value = [float(x) for x in a.floats]
            elif kind == AttrKind.INTS:
                value = [int(x) for x in a.ints]
            elif kind == AttrKind.STRINGS:
                value = [s.decode("utf-8", errors="surrogateescape") for s in a.strings]
            elif kind == AttrKind.TENSORS:
                value = [tensor_to_array(t, self.mapped) for t in a.tensors]
            elif kind == AttrKind.GRAPHS:
                value = [self.graph(x, {}, g, chain) for x in a.graphs]
            elif kind == AttrKind.SPARSE_TENSOR:
                value = _sparse_to_dense(a.sparse_tensor, self.mapped)
                kind = AttrKind.TENSOR
            elif kind == AttrKind.TYPE_PROTO:
                value = type_from_proto(a.tp)
            elif kind == AttrKind.TYPE_PROTOS:
                value = [type_from_proto(t) for t in a.type_protos]
            else:
                raise ModelLoadError(f"{desc}: attribute {a.name!r} has unsupported kind {kind.name}")
        except ModelLoadError as e:
            if desc in str(e):
                raise
            raise ModelLoadError(f"{desc}: attribute {a.name!r}: {e}") from e
        return Attribute(a.name, kind, value, ref_attr_name=a.ref_attr_name or None)


def _sparse_to_dense(sp: onnx.SparseTensorProto, mapped: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
    values = tensor_to_array(sp.values, mapped)
    dims = tuple(sp.dims)
    n = int(np.prod(dims)) if dims else 1
    if n * values.dtype.itemsize > MAX_TENSOR_BYTES:
        raise ModelLoadError(f"sparse tensor of shape {dims} is too large to densify")
    dense = np.zeros(n, dtype=values.dtype)
    idx = tensor_to_array(sp.indices, mapped).astype(np.int64)
    if idx.ndim == 2:
        idx = np.ravel_multi_index(idx.T, dims)
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise ModelLoadError("sparse tensor index out of range")
    dense[idx.reshape(-1)] = values.reshape(-1)
    return dense.reshape(dims)


def _make_names_unique(g: Graph) -> None:
    seen: set[str] = set()
    for n in g.nodes:
        base = n.name
        k = 1
        while n.name in seen:
            n.name = f"{base}__{k}"
            k += 1
        seen.add(n.name)


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
