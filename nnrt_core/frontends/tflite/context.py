"""The conversion state the operator mappers work on.

Every TFLite tensor has a :class:`Slot`: its IR value in TFLite layout
(``plain``), and for 4-D tensors possibly an NCHW twin (``nchw``).  Layout
sensitive ops (convolutions, pools, resizes) read and write NCHW; layout
agnostic ops (element-wise, concat, pad, reductions...) keep whatever layout
their input has; everything else reads TFLite layout.  A Transpose is only
added when a value is needed in the layout it does not have yet (once per
tensor), so a chain of NHWC ops becomes an NCHW chain with a Transpose at
each end.  Quantized (int8/uint8/int16) activations are carried as float
values that went through QuantizeLinear/DequantizeLinear (QDQ).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from nnrt_core.errors import ModelLoadError, UnsupportedNodeError
from nnrt_core.frontends.tflite.halves import half_to_float
from nnrt_core.frontends.tflite.options import read_options
from nnrt_core.frontends.tflite.schema import FlatModel, Quant, TensorInfo
from nnrt_core.frontends.tflite.table import OPERATOR
from nnrt_core.ir import Attribute, AttrKind, DataType, Graph, Node, TensorType, Value

__all__ = ["NCHW", "NHWC", "Slot", "GraphState", "OperatorRef", "OpContext", "make_attributes", "QUANTIZED_TYPES"]

NCHW = (0, 3, 1, 2)  #: NHWC -> NCHW (also OHWI -> OIHW)
NHWC = (0, 2, 3, 1)  #: NCHW -> NHWC
QUANTIZED_TYPES = frozenset({DataType.INT8, DataType.UINT8, DataType.INT16})


#: enum members read once: ``AttrKind.INT`` is a class-attribute lookup through the enum's metaclass
#: (~0.1 us on Python 3.11), paid per node on the hot paths below
_INT, _INTS, _INT_TYPE, _FLOAT = AttrKind.INT, AttrKind.INTS, {int}, DataType.FLOAT


def make_attributes(attrs: dict[str, Any]) -> list[Attribute]:
    """IR attributes from plain Python values (int, float, str, lists of int/float, arrays)."""
    out = []
    for k, v in attrs.items():
        t = type(v)  # the common cases first, by exact type (mappers pass ints, floats and lists of int)
        if t is int:
            out.append(Attribute(k, _INT, v))
        elif t is list and {*map(type, v)} == _INT_TYPE:  # a non-empty list of ints: one C-level pass
            out.append(Attribute(k, _INTS, list(v)))
        elif isinstance(v, (bool, int, np.integer)):
            out.append(Attribute(k, AttrKind.INT, int(v)))
        elif isinstance(v, (float, np.floating)):
            out.append(Attribute(k, AttrKind.FLOAT, float(v)))
        elif isinstance(v, str):
            out.append(Attribute(k, AttrKind.STRING, v))
        elif isinstance(v, np.ndarray):
            out.append(Attribute(k, AttrKind.TENSOR, v))
        elif all(isinstance(x, (int, np.integer)) for x in v):
            out.append(Attribute(k, AttrKind.INTS, [int(x) for x in v]))
        else:
            out.append(Attribute(k, AttrKind.FLOATS, [float(x) for x in v]))
    return out


class Slot:
    """What the IR knows of one TFLite tensor."""

    __slots__ = ("info", "plain", "nchw", "_const", "half", "quant")

    def __init__(self, info: TensorInfo) -> None:
        self.info = info
        self.plain: Value | None = None
        self.nchw: Value | None = None
        self._const: np.ndarray | None = info.data if info.sparse is None else None
        #: fp16 data of a float32 constant (a DEQUANTIZE of fp16), converted when read:
        #: :meth:`GraphState.const_value` converts and transposes it in one pass
        self.half: np.ndarray | None = None
        self.quant: Quant | None = info.quant if info.dtype in QUANTIZED_TYPES or info.data is not None else None

    @property
    def const(self) -> np.ndarray | None:
        """The constant data (TFLite layout), ``None`` when computed."""
        c = self._const
        if c is None and self.half is not None:
            c = self._const = half_to_float(self.half)
        return c

    @const.setter
    def const(self, value: np.ndarray | None) -> None:
        self._const, self.half = value, None

    @property
    def is_const(self) -> bool:
        """Whether the tensor is a constant (without converting fp16 data)."""
        return self._const is not None or self.half is not None

    def set_half(self, data: np.ndarray) -> None:
        """This tensor is the float32 value of fp16 constant ``data`` (converted when read)."""
        self._const, self.half, self.quant = None, data, None


class GraphState:
    """The IR graph under construction and the slots of the subgraph's tensors."""

    def __init__(self, flat: FlatModel, graph: Graph, tensors: list[TensorInfo]) -> None:
        self.flat = flat
        self.graph = graph
        self.slots = [Slot(t) for t in tensors]
        self.names: dict[str, Value] = {}
        self.node_names: set[str] = set()
        self.metadata: dict[str, str] = {}  #: mappers' additions to the model metadata
        self.finishers: list[Callable[[], None]] = []  #: run once after the last operator (deferred metadata)
        #: small constants many nodes read (quantization parameters, Clip bounds), one IR value per content
        self._shared: dict[tuple, Value] = {}
        self._qparams: dict[tuple, tuple[Quant, Value, Value]] = {}  #: by the ``Quant`` object (see :meth:`qparams`)
        self._opset = graph.opset_for("")  #: the opset of every node :meth:`add` makes (default domain)

    # ------------------------------------------------------------- building
    def unique(self, name: str) -> str:
        base, k = name, 1
        while name in self.names:
            name = f"{base}__{k}"
            k += 1
        return name

    def new_value(self, name: str, dtype: DataType, shape: Sequence[int] | None) -> Value:
        if name in self.names:
            name = self.unique(name)
        v = self.names[name] = Value(name, TensorType(dtype, None if shape is None else tuple(map(int, shape))))
        return v

    def constant(self, array: np.ndarray, name: str) -> Value:
        if name in self.names:
            name = self.unique(name)
        v = self.names[name] = Value(name, const=array)
        self.graph.add_initializer(v)
        return v

    def add(self, op_type: str, inputs: Sequence[Value | None], name: str, outputs: Sequence[Value],
            attrs: dict[str, Any] | None = None) -> list[Value]:
        if name in self.node_names:
            name = self.unique_node(name)
        else:
            self.node_names.add(name)
        node = Node(op_type, inputs, outputs, name=name, opset=self._opset,
                    attributes=make_attributes(attrs) if attrs else ())
        self.graph.add_node(node)
        return node.outputs[:]

    def unique_node(self, name: str) -> str:
        base, k = name, 1
        while name in self.node_names:
            name = f"{base}__{k}"
            k += 1
        self.node_names.add(name)
        return name

    def shared_constant(self, array: np.ndarray, name: str) -> Value:
        """One constant value per distinct small ``array`` (dtype, shape and bytes) in the
        graph, for the parameters many nodes repeat (``name``: the first user's)."""
        key = (array.dtype.str, array.shape, array.tobytes())
        v = self._shared.get(key)
        if v is None:
            v = self._shared[key] = self.constant(array, name)
        return v

    def qparams(self, quant: Quant, dtype: np.dtype, name: str) -> tuple[Value, Value]:
        """The (scale, zero point) constants of ``quant`` with ``dtype`` zero points: made once
        per tensor's parameters (its QuantizeLinear and DequantizeLinear share them)."""
        key = (id(quant), dtype)
        got = self._qparams.get(key)
        if got is None or got[0] is not quant:
            got = self._qparams[key] = (
                quant, self.shared_constant(quant.scale.astype(np.float32), f"{name}__scale"),
                self.shared_constant(quant.zero_point.astype(dtype), f"{name}__zero_point"))
        return got[1], got[2]

    # ------------------------------------------------------------ tensors
    def info(self, t: int) -> TensorInfo:
        return self.slots[t].info

    def dequantized(self, q: Value, quant: Quant, shape: Sequence[int], name: str, axis: int | None) -> Value:
        """``DequantizeLinear(q)`` as float."""
        scale, zp = self.qparams(quant, q.dtype.numpy, name)
        out = self.new_value(name, _FLOAT, shape)
        attrs = {} if axis is None else {"axis": axis}
        return self.add("DequantizeLinear", [q, scale, zp], f"{name}__dequantize", [out], attrs)[0]

    def quantized(self, x: Value, quant: Quant, dtype: DataType, shape: Sequence[int], name: str,
                  axis: int | None) -> Value:
        """``QuantizeLinear(x)`` to ``dtype``."""
        scale, zp = self.qparams(quant, dtype.numpy, name)
        out = self.new_value(name, dtype, shape)
        attrs = {} if axis is None else {"axis": axis}
        return self.add("QuantizeLinear", [x, scale, zp], f"{name}__quantize", [out], attrs)[0]

    def const_value(self, t: int, perm: Sequence[int] | None = None) -> Value:
        """The float (or integer) IR value of constant tensor ``t``, transposed by ``perm``
        (a copy only then); int8/uint8 data stay quantized behind a DequantizeLinear."""
        slot = self.slots[t]
        suffix = "" if perm is None else "__" + "".join(map(str, perm))
        if slot._const is None and slot.half is not None:  # fp16: converted and laid out in one pass
            return self.constant(half_to_float(slot.half, perm), slot.info.name + suffix)
        data, quant, info = slot.const, slot.quant, slot.info
        assert data is not None
        if data.dtype == np.float16:
            return self.constant(half_to_float(data, perm), info.name + suffix)
        if perm is not None:
            data = np.ascontiguousarray(data.transpose(perm))
        axis = None if quant is None or quant.axis is None else (quant.axis if perm is None else list(perm).index(quant.axis))
        if quant is None or data.dtype not in (np.int8, np.uint8, np.int16, np.int32):
            return self.constant(data, info.name + suffix)
        if data.dtype == np.int32:  # biases: dequantized at import
            s = quant.scale if axis is None else quant.scale.reshape([-1 if i == axis else 1 for i in range(data.ndim)])
            z = quant.zero_point if axis is None else quant.zero_point.reshape(s.shape)
            return self.constant(((data.astype(np.float64) - z) * s).astype(np.float32), info.name + suffix)
        q = self.constant(data, info.name + suffix + "__quantized")
        return self.dequantized(q, quant, data.shape, info.name + suffix, axis)

    def transposed(self, x: Value, perm: Sequence[int], shape: Sequence[int], name: str) -> Value:
        """``x`` transposed by ``perm``; a dequantized activation is transposed in its
        integer form (Transpose before the DequantizeLinear, as QDQ consumers expect)."""
        p = x.producer
        if p is not None and p.op_type == "DequantizeLinear" and p.attr("axis") is None and p.inputs[0].const is None:
            q = self.new_value(name + "__quantized", p.inputs[0].dtype, shape)
            q = self.add("Transpose", [p.inputs[0]], f"{name}__transpose", [q], {"perm": list(perm)})[0]
            out = self.new_value(name, _FLOAT, shape)
            return self.add("DequantizeLinear", [q, *p.inputs[1:]], f"{name}__dequantize", [out])[0]
        out = self.new_value(name, x.dtype, shape)
        return self.add("Transpose", [x], f"{name}__transpose", [out], {"perm": list(perm)})[0]

    def plain(self, t: int) -> Value:
        """Tensor ``t`` in TFLite layout (a Transpose back from NCHW when only that exists)."""
        slot = self.slots[t]
        if slot.plain is None:
            if slot.is_const:
                slot.plain = self.const_value(t)
            elif slot.nchw is not None:
                slot.plain = self.transposed(slot.nchw, NHWC, slot.info.shape, slot.info.name + "__nhwc")
            else:
                raise ModelLoadError(f"{slot.info.desc} is read before any operator writes it "
                                     "(the operators are not in execution order)")
        return slot.plain

    def nchw(self, t: int) -> Value:
        """4-D tensor ``t`` in NCHW layout (a Transpose, or a transposed constant, when needed)."""
        slot = self.slots[t]
        if slot.nchw is None:
            info = slot.info
            if len(info.shape) != 4:
                raise ModelLoadError(f"{info.desc}: expected a 4-D (NHWC) tensor, got shape {list(info.shape)}")
            if slot.is_const:
                slot.nchw = self.const_value(t, NCHW)
            else:
                slot.nchw = self.transposed(self.plain(t), NCHW, [info.shape[p] for p in NCHW], info.name + "__nchw")
        return slot.nchw


class OperatorRef:
    """An operator of the file: its table, index and name, its options, and errors naming it."""

    def __init__(self, op: Any, index: int, op_name: str) -> None:
        self.op, self.index, self.op_name = op, index, op_name

    @property
    def desc(self) -> str:
        return f"operator {self.index} ({self.op_name})"

    def fail(self, message: str) -> UnsupportedNodeError:
        return UnsupportedNodeError(f"{self.desc}: {message}")

    def options(self, cls: type) -> Any:
        """The builtin options table as ``cls`` (defaults when the file stores none)."""
        return read_options(self, cls)


class OpContext(OperatorRef):
    """One TFLite operator as its mapper sees it: its tensors, options and the graph state."""

    def __init__(self, state: GraphState, op: Any, index: int, op_name: str,
                 io: tuple[Sequence[int], Sequence[int]] | None = None) -> None:
        super().__init__(op, index, op_name)
        self.state = state
        if io is None:  # ``io``: the operator's (inputs, outputs) when the caller has read them
            io = op.i32s(OPERATOR.inputs), op.i32s(OPERATOR.outputs)  # the caller guards reads
        self.inputs = ins = list(io[0])
        self.outputs = outs = list(io[1])
        n = len(state.slots)
        if (ins and (min(ins) < -1 or max(ins) >= n)) or (outs and (min(outs) < -1 or max(outs) >= n)):
            bad = next(t for t in ins + outs if not -1 <= t < n)
            raise ModelLoadError(f"operator {index} ({op_name}) refers to tensor {bad}; the subgraph has {n}")
        self.name = f"{op_name.lower()}_{index}"

    # ------------------------------------------------------------- tensors
    def has(self, i: int) -> bool:
        return i < len(self.inputs) and self.inputs[i] >= 0

    def _missing(self, i: int) -> ModelLoadError:
        return ModelLoadError(f"{self.desc}: input {i} is missing ({len(self.inputs)} inputs)")

    # info, x and x_nchw inline has(): they run a few times per operator
    def info(self, i: int) -> TensorInfo:
        ins = self.inputs
        if i < len(ins) and ins[i] >= 0:
            return self.state.slots[ins[i]].info
        raise self._missing(i)

    def out_info(self, j: int = 0) -> TensorInfo:
        if j >= len(self.outputs) or self.outputs[j] < 0:
            raise ModelLoadError(f"{self.desc}: output {j} is missing ({len(self.outputs)} outputs)")
        return self.state.info(self.outputs[j])

    def const(self, i: int) -> np.ndarray | None:
        """The constant data of input ``i`` (TFLite layout), ``None`` when computed."""
        ins = self.inputs
        return self.state.slots[ins[i]].const if i < len(ins) and ins[i] >= 0 else None

    def const_ints(self, i: int) -> list[int]:
        data = self.const(i)
        if data is None:
            raise self.fail(f"input {i} ({self.info(i).name!r}) must be a constant")
        return [int(x) for x in np.asarray(data).reshape(-1).tolist()]  # Python scalars: no numpy scalar per entry

    def x(self, i: int) -> Value:
        ins = self.inputs
        if i < len(ins) and ins[i] >= 0:
            return self.state.plain(ins[i])
        raise self._missing(i)

    def x_nchw(self, i: int) -> Value:
        ins = self.inputs
        if i < len(ins) and ins[i] >= 0:
            return self.state.nchw(ins[i])
        raise self._missing(i)

    def is_nchw(self, i: int) -> bool:
        """True when input ``i`` is 4-D and already has its NCHW value (prefer that layout)."""
        slot = self.state.slots[self.inputs[i]]
        return slot.nchw is not None and len(slot.info.shape) == 4

    def weight(self, i: int, perm: Sequence[int] | None = None) -> Value:
        """Input ``i`` as a float weight, transposed by ``perm`` (constants at import)."""
        t = self.inputs[i]
        if self.state.slots[t].is_const:
            return self.state.const_value(t, perm)
        x = self.x(i)
        if perm is None:
            return x
        info = self.info(i)
        out = self.state.new_value(f"{info.name}__perm", x.dtype, [info.shape[p] for p in perm])
        return self.state.add("Transpose", [x], f"{self.name}__weight_perm", [out], {"perm": list(perm)})[0]

    # ------------------------------------------------------------- building
    def constant(self, array: np.ndarray, hint: str) -> Value:
        return self.state.constant(array, f"{self.name}__{hint}")

    def node(self, op_type: str, inputs: Sequence[Value | None], dtype: DataType, shape: Sequence[int] | None,
             attrs: dict[str, Any] | None = None, hint: str = "") -> Value:
        """Add one single-output node; returns its output value."""
        suffix = f"__{hint}" if hint else ""
        out = self.state.new_value(f"{self.name}{suffix}__out", dtype, shape)
        return self.state.add(op_type, inputs, self.name + suffix, [out], attrs)[0]

    def nodes(self, op_type: str, inputs: Sequence[Value | None], types: Sequence[tuple[DataType, Sequence[int]]],
              attrs: dict[str, Any] | None = None) -> list[Value]:
        """Add one node with several outputs."""
        outs = [self.state.new_value(f"{self.name}__out{k}", d, s) for k, (d, s) in enumerate(types)]
        return self.state.add(op_type, inputs, self.name, outs, attrs)

    def out_type(self, j: int = 0, nchw: bool = False) -> tuple[DataType, list[int]]:
        """(IR element type, shape) of output ``j`` (float for quantized tensors)."""
        info = self.out_info(j)
        dtype = _FLOAT if self.state.slots[self.outputs[j]].quant is not None and \
            info.dtype in QUANTIZED_TYPES else info.dtype
        shape = [info.shape[p] for p in NCHW] if nchw else list(info.shape)
        return dtype, shape

    def set_out(self, j: int, value: Value, nchw: bool = False) -> None:
        """Record ``value`` as output ``j`` (in NCHW when ``nchw``), fake-quantized when the tensor is."""
        t = self.outputs[j]
        slot = self.state.slots[t]
        info = slot.info
        self._rename(value, info.name + ("__nchw" if nchw else ""))
        if slot.quant is not None and info.dtype in QUANTIZED_TYPES:
            shape = [info.shape[p] for p in NCHW] if nchw else info.shape
            axis = slot.quant.axis
            if axis is not None and nchw:
                axis = NCHW.index(axis)
            q = self.state.quantized(value, slot.quant, info.dtype, shape, f"{info.name}__q", axis)
            value = self.state.dequantized(q, slot.quant, shape, f"{info.name}__dq", axis)
        if nchw:
            slot.nchw = value
        else:
            slot.plain = value

    def _rename(self, value: Value, name: str) -> None:
        """Give a value this operator just made the TFLite tensor's name (readable graphs and profiles)."""
        names = self.state.names
        if value.producer is not None and value.name.startswith(self.name + "__") and name not in names:
            names.pop(value.name, None)
            value.name = name
            names[name] = value

    def alias(self, j: int, i: int) -> None:
        """Output ``j`` is input ``i`` (same values, layouts and constant data)."""
        src, dst = self.state.slots[self.inputs[i]], self.state.slots[self.outputs[j]]
        dst.plain, dst.nchw = src.plain, src.nchw
        dst._const, dst.half = src._const, src.half  # fp16 data stays unconverted until read
        if dst.is_const:
            dst.quant = src.quant

