"""``GraphBuilder``: construct an nnrt model in Python, without an ONNX file.

Every call is checked against the operator's schema when it is made (arity,
attribute names and types, type constraints, shapes), so a mistake fails at
the line that caused it, with a :class:`BuilderError` naming the operator and
the node::

    b = GraphBuilder("mlp")
    x = b.input("x", "float32", ["N", 4])
    h = b.relu(b.gemm(x, w1, b1))
    b.output(b.softmax(b.gemm(h, w2, b2)), "probs")
    model = b.build()          # an nnrt_core.ir.Model: Session(model), to_onnx(model)
"""
from __future__ import annotations

import re
from typing import Any, Callable, Collection, Iterable, Mapping, Sequence

import numpy as np
import onnx

from nnrt_core.builder.helpers import TypedOps
from nnrt_core.builder.schema import (
    BuilderError,
    OpSpec,
    check_inputs,
    convert_attribute,
    find_schema,
    infer_output_types,
    newest_opset,
    type_string,
)
from nnrt_core.ir import Attribute, AttrKind, DataType, Dim, Graph, Model, Node, TensorType, Value, ValueType
from nnrt_core.ir.clone import clone_graph

__all__ = ["DEFAULT_OPSET", "GraphBuilder", "Var", "UnknownOperatorError"]

#: ONNX opset the builder writes by default (supported by every shipped backend
#: and by onnxruntime >= 1.18)
DEFAULT_OPSET = 21


class UnknownOperatorError(BuilderError, AttributeError):
    """``builder.SomeOp`` names no known operator (an ``AttributeError`` too,
    so ``hasattr`` works)."""


class Var:
    """A value of the graph being built: a graph input, a constant or a node
    output.  Carries its element type and shape; supports ``+ - * / @`` and
    unary ``-`` (each adds a node to the builder it belongs to)."""

    __slots__ = ("builder", "value")

    def __init__(self, builder: "GraphBuilder", value: Value) -> None:
        self.builder = builder
        self.value = value

    @property
    def name(self) -> str:
        return self.value.name

    @property
    def type(self) -> ValueType | None:
        return self.value.type

    @property
    def dtype(self) -> DataType | None:
        return self.value.dtype

    @property
    def shape(self) -> tuple[Dim, ...] | None:
        return self.value.shape

    @property
    def rank(self) -> int | None:
        shape = self.shape
        return None if shape is None else len(shape)

    def __repr__(self) -> str:
        return f"Var({self.name!r}, {self.type if self.type is not None else '?'})"

    def __add__(self, other: Any) -> "Var":
        return self.builder.add(self, other)

    def __radd__(self, other: Any) -> "Var":
        return self.builder.add(other, self)

    def __sub__(self, other: Any) -> "Var":
        return self.builder.sub(self, other)

    def __rsub__(self, other: Any) -> "Var":
        return self.builder.sub(other, self)

    def __mul__(self, other: Any) -> "Var":
        return self.builder.mul(self, other)

    def __rmul__(self, other: Any) -> "Var":
        return self.builder.mul(other, self)

    def __truediv__(self, other: Any) -> "Var":
        return self.builder.div(self, other)

    def __rtruediv__(self, other: Any) -> "Var":
        return self.builder.div(other, self)

    def __matmul__(self, other: Any) -> "Var":
        return self.builder.matmul(self, other)

    def __rmatmul__(self, other: Any) -> "Var":
        return self.builder.matmul(other, self)

    def __neg__(self) -> "Var":
        return self.builder.neg(self)

    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        raise BuilderError(f"value {self.name!r} is symbolic; it has no truth value while the graph is built")


Operand = Var | np.ndarray | np.generic | int | float | bool | Sequence[Any]


class GraphBuilder(TypedOps):
    """Builds an IR :class:`~nnrt_core.ir.Model` operation by operation.

    ``opset`` is the version of the default ONNX domain; ``opsets`` adds or
    pins other domains (``{"com.microsoft": 1}``), which are otherwise imported
    at their newest version on first use.
    """

    def __init__(self, name: str = "graph", *, opset: int = DEFAULT_OPSET,
                 opsets: Mapping[str, int] | None = None, doc: str = "") -> None:
        if not isinstance(name, str) or not name:
            raise BuilderError(f"graph name must be a non-empty string, got {name!r}")
        newest = onnx.defs.onnx_opset_version()
        if not isinstance(opset, int) or isinstance(opset, bool) or not 1 <= opset <= newest:
            raise BuilderError(f"opset must be an int in 1..{newest} (the newest the installed onnx knows), "
                               f"got {opset!r}")
        imports = {"": opset}
        for domain, version in dict(opsets or {}).items():
            if not isinstance(domain, str) or not isinstance(version, int) or version < 1:
                raise BuilderError(f"opsets must map domain names to positive ints, got {domain!r}: {version!r}")
            imports["" if domain == "ai.onnx" else domain] = version
        self._graph = Graph(name, opset_imports=imports, doc=doc)
        self._value_names: set[str] = set()
        self._node_names: set[str] = set()
        self._counters: dict[str, int] = {}

    # ------------------------------------------------------------ properties
    @property
    def name(self) -> str:
        return self._graph.name

    @property
    def opset(self) -> int:
        return self._graph.opset_imports[""]

    @property
    def opset_imports(self) -> dict[str, int]:
        return dict(self._graph.opset_imports)

    @property
    def inputs(self) -> list[Var]:
        return [Var(self, v) for v in self._graph.inputs]

    @property
    def outputs(self) -> list[Var]:
        return [Var(self, v) for v in self._graph.outputs]

    @property
    def nodes(self) -> list[Node]:
        """The nodes added so far (read them; do not mutate them)."""
        return list(self._graph.nodes)

    def __repr__(self) -> str:
        g = self._graph
        return (f"GraphBuilder({g.name!r}, opset {self.opset}: {len(g.inputs)} inputs, {len(g.initializers)} "
                f"constants, {len(g.nodes)} nodes, {len(g.outputs)} outputs)")

    # ---------------------------------------------------------- graph edges
    def input(self, name: str, dtype: Any, shape: Sequence[Dim] | None = None) -> Var:
        """Declare a graph input.  ``dtype``: a numpy dtype, ``"float32"``,
        :class:`~nnrt_core.ir.DataType`...; ``shape``: ints, names of symbolic
        dims (``"N"``) or ``None`` for unknown dims; ``shape=None`` = unknown rank."""
        where = f"input {name!r}"
        self._check_new_name(name, where)
        t = TensorType(_as_dtype(dtype, where), _as_shape(shape, where))
        v = Value(name, t)
        self._graph.inputs.append(v)
        self._value_names.add(name)
        return Var(self, v)

    def constant(self, value: Any, name: str | None = None, *, dtype: Any = None) -> Var:
        """Add a constant (weights, shapes...) stored as an initializer.

        Arrays keep their dtype; Python floats become float32 and Python ints
        int64 unless ``dtype`` says otherwise."""
        where = f"constant {name!r}" if name else "constant"
        arr = _as_array(value, None if dtype is None else _as_dtype(dtype, where), where)
        if name is None:
            name = self._fresh_value_name("const")
        else:
            self._check_new_name(name, where)
        v = Value(name, const=arr)
        self._graph.add_initializer(v)
        self._value_names.add(name)
        return Var(self, v)

    def output(self, value: Var, name: str | None = None) -> Var:
        """Mark ``value`` as a graph output, optionally under ``name`` (an
        ``Identity`` node is added when the value cannot simply be renamed:
        inputs, constants, values already marked)."""
        where = f"output {name!r}" if name else "output"
        var = self._own(value, where)
        v = var.value
        if type_string(v.type) is None:
            raise BuilderError(f"{where}: the type of {v.name!r} is unknown (its operator's output type could "
                               "not be inferred); outputs need an element type")
        renamable = v.producer is not None and v not in self._graph.outputs
        if name is None or name == v.name:
            if v in self._graph.outputs:
                raise BuilderError(f"{where}: {v.name!r} is already a graph output")
            if v.producer is None and v.const is None:  # a graph input passed straight through
                self._graph.outputs.append(v)
                return var
        elif renamable:
            self._check_new_name(name, where)
            self._value_names.discard(v.name)
            v.name = name
            self._value_names.add(name)
        else:
            var = self.identity(var, name=name)
            v = var.value
        if v.const is not None:  # a constant as output: give it a producer so backends see a node
            var = self.identity(var)
            v = var.value
        self._graph.outputs.append(v)
        return var

    # -------------------------------------------------------------- nodes
    def op(self, op_type: str, inputs: Iterable[Operand | None] | Operand = (),
           attrs: Mapping[str, Any] | None = None, *, domain: str = "", num_outputs: int | None = None,
           name: str | None = None) -> Var | tuple[Var, ...]:
        """Add one ``op_type`` node (any operator with a known schema).

        ``inputs``: builder values, arrays/scalars (added as constants) or
        ``None`` for omitted optional inputs; ``attrs``: attribute values
        (``None`` = leave unset).  Returns the output value, or a tuple when the
        node has several outputs (``num_outputs``, default: what the schema and
        attributes imply).  ``name`` names the node and its output value
        (``name_0``, ``name_1``... for several outputs)."""
        if not isinstance(op_type, str) or not op_type:
            raise BuilderError(f"op_type must be a non-empty string, got {op_type!r}")
        domain = "" if domain == "ai.onnx" else domain
        if name is not None:
            self._check_new_node_name(name, f"{op_type} node")
        node_name = name if name is not None else self._fresh_node_name(op_type)
        where = f"{op_type} (node {node_name!r})"
        spec = find_schema(op_type, domain, self._opset_for(domain))

        staged: list[Value] = []  # constants created for this call, added only if it succeeds
        if isinstance(inputs, (str, bytes)) or (attrs is not None and not isinstance(attrs, Mapping)):
            raise BuilderError(f"{where}: inputs must be a list of values and attrs a mapping of attribute "
                               f"names to values, got inputs={inputs!r}, attrs={attrs!r}")
        if isinstance(inputs, (Var, np.ndarray, np.generic, int, float)):
            inputs = [inputs]
        inputs = list(inputs)
        values = [self._operand(x, where, f"input {i}", staged, _sibling_dtype(spec, i, inputs))
                  for i, x in enumerate(inputs)]
        while values and values[-1] is None:
            values.pop()

        attributes = self._attributes(spec, attrs or {}, where)
        count = _default_num_outputs(spec, op_type, domain, attributes, values, where) \
            if num_outputs is None else num_outputs
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise BuilderError(f"{where}: num_outputs must be a positive int, got {count!r}")
        check_inputs(spec, values, count, where)
        if domain == "":
            _check_conv_channels(op_type, values, attributes, where)

        out_names = self._output_names(node_name, count, {v.name for v in staged})
        types = infer_output_types(spec, op_type, domain, values, out_names, list(attributes.values()),
                                   {**self._graph.opset_imports, **self._implicit_import(domain)}, where)

        self._graph.opset_imports.update(self._implicit_import(domain))
        for c in staged:
            self._graph.add_initializer(c)
            self._value_names.add(c.name)
        outputs = [Value(n, t) for n, t in zip(out_names, types)]
        for a in attributes.values():
            for g in a.graphs():
                g.parent = self._graph
        self._graph.add_node(Node(op_type, values, outputs, name=node_name, domain=domain,
                                  attributes=attributes.values()))
        self._node_names.add(node_name)
        self._value_names.update(out_names)
        result = tuple(Var(self, v) for v in outputs)
        return result[0] if len(result) == 1 else result

    def __getattr__(self, op_type: str) -> Callable[..., Var | tuple[Var, ...]]:
        """``builder.LeakyRelu(x, alpha=0.1)``: any operator of the default
        domain by its ONNX name, attributes as keywords."""
        if op_type.startswith("_") or not op_type[:1].isupper():
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {op_type!r}")
        try:
            find_schema(op_type, "", self.opset)
        except BuilderError as e:
            raise UnknownOperatorError(str(e)) from None

        def call(*inputs: Operand | None, name: str | None = None, num_outputs: int | None = None,
                 **attrs: Any) -> Var | tuple[Var, ...]:
            return self.op(op_type, inputs, attrs, name=name, num_outputs=num_outputs)

        call.__name__ = call.__qualname__ = op_type
        call.__doc__ = f"Add an ONNX {op_type} node (inputs positional, attributes as keywords)."
        return call

    # --------------------------------------------------------------- build
    def build(self) -> Model:
        """The finished model (a copy: the builder can keep growing)."""
        if not self._graph.outputs:
            raise BuilderError(f"graph {self.name!r} has no outputs; mark at least one with output()")
        graph = clone_graph(self._graph)
        graph.validate()
        return Model(graph=graph, ir_version=_ir_version(graph.opset_imports), producer_name="nnrt.builder",
                     doc=self._graph.doc)

    # ------------------------------------------------------------ helpers
    def _own(self, value: Any, where: str) -> Var:
        if isinstance(value, Var):
            if value.builder is not self:
                raise BuilderError(f"{where}: value {value.name!r} belongs to builder {value.builder.name!r}, "
                                   f"not to {self.name!r}")
            return value
        if isinstance(value, Value):
            raise BuilderError(f"{where}: got the IR value {value.name!r}; pass the Var this builder returned")
        raise BuilderError(f"{where}: expects a value of this builder (Var), got {type(value).__name__}")

    def _operand(self, x: Any, where: str, label: str, staged: list[Value], like: DataType | None) -> Value | None:
        if x is None:
            return None
        if isinstance(x, (Var, Value)):
            return self._own(x, f"{where}: {label}").value
        arr = _as_array(x, like if not isinstance(x, (np.ndarray, np.generic)) else None, f"{where}: {label}")
        v = Value(self._fresh_value_name("const", {c.name for c in staged}), const=arr)
        staged.append(v)
        return v

    def _attributes(self, spec: OpSpec, attrs: Mapping[str, Any], where: str) -> dict[str, Attribute]:
        kinds = spec.attribute_kinds()
        out: dict[str, Attribute] = {}
        for key, val in attrs.items():
            if val is None:
                continue
            if key not in kinds:
                valid = ", ".join(sorted(kinds)) or "none"
                raise BuilderError(f"{where}: unknown attribute {key!r}; {spec.name} (opset "
                                   f"{spec.since_version}) accepts: {valid}")
            kind = kinds[key][0]
            if kind == AttrKind.GRAPH or kind == AttrKind.GRAPHS:
                val = _detached_graphs(val)
            out[key] = convert_attribute(key, val, kind, where)
        missing = sorted(k for k, (_, required) in kinds.items() if required and k not in out)
        if missing:
            raise BuilderError(f"{where}: missing required attribute(s) {', '.join(missing)}")
        return out

    def _opset_for(self, domain: str) -> int:
        imports = self._graph.opset_imports
        if domain in imports:
            return imports[domain]
        return newest_opset(domain)

    def _implicit_import(self, domain: str) -> dict[str, int]:
        return {} if domain in self._graph.opset_imports else {domain: newest_opset(domain)}

    def _check_new_name(self, name: Any, where: str) -> None:
        if not isinstance(name, str) or not name:
            raise BuilderError(f"{where}: a name must be a non-empty string, got {name!r}")
        if name in self._value_names:
            raise BuilderError(f"{where}: the name {name!r} is already used by another value of "
                               f"graph {self.name!r}")

    def _check_new_node_name(self, name: Any, where: str) -> None:
        if not isinstance(name, str) or not name:
            raise BuilderError(f"{where}: a node name must be a non-empty string, got {name!r}")
        if name in self._node_names:
            raise BuilderError(f"{where}: the node name {name!r} is already used in graph {self.name!r}")
        if name in self._value_names:
            raise BuilderError(f"{where}: the name {name!r} is already used by a value of graph {self.name!r}")

    def _fresh_value_name(self, base: str, taken: Collection[str] = ()) -> str:
        k = self._counters.get(base, 0)
        while f"{base}_{k}" in self._value_names or f"{base}_{k}" in taken:
            k += 1
        self._counters[base] = k + 1
        return f"{base}_{k}"

    def _fresh_node_name(self, op_type: str) -> str:
        base = _snake_case(op_type)
        k = self._counters.get(base, 0)
        while f"{base}_{k}" in self._node_names or f"{base}_{k}" in self._value_names:
            k += 1
        self._counters[base] = k  # the name is taken only when the node is added
        return f"{base}_{k}"

    def _output_names(self, node_name: str, count: int, taken: set[str]) -> list[str]:
        wanted = [node_name] if count == 1 else [f"{node_name}_{i}" for i in range(count)]
        out = []
        for w in wanted:
            n, k = w, 1
            while n in self._value_names or n in taken or n in out:
                n, k = f"{w}_{k}", k + 1
            out.append(n)
        return out


# ------------------------------------------------------------- conversion
_DTYPE_ALIASES = {"float": DataType.FLOAT, "double": DataType.DOUBLE, "half": DataType.FLOAT16,
                  "bfloat16": DataType.BFLOAT16, "bool": DataType.BOOL, "string": DataType.STRING}


def _as_dtype(dtype: Any, where: str) -> DataType:
    if isinstance(dtype, DataType):
        if dtype == DataType.UNDEFINED:
            raise BuilderError(f"{where}: element type UNDEFINED is not a tensor type")
        return dtype
    if isinstance(dtype, str):
        key = dtype.strip()
        if key.lower() in _DTYPE_ALIASES:
            return _DTYPE_ALIASES[key.lower()]
        if key.upper() in DataType.__members__ and key.upper() != "UNDEFINED":
            return DataType[key.upper()]
    try:
        return DataType.from_numpy(dtype)
    except TypeError:
        pass
    names = "float32, float16, int64, int32, int8, uint8, bool, ..."
    raise BuilderError(f"{where}: unknown element type {dtype!r}; use a numpy dtype ({names}) or a DataType")


def _as_shape(shape: Sequence[Dim] | None, where: str) -> tuple[Dim, ...] | None:
    if shape is None:
        return None
    if isinstance(shape, (str, bytes)) or not isinstance(shape, (list, tuple)):
        raise BuilderError(f"{where}: shape must be a list of dims (int, symbolic name or None), got {shape!r}")
    dims: list[Dim] = []
    for i, d in enumerate(shape):
        if isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0:
            dims.append(int(d))
        elif (isinstance(d, str) and d) or d is None:
            dims.append(d)
        else:
            raise BuilderError(f"{where}: dimension {i} must be an int >= 0, a symbolic name or None, got {d!r}")
    return tuple(dims)


def _as_array(value: Any, dtype: DataType | None, where: str) -> np.ndarray:
    if isinstance(value, (Var, Value)):
        raise BuilderError(f"{where}: expects data (an array or numbers), got the graph value {value.name!r}")
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as e:
        raise BuilderError(f"{where}: cannot turn {type(value).__name__} into an array: {e}") from None
    if dtype is not None:
        try:
            target = dtype.numpy
        except TypeError:
            raise BuilderError(f"{where}: element type {dtype.name} has no numpy type to hold constants") from None
        if arr.dtype.kind in "OUS" and target != np.dtype(object):
            raise BuilderError(f"{where}: cannot store {arr.dtype} data as {dtype.name}")
        return np.ascontiguousarray(arr.astype(target, copy=False))
    if arr.dtype == object:
        if not all(isinstance(x, str) for x in arr.flat):
            raise BuilderError(f"{where}: cannot turn {type(value).__name__} into a numeric or string array")
    elif arr.dtype.kind in "US":
        arr = arr.astype(object)
    elif not isinstance(value, (np.ndarray, np.generic)):
        if arr.dtype == np.float64:
            arr = arr.astype(np.float32)
    try:
        DataType.from_numpy(arr.dtype)
    except TypeError:
        raise BuilderError(f"{where}: numpy dtype {arr.dtype} has no ONNX element type") from None
    return np.ascontiguousarray(arr) if arr.dtype != object else arr


def _snake_case(op_type: str) -> str:
    """``GlobalAveragePool`` -> ``global_average_pool``, ``LRN`` -> ``lrn``."""
    text = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", op_type)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", text).lower()


def _sibling_dtype(spec: OpSpec, index: int, inputs: Sequence[Any]) -> DataType | None:
    """Element type for a Python number/list at input ``index``: that of a
    builder value bound to the same type parameter (``x + 1.0`` stays
    float16 when ``x`` is), else ``None`` (float32 / int64 defaults)."""
    formal = spec.formal_inputs()
    if not formal:
        return None

    def param(i: int) -> str:
        return formal[min(i, len(formal) - 1)][1]

    for j, x in enumerate(inputs):
        if j != index and isinstance(x, Var) and param(j) == param(index):
            if x.dtype is not None and x.dtype != DataType.UNDEFINED:
                return x.dtype
    return None


def _detached_graphs(value: Any) -> Any:
    """Sub-graph attribute values as private copies (a built model may be
    reused as the body of several nodes)."""
    def one(g: Any) -> Any:
        g = g.graph if isinstance(g, Model) else g
        if isinstance(g, Graph):
            g = clone_graph(g)
            g.opset_imports = {}
        return g
    if isinstance(value, (list, tuple)):
        return [one(g) for g in value]
    return one(value)


def _ir_version(opsets: Mapping[str, int]) -> int:
    try:
        return onnx.helper.find_min_ir_version_for(
            [onnx.helper.make_opsetid(d, v) for d, v in opsets.items()], ignore_unknown=True)
    except Exception:  # an opset onnx's table does not list
        return onnx.IR_VERSION


def _default_num_outputs(spec: OpSpec, op_type: str, domain: str, attrs: Mapping[str, Attribute],
                         inputs: Sequence[Value | None], where: str) -> int:
    if domain == "":
        body = {"If": "then_branch", "Loop": "body", "Scan": "body", "SequenceMap": "body"}.get(op_type)
        if body is not None and body in attrs:
            n = len(attrs[body].value.outputs)
            return n - 1 if op_type == "Loop" else n
        if op_type == "Split":
            if "num_outputs" in attrs:
                return int(attrs["num_outputs"].value)
            if "split" in attrs:
                return len(attrs["split"].value)
            if len(inputs) > 1 and inputs[1] is not None and inputs[1].const is not None:
                return int(inputs[1].const.size)
            raise BuilderError(f"{where}: cannot tell how many outputs to make; pass num_outputs= "
                               "or constant split sizes")
    return max(1, int(spec.schema.min_output))


def _check_conv_channels(op_type: str, inputs: Sequence[Value | None], attrs: Mapping[str, Attribute],
                         where: str) -> None:
    """ONNX shape inference does not compare Conv channels; do it here."""
    if op_type not in ("Conv", "ConvTranspose") or len(inputs) < 2 or inputs[0] is None or inputs[1] is None:
        return
    x, w = inputs[0], inputs[1]
    xs, ws = x.shape, w.shape
    if xs is None or ws is None:
        return
    if len(xs) != len(ws) or len(xs) < 3:
        raise BuilderError(f"{where}: X {x.name!r} {x.type} and W {w.name!r} {w.type} must have the same rank "
                           f"(>= 3: batch, channels, spatial dims)")
    group = int(attrs["group"].value) if "group" in attrs else 1
    c_in, w_in = xs[1], ws[0] if op_type == "ConvTranspose" else ws[1]
    if op_type == "Conv":
        expected = w_in * group if isinstance(w_in, int) else None
        out_channels = ws[0]
    else:
        expected = w_in
        out_channels = ws[1] * group if isinstance(ws[1], int) else None
    if isinstance(c_in, int) and isinstance(expected, int) and c_in != expected:
        rule = f"W dim 1 ({w_in}) x group ({group})" if op_type == "Conv" else f"W dim 0 ({w_in})"
        raise BuilderError(f"{where}: X {x.name!r} has {c_in} channels (dim 1 of {x.type}) but "
                           f"{rule} = {expected} (W {w.name!r} {w.type})")
    if op_type == "Conv" and isinstance(ws[0], int) and ws[0] % group:
        raise BuilderError(f"{where}: W {w.name!r} has {ws[0]} output channels, not divisible by group {group}")
    if len(inputs) > 2 and inputs[2] is not None and inputs[2].shape is not None:
        b = inputs[2]
        if len(b.shape) != 1 or (isinstance(b.shape[0], int) and isinstance(out_channels, int)
                                 and b.shape[0] != out_channels):
            raise BuilderError(f"{where}: B {b.name!r} {b.type} must be 1-D with {out_channels} "
                               "elements (one per output channel)")
