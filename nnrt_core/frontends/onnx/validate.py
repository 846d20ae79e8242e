"""Node checks an untrusted model must pass before native code sees it.

onnx's C++ shape inference and ONNX Runtime trust attributes and arity that
``onnx.checker`` does not check: ``LayerNormalization(axis=2**63-1)`` or a
``Split`` whose ``num_outputs`` differs from its outputs crash the process.
:func:`~nnrt_core.frontends.onnx.validate_proto.validate_model` (protos, in
:mod:`~nnrt_core.frontends.onnx.validate_proto`) and :func:`validate_graph` (IR) check every
node, sub-graphs included, against its onnx schema:

* arity: input and output counts within the schema's bounds, no empty name
  for a variadic input, ``num_outputs`` equal to the outputs;
* attribute kinds: an attribute of the schema has the schema's type;
* input element types, where known, within the schema's type constraints
  (inputs sharing a type parameter: the same type);
* ranges (generic, by attribute name): ``axis``/``axes`` and the like within
  ``[-MAX_RANK, MAX_RANK)``, ``strides``/``kernel_shape``/``dilations``/
  ``group``/``blocksize``/``size`` >= 1, convolution and pooling ``pads`` >= 0,
  window attributes (kernel, strides, dilations, pads...) at most ``MAX_WINDOW``,
  flag attributes (``keepdims``, ``saturate``, ``transA``...) 0 or 1,
  every INT/INTS attribute a 64-bit integer, INTS lists at most
  ``MAX_LIST`` long; plus :data:`RULES`, the per-op rules for attributes
  that crash native code.

A violation is a :class:`ModelLoadError` naming the node, the attribute and what was
expected.  Nodes without an onnx schema (custom domains) are left to the backends.
"""
from __future__ import annotations

import functools
import re
from typing import Any, Callable, Iterable, Mapping, NamedTuple, Sequence

from nnrt_core.errors import ModelLoadError
from nnrt_core.frontends.onnx.onnx_api import P
from nnrt_core.frontends.onnx.schema_facts import SchemaFacts, schema_facts
from nnrt_core.frontends.onnx.node_facts import PASSED, facts_key, remember
from nnrt_core.ir import Attribute, AttrKind, Graph, TensorType, Value

__all__ = ["MAX_LIST", "MAX_RANK", "NOT_TENSOR", "NodeView", "RULES", "elem_name", "ir_node_view", "validate_graph",
           "validate_node"]

AttributeProto = P.AttributeProto

#: the largest tensor rank nnrt can run (numpy's limit)
MAX_RANK = 64
#: the longest INTS attribute accepted (pads of a rank-64 tensor: 128)
MAX_LIST = 4 * MAX_RANK
INT64 = (-(1 << 63), (1 << 63) - 1)
#: ``NodeView.input_types`` entry of a sequence, map or optional value
NOT_TENSOR = -1

#: attribute names that are tensor axes (or counts of them)
AXIS_NAMES = frozenset({"axis", "axes", "batch_dims", "batch_axis", "time_axis", "new_axis", "perm",
                        "scan_input_axes", "scan_output_axes"})
#: attribute names that hold an element type (``TensorProto.DataType``)
DTYPE_NAMES = frozenset({"dtype", "to", "stash_type", "softmax_precision", "output_dtype"})
#: attribute names whose every value must be >= 1
POSITIVE_NAMES = frozenset({"strides", "kernel_shape", "dilations", "group", "offset_group", "blocksize",
                            "size", "num_outputs"})
#: flag attributes: 0 or 1 in every schema that has them (another value sent ORT's Cast down a path
#: that ended in std::bad_alloc and abort, fuzz seed 6)
FLAG_NAMES = frozenset({"saturate", "keepdims", "ceil_mode", "count_include_pad", "transA", "transB",
                        "noop_with_empty_axes", "select_last_index", "exclusive", "reverse", "largest", "sorted",
                        "upper", "allowzero", "fmod", "new_axis", "periodic", "onesided", "inverse",
                        "center_point_box", "detect_negative", "detect_positive", "is_causal", "interleaved"})
#: window attributes (sizes along one tensor axis): at most MAX_WINDOW, so the kernels' window
#: arithmetic ((kernel - 1) * dilation + 1, pads + dims) cannot overflow 64 bits
WINDOW_NAMES = frozenset({"strides", "kernel_shape", "dilations", "pads", "output_padding", "output_shape"})
MAX_WINDOW = (1 << 31) - 1
#: TfIdfVectorizer's largest ``max_skip_count`` (a skip longer than any text nnrt could hold)
MAX_SKIP = 1 << 20


class NodeView(NamedTuple):
    """What the checks read of a node, from a proto or an IR node (a named
    tuple: a frozen dataclass costs ~0.6 ms to define, at import)."""

    desc: str  #: "node 'name' (OpType)"
    op_type: str
    domain: str
    inputs: Sequence[str]  #: "" for an omitted input
    outputs: Sequence[str]
    #: name -> (AttributeProto type, value): the Python value of INT/INTS/STRING/STRINGS/FLOATS, the
    #: element count of TENSOR, else None
    attrs: Mapping[str, tuple[int, Any]]
    #: element type (``TensorProto.DataType``) of each input where known (empty: not checked)
    input_types: Sequence[int | None] = ()


def _fail(n: NodeView, what: str) -> None:
    raise ModelLoadError(f"{n.desc}: {what}")


def _ints(value: Any) -> list[int]:
    """An INT or INTS value (a number, a list, an IR numpy array) as Python ints."""
    return [int(value)] if isinstance(value, (int, float)) or getattr(value, "ndim", 1) == 0 else \
        [int(v) for v in value]


# ------------------------------------------------------------ per-op rules
def _split_rule(n: NodeView) -> None:
    kind, value = n.attrs.get("num_outputs", (None, None))
    if kind is not None and int(value) != len(n.outputs):
        _fail(n, f"attribute 'num_outputs' is {value} but the node has {len(n.outputs)} outputs; "
                 "expected them to be equal")
    if kind is not None and len(n.inputs) > 1 and n.inputs[1]:
        _fail(n, "attribute 'num_outputs' and input 'split' are both given; expected one of them")


def _gathernd_rule(n: NodeView) -> None:
    _, value = n.attrs.get("batch_dims", (None, 0))
    if int(value) < 0:
        _fail(n, f"attribute 'batch_dims' is {value}; expected a non-negative integer")


def _window_rule(n: NodeView) -> None:
    """Convolution / pooling: ``strides``, ``dilations``, ``kernel_shape``
    (and ``output_padding``) one value per spatial axis, ``pads`` two."""
    lengths = {k: len(_ints(n.attrs[k][1])) for k in ("kernel_shape", "strides", "dilations", "output_padding")
               if k in n.attrs and n.attrs[k][0] == AttributeProto.INTS}
    if "pads" in n.attrs and n.attrs["pads"][0] == AttributeProto.INTS:
        pads = len(_ints(n.attrs["pads"][1]))
        if pads % 2:
            _fail(n, f"attribute 'pads' has {pads} values; expected two per spatial axis (an even count)")
        lengths["pads"] = pads // 2
    if len(set(lengths.values())) > 1:
        shown = ", ".join(f"{k}: {v * 2 if k == 'pads' else v}" for k, v in lengths.items())
        _fail(n, f"window attributes disagree on the number of spatial axes ({shown}); expected one value per "
                 "spatial axis (two for 'pads')")


def _constant_of_shape_rule(n: NodeView) -> None:
    kind, size = n.attrs.get("value", (None, 1))
    if kind == AttributeProto.TENSOR and size != 1:
        _fail(n, f"attribute 'value' holds {size} elements; expected a one-element tensor")


def _einsum_rule(n: NodeView) -> None:
    _, eq = n.attrs.get("equation", (None, ""))
    if isinstance(eq, str) and not re.fullmatch(_EINSUM, eq):
        _fail(n, f"attribute 'equation' is {eq!r}; expected ASCII letters, ',', '...', '->' and spaces")


def _tfidf_rule(n: NodeView) -> None:
    """TfIdfVectorizer: the pool splits into n-grams as ``ngram_counts`` says,
    one ``ngram_indexes`` entry (and weight) per n-gram (ORT aborts otherwise)."""
    pool = n.attrs.get("pool_int64s", n.attrs.get("pool_strings", (None, [])))[1] or []
    starts = _ints(n.attrs.get("ngram_counts", (None, []))[1] or [])
    ends = starts[1:] + [len(pool)]
    if any(not 0 <= s <= e <= len(pool) or (e - s) % (k + 1) for k, (s, e) in enumerate(zip(starts, ends))):
        _fail(n, f"attribute 'ngram_counts' {starts} does not split the pool of {len(pool)} items into whole "
                 "n-grams of lengths 1, 2, ...")
    grams = sum((e - s) // (k + 1) for k, (s, e) in enumerate(zip(starts, ends)))
    indexes = _ints(n.attrs.get("ngram_indexes", (None, []))[1] or [])
    if len(indexes) != grams or any(i < 0 for i in indexes):
        _fail(n, f"attribute 'ngram_indexes' has {len(indexes)} values; expected {grams} non-negative indexes "
                 "(one per n-gram of the pool)")
    weights = n.attrs.get("weights", (None, None))[1]
    if weights is not None and len(weights) != grams:
        _fail(n, f"attribute 'weights' has {len(weights)} values; expected {grams} (one per n-gram)")
    skip = int(n.attrs.get("max_skip_count", (None, 0))[1])
    if not 0 <= skip <= MAX_SKIP:  # ORT loops over every skip, whatever the input length (2**62: no end)
        _fail(n, f"attribute 'max_skip_count' is {skip}; expected 0 <= max_skip_count <= {MAX_SKIP}")
    lo, hi = (int(n.attrs.get(k, (None, 0))[1]) for k in ("min_gram_length", "max_gram_length"))
    if not 1 <= lo <= hi <= len(starts):
        _fail(n, f"min_gram_length {lo} and max_gram_length {hi}: expected 1 <= min <= max <= {len(starts)} "
                 "(the n-gram lengths of the pool)")


_EINSUM = r"[A-Za-z,. >-]*"  # compiled on first use (re caches it): Einsum nodes only

#: op type -> extra check (the default domain)
RULES: dict[str, Callable[[NodeView], None]] = {
    "Split": _split_rule,
    "GatherND": _gathernd_rule,
    "ConstantOfShape": _constant_of_shape_rule,
    "Einsum": _einsum_rule,
    "TfIdfVectorizer": _tfidf_rule,
    **{op: _window_rule for op in ("AveragePool", "Col2Im", "Conv", "ConvInteger", "ConvTranspose", "DeformConv",
                                   "LpPool", "MaxPool", "MaxUnpool", "QLinearConv")},
}
#: op types whose ``pads`` attribute may be negative (Pad's own, before opset 11)
SIGNED_PADS = frozenset({"Pad"})


# ------------------------------------------------------------ generic checks
def _check_arity(n: NodeView, schema: SchemaFacts) -> None:
    ni, no = len(n.inputs), len(n.outputs)
    if not schema.min_input <= ni <= schema.max_input:
        _fail(n, f"has {ni} inputs; {n.op_type}-{schema.since_version} expects "
                 f"{_bounds(schema.min_input, schema.max_input)}")
    if not schema.min_output <= no <= schema.max_output:
        _fail(n, f"has {no} outputs; {n.op_type}-{schema.since_version} expects "
                 f"{_bounds(schema.min_output, schema.max_output)}")
    formal = list(schema.inputs)
    for i, name in enumerate(n.inputs):
        if name:
            continue
        p = formal[min(i, len(formal) - 1)] if formal else None
        if p is not None and p.variadic:
            _fail(n, f"input {i} (of variadic {p.name!r}) is empty; expected a value name "
                     "(only optional inputs may be omitted)")


def _bounds(lo: int, hi: int) -> str:
    if lo == hi:
        return f"exactly {lo}"
    return f"at least {lo}" if hi >= 2**31 - 1 else f"{lo} to {hi}"


def _check_attribute(n: NodeView, name: str, kind: int, value: Any, schema: SchemaFacts) -> None:
    spec = schema.attributes.get(name)
    if spec is not None and spec != AttributeProto.UNDEFINED and kind != spec:
        _fail(n, f"attribute {name!r} is of type {_type_name(kind)}; expected {_type_name(spec)}")
    if kind not in (AttributeProto.INT, AttributeProto.INTS):
        return
    values = _ints(value)
    if kind == AttributeProto.INTS and len(values) > MAX_LIST:
        _fail(n, f"attribute {name!r} has {len(values)} values; expected at most {MAX_LIST}")
    for v in values:
        if not INT64[0] <= v <= INT64[1]:
            _fail(n, f"attribute {name!r} holds {v}, which does not fit a 64-bit integer")
        if name in AXIS_NAMES and not -MAX_RANK <= v < MAX_RANK:
            _fail(n, f"attribute {name!r} is {value}; expected axes in [-{MAX_RANK}, {MAX_RANK}) "
                     f"(nnrt runs tensors of rank <= {MAX_RANK})")
        if name in POSITIVE_NAMES and v < 1:
            _fail(n, f"attribute {name!r} is {value}; expected values >= 1")
        if name in FLAG_NAMES and kind == AttributeProto.INT and v not in (0, 1):
            _fail(n, f"attribute {name!r} is {v}; expected 0 or 1")
        if name in WINDOW_NAMES and abs(v) > MAX_WINDOW:
            _fail(n, f"attribute {name!r} holds {v}; expected window sizes of at most {MAX_WINDOW}")
        if name == "pads" and v < 0 and n.op_type not in SIGNED_PADS:
            _fail(n, f"attribute 'pads' is {value}; expected values >= 0")
        if name in DTYPE_NAMES and kind == AttributeProto.INT and (
                elem_name(v) is None or (v == 0 and name != "output_dtype")):  # output_dtype 0: "from zero point"
            _fail(n, f"attribute {name!r} is {v}; expected an element type (a TensorProto.DataType other than "
                     "UNDEFINED)")


@functools.lru_cache(maxsize=None)
def elem_name(t: int) -> str | None:
    """``TensorProto.DataType`` ``t``'s name in lower case (``None`` for a number onnx does not know)."""
    try:
        return P.TensorProto.DataType.Name(t).lower()
    except ValueError:
        return None


@functools.lru_cache(maxsize=4096)
def _tensor_verdict(ok: frozenset[str], name: str) -> bool | None:
    """Whether ``tensor(name)`` is among the allowed type strings ``ok``
    (``None`` when none of them is a tensor type)."""
    if not any(a.startswith("tensor(") for a in ok):
        return None
    return f"tensor({name})" in ok


def _check_types(n: NodeView, schema: SchemaFacts) -> None:
    """Known input element types against the schema's type constraints (and
    inputs sharing a type parameter against each other)."""
    allowed = schema.allowed
    formal = schema.inputs
    bound: dict[str, tuple[int, int]] = {}
    for i, t in enumerate(n.input_types):
        if t == NOT_TENSOR and formal and i < len(n.inputs) and n.inputs[i]:
            p = formal[min(i, len(formal) - 1)]
            ok = allowed.get(p.type_str, {p.type_str})
            if all(a.startswith("tensor(") for a in ok):
                _fail(n, f"input {i} ({p.name!r}) is a sequence, map or optional; {n.op_type}-"
                         f"{schema.since_version} expects a tensor")
            continue
        name = elem_name(t) if t else None
        if name is None or name == "undefined" or not formal or i >= len(n.inputs) or not n.inputs[i]:
            continue
        p = formal[min(i, len(formal) - 1)]
        ok = allowed.get(p.type_str) or frozenset({p.type_str})
        verdict = _tensor_verdict(ok, name)
        if verdict is None:
            continue  # sequences, optionals, maps: left to shape inference
        if not verdict:
            shown = ", ".join(sorted(a[7:-1] for a in ok if a.startswith("tensor(")))
            _fail(n, f"input {i} ({p.name!r}) has element type {name}; {n.op_type}-{schema.since_version} "
                     f"expects one of {shown}")
        if p.variadic and not p.is_homogeneous:
            continue
        first = bound.setdefault(p.type_str, (t, i))
        if first[0] != t:
            _fail(n, f"input {i} ({p.name!r}) has element type {name} but input {first[1]} has "
                     f"{elem_name(first[0])}; expected the same type (both are {p.type_str!r})")


def _type_name(kind: int) -> str:
    try:
        return AttributeProto.AttributeType.Name(kind)
    except ValueError:
        return str(kind)


def validate_node(n: NodeView, opsets: Mapping[str, int], *, structure: bool = True) -> None:
    """Check one node against its onnx schema (see the module docstring);
    ``structure=False`` checks the input element types only (arity,
    attributes and the op rules already checked)."""
    domain = "" if n.domain == "ai.onnx" else n.domain
    version = opsets.get(domain)
    schema = schema_facts(n.op_type, domain, version) if version is not None else None
    if schema is None:
        return
    if structure:
        _check_arity(n, schema)
        for name, (kind, value) in n.attrs.items():
            _check_attribute(n, name, kind, value, schema)
    _check_types(n, schema)
    rule = RULES.get(n.op_type) if domain == "" and structure else None
    if rule is not None:
        rule(n)


# ------------------------------------------------------------ IR
def _ir_value(kind: int, value: Any) -> Any:
    if kind == AttrKind.TENSOR:
        return int(getattr(value, "size", 1))
    return value if kind in (AttrKind.INT, AttrKind.INTS, AttrKind.STRING, AttrKind.STRINGS, AttrKind.FLOATS) \
        else None


def ir_node_view(desc: str, op_type: str, domain: str, inputs: Sequence[Value | None], output_names: Sequence[str],
                 attributes: Iterable[Attribute]) -> NodeView:
    """The :class:`NodeView` of an IR node (or of one about to be built)."""
    attrs = {a.name: (int(a.kind), _ir_value(a.kind, a.value)) for a in attributes if not a.ref_attr_name}
    return NodeView(desc, op_type, domain, [v.name if v is not None else "" for v in inputs], list(output_names),
                    attrs, [_ir_type(v) for v in inputs])


def _ir_type(v: Value | None) -> int | None:
    if v is None or v.type is None:
        return None
    return int(v.type.dtype) if isinstance(v.type, TensorType) else NOT_TENSOR


def validate_graph(graph: Graph) -> None:
    """Check every node of an IR graph (sub-graphs included) like
    :func:`validate_model`, each against the opset it was written for.  A node
    with the same checked facts as one that passed before (op, opset,
    attributes, input and output arity, input element types) is not checked
    again (:mod:`~nnrt_core.frontends.onnx.node_facts`); a failing node is always checked and named."""
    for node in graph.nodes:
        domain = "" if node.domain == "ai.onnx" else node.domain
        version = node.opset if node.opset is not None else graph.opset_for(domain)
        key: tuple | None = facts_key(node, domain, version)
        try:
            known = key in PASSED
        except TypeError:  # a value that cannot be hashed: checked every time
            key, known = None, False
        if not known:
            view = ir_node_view(f"node {node.name!r} ({node.op_type})", node.op_type, node.domain, node.inputs,
                                [v.name for v in node.outputs], node.attributes.values())
            validate_node(view, {domain: version})
            if key is not None:
                remember(key)
        for sub in node.subgraphs():
            validate_graph(sub)
