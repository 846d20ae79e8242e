"""Which nodes compute a value that becomes a shape.

A size, a count or a shape read by an op (``Reshape``'s shape, ``Range``'s
limits, ``Expand``'s shape, ``ConstantOfShape``'s dims, ``Resize``'s
scales/sizes, ``Tile``'s repeats, ``Slice``'s starts/ends, ``TopK``'s k,
``OneHot``'s depth, ...) decides how long a tensor is: the duration
predictor of a TTS model, for example, computes ``Floor``/``Ceil`` of
durations whose cumulative sum sets the audio length.  Computing such a
value in reduced precision (fp16: integers above 2048 are not exact, a
``Floor`` lands one step lower) changes the output's shape, not just its
values.  :func:`shape_value_producers` finds every node whose output reaches
such an input by data flow, walking back from the shape-consuming inputs;
``Shape``/``Size`` and the ``*Like`` ops read only the shape of their input,
so the walk stops there (their input's values never reach a shape).

Inputs whose *count* of selected elements depends on the data (``NonZero``,
``Compress``'s condition, ``NonMaxSuppression``'s boxes and scores) are not
sizes here: walking back from them would keep whole detection backbones off
a reduced-precision device for a count that thresholds already decide.
"""
from __future__ import annotations

from nnrt_core.ir.graph import Graph, Node, Value
from nnrt_core.ir.types import TensorType

__all__ = ["SHAPE_INPUTS", "SHAPE_ONLY_READERS", "shape_value_producers", "computes_in_float"]

#: op -> indices of the inputs whose values become (part of) a shape, a size or a count of the output
SHAPE_INPUTS: dict[str, tuple[int, ...]] = {
    "Reshape": (1,), "Expand": (1,), "ConstantOfShape": (0,), "Range": (0, 1, 2), "Tile": (1,),
    "Slice": (1, 2, 3, 4), "TopK": (1,), "OneHot": (1,), "Resize": (2, 3), "Upsample": (1,), "Pad": (1, 3),
    "Split": (1,), "Squeeze": (1,), "Unsqueeze": (1,), "CenterCropPad": (1, 2), "Loop": (0,),
    "ReduceSum": (1,), "ReduceMean": (1,), "ReduceMax": (1,), "ReduceMin": (1,), "ReduceProd": (1,),
    "ReduceL1": (1,), "ReduceL2": (1,), "ReduceLogSum": (1,), "ReduceLogSumExp": (1,), "ReduceSumSquare": (1,),
    "DFT": (1, 2), "STFT": (1, 3), "MaxUnpool": (2,), "Col2Im": (1, 2), "NonMaxSuppression": (2,),
    "SplitToSequence": (1,),
}
#: ops reading only the shape of these inputs, never their values (the walk back stops there)
SHAPE_ONLY_READERS: dict[str, tuple[int, ...]] = {
    "Shape": (0,), "Size": (0,), "EyeLike": (0,), "RandomNormalLike": (0,), "RandomUniformLike": (0,),
}


def shape_value_producers(graph: Graph) -> dict[int, str]:
    """``id`` of every node of ``graph`` (top level) whose output reaches a
    shape-consuming input (:data:`SHAPE_INPUTS`) by data flow -> a reason
    naming the first such input found (``"feeds the shape input 1 ('s') of
    Reshape 'r'"``)."""
    out: dict[int, str] = {}
    for n in graph.nodes:
        if n.domain not in ("", "ai.onnx"):
            continue
        for i in SHAPE_INPUTS.get(n.op_type, ()):
            if i < len(n.inputs) and n.inputs[i] is not None:
                _walk_back(n.inputs[i], f"feeds the shape input {i} ({n.inputs[i].name!r}) of {n.op_type} "
                           f"{n.name!r}", out)
    return out


def _walk_back(start: Value, reason: str, out: dict[int, str]) -> None:
    stack = [start.producer] if start.producer is not None else []
    while stack:
        node = stack.pop()
        if id(node) in out:
            continue
        out[id(node)] = reason
        skip = SHAPE_ONLY_READERS.get(node.op_type, ()) if node.domain in ("", "ai.onnx") else ()
        for j, v in enumerate(node.all_inputs() if skip == () else node.inputs):
            if v is None or v.producer is None or j in skip:
                continue
            stack.append(v.producer)


def computes_in_float(node: Node) -> bool:
    """Whether ``node`` reads the values of or writes a floating-point tensor
    (or one of an unknown type): only such nodes change under reduced
    precision; integer and boolean arithmetic is exact on any device, and
    ``Shape``/``Size`` read only a shape."""
    shape_only = SHAPE_ONLY_READERS.get(node.op_type, ()) if node.domain in ("", "ai.onnx") else ()
    read = [v for j, v in enumerate(node.inputs) if j not in shape_only]
    for v in [*read, *node.outputs]:
        if v is None:
            continue
        t = v.type
        if isinstance(t, TensorType) and t.dtype:
            if t.dtype.name.startswith(_FLOAT_NAMES):
                return True
        elif v.const is None or v.const.dtype.kind == "f":
            return True
    return False


#: element type names of floating-point types (FLOAT, FLOAT16, DOUBLE, BFLOAT16, FLOAT8*, FLOAT4*, COMPLEX*)
_FLOAT_NAMES = ("FLOAT", "DOUBLE", "BFLOAT", "COMPLEX")
