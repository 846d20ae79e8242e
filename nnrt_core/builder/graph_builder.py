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

from typing import Any, Callable, Collection, Iterable, Mapping, Sequence

import numpy as np

from nnrt_core.builder.dtypes import as_array, as_dtype, as_shape
from nnrt_core.builder.helpers import TypedOps
from nnrt_core.builder.node_rules import (
    check_conv_channels,
    default_num_outputs,
    detached_graphs,
    sibling_dtype,
    snake_case,
)
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
from nnrt_core.builder.var import Operand, Var
from nnrt_core.frontends.onnx import ir_version_for, newest_opset_version
from nnrt_core.ir import Attribute, AttrKind, DataType, Dim, Graph, Model, Node, TensorType, Value
from nnrt_core.ir.clone import clone_graph

__all__ = ["DEFAULT_OPSET", "GraphBuilder", "Var", "UnknownOperatorError"]

#: ONNX opset the builder writes by default (supported by every shipped backend
#: and by onnxruntime >= 1.18)
DEFAULT_OPSET = 21


class UnknownOperatorError(BuilderError, AttributeError):
    """``builder.SomeOp`` names no known operator (an ``AttributeError`` too,
    so ``hasattr`` works)."""


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
        newest = newest_opset_version()
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
        t = TensorType(as_dtype(dtype, where), as_shape(shape, where))
        v = Value(name, t)
        self._graph.inputs.append(v)
        self._value_names.add(name)
        return Var(self, v)

    def constant(self, value: Any, name: str | None = None, *, dtype: Any = None) -> Var:
        """Add a constant (weights, shapes...) stored as an initializer.

        Arrays keep their dtype; Python floats become float32 and Python ints
        int64 unless ``dtype`` says otherwise."""
        where = f"constant {name!r}" if name else "constant"
        arr = as_array(value, None if dtype is None else as_dtype(dtype, where), where)
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
        values = [self._operand(x, where, f"input {i}", staged, sibling_dtype(spec, i, inputs))
                  for i, x in enumerate(inputs)]
        while values and values[-1] is None:
            values.pop()

        attributes = self._attributes(spec, attrs or {}, where)
        count = default_num_outputs(spec, op_type, domain, attributes, values, where) \
            if num_outputs is None else num_outputs
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise BuilderError(f"{where}: num_outputs must be a positive int, got {count!r}")
        check_inputs(spec, values, count, where)
        if domain == "":
            check_conv_channels(op_type, values, attributes, where)

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
        return Model(graph=graph, ir_version=ir_version_for(graph.opset_imports), producer_name="nnrt.builder",
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
        arr = as_array(x, like if not isinstance(x, (np.ndarray, np.generic)) else None, f"{where}: {label}")
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
                val = detached_graphs(val)
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
        base = snake_case(op_type)
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
