"""Format 2 of the NumPy backend's stored partitions: the IR graph as data.

The JSON header lists the graph's values (name, element type, shape), its
nodes (op, domain, opset, name, input and output value indices, attributes
tagged with their kind), inputs, outputs and constants (value index, offset
and size in the weights region after the header, 64-byte aligned).  A load
decodes it with no ONNX parse, checker, conversion or shape inference: every
index, name, type, shape, attribute and region range is checked here
(:class:`CompileError` naming the field and what was expected), each node
against its ONNX schema (:func:`~nnrt_core.frontends.validate_graph`, as a
loaded ONNX model is), and the NumPy program build then checks every node
against its kernel.  Constants are read-only views of the region.

Graphs this format does not hold (sub-graphs, tensor, graph or type
attributes, string constants, non-tensor values) are stored in format 1
(:mod:`nnrt_numpy.stored`).
"""
from __future__ import annotations

import json
import math
from typing import Any, Sequence

import numpy as np

from nnrt_core.plugin_api import check_static_sizes
from nnrt_core.errors import CompileError, GraphError, MemoryBudgetError, ModelLoadError
from nnrt_core.plugin_api import validate_graph
from nnrt_core.ir import Attribute, AttrKind, DataType, Graph, Node, TensorType, Value
from nnrt_numpy.kernel import REGISTRY
from nnrt_numpy.relayout import transposed

__all__ = ["ALIGN", "FORMAT", "encode_header", "graph_from_header", "graph_header", "region_bytes"]

FORMAT = 2
ALIGN = 64
MAX_RANK = 64
#: the attribute kinds stored (the rest sends the graph to format 1)
_SCALAR = {AttrKind.INT: int, AttrKind.FLOAT: float, AttrKind.STRING: str}
_LISTS = {AttrKind.INTS: int, AttrKind.FLOATS: float, AttrKind.STRINGS: str}
_KINDS = {int(k): k for k in [*_SCALAR, *_LISTS]}
_INT64 = (-(1 << 63), 1 << 63)
_DTYPES = sorted(DataType)  #: numbered 0, 1, 2 ... (ONNX's numbers)
assert [int(d) for d in _DTYPES] == list(range(len(_DTYPES)))


class _Unstorable(Exception):
    """The graph holds something format 2 does not store."""


def graph_header(graph: Graph) -> tuple[dict[str, Any], list[np.ndarray]] | None:
    """(header fields, constant arrays in region order) of ``graph``, or
    ``None`` when format 2 cannot hold it.  A ``Gemm`` with ``transB=1``
    whose constant ``B`` nothing else reads gets ``B`` stored transposed and
    ``transB=0`` (the same product; the kernel then uses the stored bytes)."""
    try:
        return _Packer(graph).header()
    except _Unstorable:
        return None


class _Packer:
    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.index: dict[int, int] = {}
        self.values: list[list[Any]] = []
        self.consts: list[list[int]] = []
        self.arrays: list[np.ndarray] = []
        self.offset = 0
        self.transposed = _transposable_gemm_weights(graph)

    def header(self) -> tuple[dict[str, Any], list[np.ndarray]]:
        g = self.graph
        if any(v.const is not None for v in g.inputs):
            raise _Unstorable("an input with a default value")
        inputs = [self.value(v) for v in g.inputs]
        for v in g.initializers.values():
            self.const(v)
        nodes = [self.node(n) for n in g.nodes]
        outputs = [self.index.get(id(v), -1) for v in g.outputs]
        if -1 in outputs:
            raise _Unstorable("an output no node writes")
        head = {"format": FORMAT, "name": g.name, "opsets": dict(g.opset_imports), "values": self.values,
                "inputs": inputs, "outputs": outputs, "consts": self.consts, "nodes": nodes,
                "region_bytes": self.offset}
        return head, self.arrays

    def value(self, v: Value, shape: tuple | None = None) -> int:
        t = v.type
        if t is not None and not isinstance(t, TensorType):
            raise _Unstorable(f"value {v.name!r} is a {type(t).__name__}")
        entry: list[Any] = [v.name]
        if t is not None:
            dims = shape if shape is not None else t.shape
            entry += [int(t.dtype), None if dims is None else [d if isinstance(d, (str, type(None))) else int(d)
                                                               for d in dims]]
        self.index[id(v)] = len(self.values)
        self.values.append(entry)
        return len(self.values) - 1

    def const(self, v: Value) -> int:
        arr = np.asarray(v.const)
        if arr.dtype.kind not in "biufc" or not isinstance(v.type, TensorType):
            raise _Unstorable(f"constant {v.name!r} of dtype {arr.dtype}")
        if id(v) in self.transposed:
            arr = transposed(arr)
        arr = np.ascontiguousarray(arr)
        if DataType.from_numpy(arr.dtype) != v.type.dtype:
            raise _Unstorable(f"constant {v.name!r} stored as {arr.dtype}, typed {v.type.dtype.name}")
        i = self.value(v, arr.shape)
        self.consts.append([i, self.offset, arr.nbytes])
        self.arrays.append(arr)
        self.offset += -(-arr.nbytes // ALIGN) * ALIGN
        return i

    def node(self, n: Node) -> list[Any]:
        ins = []
        for v in n.inputs:
            if v is None:
                ins.append(-1)
            elif id(v) in self.index:
                ins.append(self.index[id(v)])
            elif v.const is not None:
                ins.append(self.const(v))
            else:
                raise _Unstorable(f"node {n.name!r} reads {v.name!r} from an enclosing graph")
        attrs = {}
        for a in n.attributes.values():
            if a.kind not in _SCALAR and a.kind not in _LISTS or a.ref_attr_name:
                raise _Unstorable(f"node {n.name!r} attribute {a.name!r} of kind {a.kind.name}")
            value = _plain(n, a)
            if n.op_type == "Gemm" and a.name == "transB" and n.inputs[1] is not None \
                    and id(n.inputs[1]) in self.transposed:
                value = 0
            attrs[a.name] = [int(a.kind), value]
        outs = [self.value(v) for v in n.outputs]
        return [n.op_type, n.domain, n.opset, n.name, ins, outs, attrs]


def _plain(n: Node, a: Attribute) -> Any:
    """The JSON value of attribute ``a`` (ints as int, floats as float)."""
    want = _SCALAR.get(a.kind) or _LISTS[a.kind]
    items = list(a.value) if a.kind in _LISTS else [a.value]
    out = []
    for x in items:
        if want is str and type(x) is not str or want is not str and isinstance(x, (str, bytes)):
            raise _Unstorable(f"node {n.name!r} attribute {a.name!r} holds {type(x).__name__}")
        out.append(x if want is str else want(x))
    return out if a.kind in _LISTS else out[0]


def _transposable_gemm_weights(graph: Graph) -> set[int]:
    """Ids of the 2-D constant ``B`` inputs read once, by a ``Gemm`` with ``transB=1``."""
    reads: dict[int, int] = {}
    for n in graph.nodes:
        for v in n.inputs:
            if v is not None:
                reads[id(v)] = reads.get(id(v), 0) + 1
    outputs = {id(v) for v in graph.outputs}
    found = set()
    for n in graph.nodes:
        if n.op_type != "Gemm" or n.domain not in ("", "ai.onnx") or len(n.inputs) < 2:
            continue
        b, t = n.inputs[1], n.attributes.get("transB")
        if (b is not None and b.const is not None and np.ndim(b.const) == 2 and reads[id(b)] == 1
                and id(b) not in outputs and t is not None and t.kind == AttrKind.INT and t.value == 1):
            found.add(id(b))
    return found


def graph_from_header(head: dict[str, Any], region: memoryview) -> Graph:
    """The graph a format-2 header describes, its constants viewed in
    ``region`` (a writable region is copied first: later writes to it
    cannot change a loaded partition); :class:`CompileError` naming the
    first malformed field."""
    if not region.readonly:
        region = memoryview(bytes(region))
    try:
        return _Reader(head, region).graph()
    except (GraphError, ModelLoadError) as e:
        raise CompileError(f"stored numpy partition (format 2): {e}") from None


def _fail(what: str) -> CompileError:
    return CompileError(f"stored numpy partition (format 2): {what}")


def _int(x: Any, what: str, lo: int, hi: int) -> int:
    if type(x) is not int or not lo <= x < hi:
        raise _fail(f"{what} is {x!r}; expected an integer in [{lo}, {hi})")
    return x


def _list(x: Any, what: str, limit: int | None = None) -> list:
    if type(x) is not list or (limit is not None and len(x) > limit):
        raise _fail(f"{what} is not a list" + (f" of at most {limit} entries" if limit is not None else ""))
    return x


def _str(x: Any, what: str) -> str:
    if type(x) is not str:
        raise _fail(f"{what} is {type(x).__name__}; expected a string")
    return x


class _Reader:
    def __init__(self, head: dict[str, Any], region: memoryview) -> None:
        self.head = head
        self.region = region
        self.values: list[Value] = []
        self.defined: list[str | None] = []  # what defines each value (None: nothing yet)

    def graph(self) -> Graph:
        h = self.head
        extra = set(h) - {"format", "name", "opsets", "values", "inputs", "outputs", "consts", "nodes",
                          "region_bytes"}
        if extra:
            raise _fail(f"unknown header fields {sorted(extra)}")
        size = _int(h.get("region_bytes"), "field 'region_bytes'", 0, 1 << 62)
        if size != len(self.region):
            raise _fail(f"field 'region_bytes' is {size}, but {len(self.region)} bytes follow the header")
        opsets = h.get("opsets")
        if type(opsets) is not dict:
            raise _fail("field 'opsets' is not an object")
        for d, v in opsets.items():
            _int(v, f"opset of domain {d!r}", 1, 1 << 31)
        self.values = [self._value(i, e) for i, e in enumerate(_list(h.get("values"), "field 'values'"))]
        self.defined = [None] * len(self.values)
        inputs = [self._define(i, "graph input") for i in _list(h.get("inputs"), "field 'inputs'")]
        consts = [self._const(c) for c in _list(h.get("consts"), "field 'consts'")]
        g = Graph(_str(h.get("name"), "field 'name'"), inputs=inputs, initializers=consts, opset_imports=opsets)
        for k, n in enumerate(_list(h.get("nodes"), "field 'nodes'")):
            g.add_node(self._node(k, n))
        for i in _list(h.get("outputs"), "field 'outputs'"):
            g.outputs.append(self._ref(i, "graph output"))
        names = [v.name for v in self.values if v.name]
        if len(set(names)) != len(names):
            twice = sorted({x for x in names if names.count(x) > 1})[:3]
            raise _fail(f"value names {twice} are used more than once")
        validate_graph(g)  # each node against its onnx schema, as a loaded ONNX model
        try:  # declared shapes size the arena: none over the memory budget
            check_static_sizes(g, None)
        except MemoryBudgetError as e:
            raise _fail(str(e)) from None
        return g

    def _ref(self, i: Any, what: str) -> Value:
        """The defined value ``i`` read by ``what``."""
        _int(i, f"{what}'s value index", 0, len(self.values))
        if self.defined[i] is None:
            raise _fail(f"{what} reads value {i} ({self.values[i].name!r}), which nothing defined before it")
        return self.values[i]

    def _define(self, i: Any, what: str) -> Value:
        _int(i, f"{what}'s value index", 0, len(self.values))
        if self.defined[i] is not None:
            raise _fail(f"value {i} ({self.values[i].name!r}) is defined twice: by {self.defined[i]} and {what}")
        self.defined[i] = what
        return self.values[i]

    def _value(self, i: int, e: Any) -> Value:
        e = _list(e, f"value {i}")
        if len(e) not in (1, 3):
            raise _fail(f"value {i} has {len(e)} fields; expected [name] or [name, element type, shape]")
        name = _str(e[0], f"value {i}'s name")
        if len(e) == 1:
            return Value(name)
        dtype = _DTYPES[_int(e[1], f"value {name!r}'s element type", 0, len(_DTYPES))]
        if e[2] is None:
            return Value(name, TensorType(dtype, None))
        dims = _list(e[2], f"value {name!r}'s shape", MAX_RANK)
        if not all(type(d) is int and 0 <= d < _INT64[1] for d in dims):  # fast path: static sizes
            for d in dims:
                if not (d is None or type(d) is str or type(d) is int and 0 <= d < _INT64[1]):
                    raise _fail(f"value {name!r} has dimension {d!r}; expected a size >= 0, a name or null")
        return Value(name, TensorType(dtype, tuple(dims)))

    def _const(self, c: Any) -> Value:
        c = _list(c, "a constant")
        if len(c) != 3:
            raise _fail(f"constant {c!r} is not [value index, offset, bytes]")
        v = self._define(c[0], "a constant")
        t = v.type
        if not isinstance(t, TensorType) or not t.is_static:
            raise _fail(f"constant {v.name!r} has no static tensor type")
        try:
            dt = t.dtype.numpy
        except TypeError:
            dt = None
        if dt is None or dt.kind not in "biufc":
            raise _fail(f"constant {v.name!r} has element type {t.dtype.name}; expected a numeric one")
        want = math.prod(t.shape) * dt.itemsize
        offset = _int(c[1], f"constant {v.name!r}'s offset", 0, len(self.region) + 1)
        nbytes = _int(c[2], f"constant {v.name!r}'s size", 0, len(self.region) - offset + 1)
        if offset % ALIGN or nbytes != want:
            raise _fail(f"constant {v.name!r} at offset {offset} with {nbytes} bytes; expected an offset that is a "
                        f"multiple of {ALIGN} and {want} bytes ({t})")
        arr = np.frombuffer(self.region, dt, math.prod(t.shape), offset).reshape(t.shape)
        arr.flags.writeable = False
        v.const = arr
        return v

    def _node(self, k: int, e: Any) -> Node:
        e = _list(e, f"node {k}")
        if len(e) != 7:
            raise _fail(f"node {k} has {len(e)} fields; expected [op, domain, opset, name, inputs, outputs, "
                        f"attributes]")
        op, domain = _str(e[0], f"node {k}'s op"), _str(e[1], f"node {k}'s domain")
        name = _str(e[3], f"node {k}'s name")
        what = f"node {name!r} ({op})"
        opset = _int(e[2], f"{what}'s opset", 1, 1 << 31)
        if (domain, op) not in REGISTRY:
            raise _fail(f"node {name!r} has op {op!r} (domain {domain or 'ai.onnx'}), which no NumPy kernel implements")
        ins = [None if i == -1 else self._ref(i, f"{what} input {j}")
               for j, i in enumerate(_list(e[4], f"{what}'s inputs"))]
        outs = [self._define(i, f"{what} output {j}") for j, i in enumerate(_list(e[5], f"{what}'s outputs"))]
        attrs = e[6]
        if type(attrs) is not dict:
            raise _fail(f"{what}'s attributes are not an object")
        return Node(op, ins, outs, name=name, domain=domain, opset=opset,
                    attributes=[_attribute(what, a, spec) for a, spec in attrs.items()])


def _attribute(what: str, name: str, spec: Any) -> Attribute:
    """Attribute ``name`` of a node from its ``[kind, value]``."""
    kind = _KINDS.get(spec[0]) if type(spec) is list and len(spec) == 2 and type(spec[0]) is int else None
    if kind is None:
        raise _fail(f"{what} attribute {name!r} is {spec!r}; expected [kind, value] of kind "
                    f"{', '.join(k.name for k in _KINDS.values())}")
    if kind in _SCALAR:
        return Attribute(name, kind, _attr_value(what, name, kind, _SCALAR[kind], spec[1]))
    items = _list(spec[1], f"{what} attribute {name!r}")
    return Attribute(name, kind, [_attr_value(what, name, kind, _LISTS[kind], x) for x in items])


def _attr_value(what: str, name: str, kind: AttrKind, want: type, x: Any) -> Any:
    ok = type(x) is want and (want is not int or _INT64[0] <= x < _INT64[1])
    if not ok:
        raise _fail(f"{what} attribute {name!r} ({kind.name}) holds {x!r}; expected {want.__name__} values"
                    + (" within 64 bits" if want is int else ""))
    return x


def encode_header(head: dict[str, Any], at: int) -> bytes:
    """``head`` as JSON, padded with spaces so that what follows starts at a
    multiple of :data:`ALIGN` when the header starts at offset ``at``."""
    data = json.dumps(head, separators=(",", ":"), allow_nan=True).encode()
    return data + b" " * (-(at + len(data)) % ALIGN)


def region_bytes(arrays: Sequence[np.ndarray]) -> bytes:
    """The arrays one after another, each padded to :data:`ALIGN` bytes."""
    parts = []
    for a in arrays:
        parts.append(a.tobytes())
        parts.append(b"\0" * (-a.nbytes % ALIGN))
    return b"".join(parts)
