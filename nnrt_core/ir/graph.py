"""The in-memory graph: values, nodes, graphs and models.

Use-def links are kept up to date by the mutating methods of :class:`Graph`
(``add_node``, ``remove_node``, ``replace_all_uses``) so passes can walk
producers and consumers without rebuilding indexes.  Sub-graphs (If/Loop/Scan
bodies) are ordinary :class:`Graph` objects stored as attribute values; they
may read values of enclosing graphs by reference ("outer scope").
"""
from __future__ import annotations

import heapq
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from nnrt_core.errors import GraphError
from nnrt_core.ir.attributes import Attribute, AttrKind
from nnrt_core.ir.dtypes import DataType
from nnrt_core.ir.types import Dim, TensorType, ValueType
from nnrt_core.record import FrozenRecord, Record

__all__ = ["DeclaredOutput", "Value", "Node", "Graph", "Model"]

_GRAPH_KINDS = frozenset((AttrKind.GRAPH, AttrKind.GRAPHS))


# --------------------------------------------------------------------- values
class Value:
    """A named edge of the graph: a graph input, an initializer (``const``
    holds its data), or a node output.  ``producer`` is the node that writes
    it (``None`` for inputs/initializers) and ``uses`` lists ``(node, index)``
    pairs of the nodes that read it."""

    __slots__ = ("name", "type", "producer", "output_index", "uses", "const", "doc")

    def __init__(
        self,
        name: str,
        type: ValueType | None = None,
        *,
        const: np.ndarray | None = None,
        doc: str = "",
    ) -> None:
        self.name = name
        self.type = type
        self.producer: Node | None = None
        self.output_index: int = -1
        self.uses: list[tuple[Node, int]] = []
        self.const = const
        self.doc = doc
        if const is not None and type is None:
            self.type = TensorType(DataType.from_numpy(const.dtype), tuple(const.shape))

    @property
    def is_const(self) -> bool:
        return self.const is not None

    @property
    def dtype(self) -> DataType | None:
        return self.type.dtype if isinstance(self.type, TensorType) else None

    @property
    def shape(self) -> tuple[Dim, ...] | None:
        return self.type.shape if isinstance(self.type, TensorType) else None

    def consumers(self) -> list["Node"]:
        seen: dict[int, Node] = {}
        for node, _ in self.uses:
            seen.setdefault(id(node), node)
        return list(seen.values())

    def __repr__(self) -> str:
        return f"Value({self.name!r}, {self.type})"


# ---------------------------------------------------------------------- nodes
class Node:
    """One operator application.  ``inputs`` may contain ``None`` for omitted
    optional inputs; ``outputs`` may contain values with empty names for
    omitted optional outputs."""

    def __init__(
        self,
        op_type: str,
        inputs: Sequence[Value | None],
        outputs: Sequence[Value],
        *,
        name: str = "",
        domain: str = "",
        opset: int | None = None,
        attributes: Iterable[Attribute] = (),
        doc: str = "",
    ) -> None:
        self.op_type = op_type
        self.domain = "" if domain == "ai.onnx" else domain
        self.name = name
        self.opset = opset  # version of `domain` this node was written against
        self.attributes: dict[str, Attribute] = {a.name: a for a in attributes}
        self.doc = doc
        self.graph: Graph | None = None
        self.inputs: list[Value | None] = list(inputs)
        self.outputs: list[Value] = list(outputs)

    # -- attributes -----------------------------------------------------------
    def attr(self, name: str, default: Any = None) -> Any:
        a = self.attributes.get(name)
        return default if a is None else a.value

    def subgraphs(self) -> list["Graph"]:
        out: list[Graph] = []
        for a in self.attributes.values():  # inlined kind test: called per node by every pass
            if a.kind in _GRAPH_KINDS:
                out.extend(a.graphs())
        return out

    def outer_inputs(self) -> list[Value]:
        """Values of enclosing graphs that this node's sub-graphs read
        implicitly (the node depends on them just like on its inputs)."""
        found: dict[int, Value] = {}
        for sub in self.subgraphs():
            for v in sub.outer_references():
                found.setdefault(id(v), v)
        return list(found.values())

    def all_inputs(self) -> list[Value]:
        """Explicit inputs (present ones) followed by outer-scope reads."""
        vals = [v for v in self.inputs if v is not None]
        for a in self.attributes.values():  # a plain loop: called per node by passes, sorts and placement
            if a.kind in _GRAPH_KINDS:
                return vals + [v for v in self.outer_inputs() if all(v is not x for x in vals)]
        return vals

    @property
    def qualified_op(self) -> str:
        return f"{self.domain}::{self.op_type}" if self.domain else self.op_type

    def __repr__(self) -> str:
        return f"Node({self.name!r}, {self.qualified_op})"


# --------------------------------------------------------------------- graphs
class DeclaredOutput(FrozenRecord):
    """A graph output's type as the model file declares it, where that says
    more than (``corrected`` false) or contradicts (``corrected`` true) what
    the graph computes; ``computed`` is the output's type in the graph
    (``nnrt_core.frontends.onnx.declared_outputs``)."""

    __slots__ = ("declared", "computed", "corrected")
    declared: ValueType
    computed: ValueType | None
    corrected: bool

    def __init__(self, declared: ValueType, computed: ValueType | None, corrected: bool) -> None:
        object.__setattr__(self, "declared", declared)
        object.__setattr__(self, "computed", computed)
        object.__setattr__(self, "corrected", corrected)


class Graph:
    """A list of nodes with named inputs, outputs and initializers.

    ``parent`` is the enclosing graph for sub-graphs (used to resolve outer
    scope references), ``None`` for a top-level graph.
    """

    def __init__(
        self,
        name: str = "graph",
        *,
        inputs: Sequence[Value] = (),
        outputs: Sequence[Value] = (),
        nodes: Sequence[Node] = (),
        initializers: Sequence[Value] = (),
        opset_imports: dict[str, int] | None = None,
        parent: "Graph | None" = None,
        doc: str = "",
    ) -> None:
        self.name = name
        self.inputs: list[Value] = list(inputs)
        self.outputs: list[Value] = list(outputs)
        self.initializers: dict[str, Value] = {}
        self.nodes: list[Node] = []
        self.opset_imports: dict[str, int] = dict(opset_imports or {})
        self.parent = parent
        self.doc = doc
        self.value_info: dict[str, Value] = {}
        #: graph outputs whose declared type the frontend did not keep as it was (see ``DeclaredOutput``)
        self.declared_outputs: dict[str, DeclaredOutput] = {}
        #: the format the graph was imported from ("onnx", "tflite"; "" for IR built in Python):
        #: a backend may match that format's reference engine (the ORT plugin's ``precise_kernels``)
        self.origin = ""
        for v in initializers:
            self.add_initializer(v)
        for n in nodes:
            self.add_node(n)

    # -- building -------------------------------------------------------------
    def add_initializer(self, value: Value) -> Value:
        if value.const is None:
            raise GraphError(f"initializer {value.name!r} has no data")
        if value.name in self.initializers:
            raise GraphError(f"initializer {value.name!r} defined twice in graph {self.name!r}")
        self.initializers[value.name] = value
        return value

    def add_node(self, node: Node, *, index: int | None = None) -> Node:
        """Append (or insert) ``node`` and link its inputs and outputs."""
        if node.graph is not None and node.graph is not self:
            raise GraphError(f"node {node.name!r} already belongs to graph {node.graph.name!r}")
        node.graph = self
        for i, v in enumerate(node.inputs):
            if v is not None:
                v.uses.append((node, i))
        for i, v in enumerate(node.outputs):
            if v.producer is not None and v.producer is not node:
                raise GraphError(
                    f"value {v.name!r} is produced by both {v.producer.name!r} and {node.name!r}"
                )
            v.producer, v.output_index = node, i
        if node.opset is None:
            node.opset = self.opset_for(node.domain)
        if index is None:
            self.nodes.append(node)
        else:
            self.nodes.insert(index, node)
        return node

    def remove_node(self, node: Node) -> None:
        """Unlink and remove ``node``; its outputs must be unused."""
        for v in node.outputs:
            if v.uses:
                users = ", ".join(repr(n.name) for n, _ in v.uses)
                raise GraphError(f"cannot remove {node.name!r}: output {v.name!r} is used by {users}")
        for i, v in enumerate(node.inputs):
            if v is not None:
                v.uses = [(n, j) for n, j in v.uses if not (n is node and j == i)]
        for v in node.outputs:
            v.producer, v.output_index = None, -1
        self.nodes.remove(node)
        node.graph = None

    def set_input(self, node: Node, index: int, value: Value | None) -> None:
        """Rewire input ``index`` of ``node`` to ``value``."""
        old = node.inputs[index]
        if old is not None:
            old.uses = [(n, j) for n, j in old.uses if not (n is node and j == index)]
        node.inputs[index] = value
        if value is not None:
            value.uses.append((node, index))

    def replace_all_uses(self, old: Value, new: Value) -> None:
        """Make every reader of ``old`` (nodes and graph outputs) read ``new``."""
        for node, i in list(old.uses):
            self.set_input(node, i, new)
        self.outputs = [new if v is old else v for v in self.outputs]

    def opset_for(self, domain: str) -> int:
        g: Graph | None = self
        while g is not None:
            for key in (domain, "ai.onnx" if domain == "" else None):
                if key is not None and key in g.opset_imports:
                    return g.opset_imports[key]
            g = g.parent
        return 1

    # -- queries ---------------------------------------------------------------
    def values(self) -> Iterator[Value]:
        """Every value defined in this graph (inputs, initializers, node outputs)."""
        yield from self.inputs
        yield from self.initializers.values()
        for n in self.nodes:
            yield from (v for v in n.outputs if v.name)

    def value_map(self) -> dict[str, Value]:
        return {v.name: v for v in self.values()}

    def node_by_name(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise GraphError(f"no node named {name!r} in graph {self.name!r}")

    def has_subgraphs(self) -> bool:
        """Whether any node of this graph holds a sub-graph: one pass over the attribute
        kinds (about half the cost of asking every node for its ``subgraphs()``)."""
        return not _GRAPH_KINDS.isdisjoint([a.kind for n in self.nodes for a in n.attributes.values()])

    def outer_references(self) -> list[Value]:
        """Values read by this graph (or its nested sub-graphs) that are
        defined in an enclosing graph."""
        own = {id(v) for v in self.values()}
        found: dict[int, Value] = {}
        for n in self.nodes:
            for v in n.all_inputs():
                if id(v) not in own:
                    found.setdefault(id(v), v)
        for v in self.outputs:
            if id(v) not in own:
                found.setdefault(id(v), v)
        return list(found.values())

    def is_topologically_sorted(self) -> bool:
        """Whether every node already follows the producers (in this graph) of
        its inputs, outer-scope reads of sub-graphs included: one linear walk."""
        mine = {id(n) for n in self.nodes}
        seen: set[int] = set()
        for n in self.nodes:
            for v in n.all_inputs():
                p = v.producer
                if p is not None and p is not n and id(p) not in seen and id(p) in mine:
                    return False
            seen.add(id(n))
        return True

    def topological_sort(self) -> None:
        """Reorder ``nodes`` so every node follows the producers of its inputs
        (outer-scope reads of sub-graphs included).  Stable: keeps the current
        order where it is already valid (an ordered graph is left as it is).
        Raises :class:`GraphError` on a cycle."""
        if self.is_topologically_sorted():
            return
        index = {id(n): i for i, n in enumerate(self.nodes)}
        deps: dict[int, set[int]] = {}
        users: dict[int, list[Node]] = {id(n): [] for n in self.nodes}
        for n in self.nodes:
            d = set()
            for v in n.all_inputs():
                p = v.producer
                if p is not None and id(p) in index and p is not n:
                    d.add(id(p))
            deps[id(n)] = d
            for p in d:
                users[p].append(n)
        ready = [(index[id(n)], id(n), n) for n in self.nodes if not deps[id(n)]]
        heapq.heapify(ready)
        pending = {k: len(v) for k, v in deps.items()}
        order: list[Node] = []
        while ready:
            _, _, n = heapq.heappop(ready)
            order.append(n)
            for u in users[id(n)]:
                pending[id(u)] -= 1
                if pending[id(u)] == 0:
                    heapq.heappush(ready, (index[id(u)], id(u), u))
        if len(order) != len(self.nodes):
            stuck = [n.name or n.op_type for n in self.nodes if pending[id(n)] > 0][:5]
            raise GraphError(f"graph {self.name!r} has a cycle through nodes {stuck}")
        self.nodes = order

    def validate(self) -> None:
        """Check structural invariants; raise :class:`GraphError` naming the
        first problem (undefined value, duplicate definition, bad order)."""
        defined: dict[str, str] = {}

        def define(name: str, what: str) -> None:
            if not name:
                return
            if name in defined:
                raise GraphError(
                    f"graph {self.name!r}: value {name!r} defined twice ({defined[name]} and {what})"
                )
            defined[name] = what

        for v in self.inputs:
            define(v.name, "graph input")
        for name in self.initializers:
            if name not in {v.name for v in self.inputs}:
                define(name, "initializer")
        outer = {id(v) for v in self._enclosing_values()}
        available = {id(v) for v in self.inputs} | {id(v) for v in self.initializers.values()}
        for n in self.nodes:
            for i, v in enumerate(n.inputs):
                if v is None:
                    continue
                if id(v) not in available and id(v) not in outer:
                    where = "produced later" if v.producer is not None and v.producer.graph is self else "never defined"
                    raise GraphError(
                        f"graph {self.name!r}: node {n.name!r} ({n.op_type}) input {i} "
                        f"{v.name!r} is {where}"
                    )
            for sub in n.subgraphs():
                if sub.parent is not self:
                    raise GraphError(f"sub-graph {sub.name!r} of node {n.name!r} has the wrong parent")
                sub.validate()
            for v in n.outputs:
                define(v.name, f"output of node {n.name!r}")
                available.add(id(v))
        for v in self.outputs:
            if id(v) not in available and id(v) not in outer:
                raise GraphError(f"graph {self.name!r}: output {v.name!r} is never defined")

    def _enclosing_values(self) -> list[Value]:
        out: list[Value] = []
        g = self.parent
        while g is not None:
            out.extend(g.values())
            g = g.parent
        return out

    def walk(self) -> Iterator[Node]:
        """Every node of this graph and of its sub-graphs, depth first."""
        for n in self.nodes:
            yield n
            for sub in n.subgraphs():
                yield from sub.walk()

    def __repr__(self) -> str:
        return f"Graph({self.name!r}, {len(self.nodes)} nodes)"


class Model(Record):
    """A top-level graph plus model-level metadata."""

    __slots__ = ("graph", "ir_version", "producer_name", "producer_version", "domain", "model_version", "doc",
                 "metadata", "base_dir", "__dict__")
    graph: Graph
    ir_version: int
    producer_name: str
    producer_version: str
    domain: str
    model_version: int
    doc: str
    metadata: dict[str, str]
    #: folder the model was loaded from (external data is resolved inside it)
    base_dir: str | None

    def __init__(self, graph: Graph, ir_version: int = 8, producer_name: str = "", producer_version: str = "",
                 domain: str = "", model_version: int = 0, doc: str = "", metadata: dict[str, str] | None = None,
                 base_dir: str | None = None) -> None:
        self.graph, self.ir_version, self.producer_name, self.producer_version = graph, ir_version, producer_name, \
            producer_version
        self.domain, self.model_version, self.doc, self.base_dir = domain, model_version, doc, base_dir
        self.metadata = {} if metadata is None else metadata

    @property
    def opset_imports(self) -> dict[str, int]:
        return self.graph.opset_imports
