"""Seeded mutations of a seed model: raw bytes, protobuf fields and
schema-valid attribute values (the right attribute type, hostile values)."""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable

import numpy as np
import onnx
import onnx.defs
from onnx import AttributeProto, TensorProto, helper

from nnrt_fuzz.corpus import SeedModel

__all__ = ["Case", "make_case", "KINDS"]

INTS = [0, 1, -1, 2, -2, 3, 7, 2**31 - 1, 2**31, -2**31 - 1, 2**62, 2**63 - 1, -2**63, 10**6]
FLOATS = [0.0, -0.0, 1.0, -1.0, 1e-30, 1e30, float("inf"), float("-inf"), float("nan"), 3.5]
STRINGS = ["", "NOTSET", "SAME_UPPER", "VALID", "constant", "reflect", "edge", "nearest", "linear", "cubic",
           "xx\x00", "é", "half_pixel", "asymmetric", "DCR", "CRD", "mean", "sum", "max"]
DTYPES = [TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32, TensorProto.BOOL, TensorProto.STRING,
          TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.UINT8, TensorProto.INT8, 0, 99]


@dataclass(frozen=True)
class Case:
    """One fuzz case: its id, the seed it mutates, what was done, the model bytes and feeds."""

    index: int
    seed_name: str
    mutation: str
    model: bytes
    feeds: dict[str, np.ndarray]


def _opset(m: onnx.ModelProto) -> int:
    return next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), onnx.defs.onnx_opset_version())


def _nodes(g: onnx.GraphProto) -> list[onnx.NodeProto]:
    out = []
    for n in g.node:
        out.append(n)
        for a in n.attribute:
            if a.type == AttributeProto.GRAPH:
                out += _nodes(a.g)
    return out


def _int_list(rng: random.Random) -> list[int]:
    return [rng.choice(INTS[:7] if rng.random() < 0.7 else INTS) for _ in range(rng.choice([0, 1, 2, 3, 4, 9]))]


def _tensor(rng: random.Random) -> TensorProto:
    shape = [rng.choice([0, 1, 2, 3]) for _ in range(rng.choice([0, 1, 2]))]
    n = int(np.prod(shape)) if shape else 1
    dt = rng.choice([np.float32, np.int64, np.int32, np.bool_])
    vals = np.array([rng.choice(FLOATS if dt == np.float32 else INTS[:10]) for _ in range(n)])
    with np.errstate(all="ignore"):
        arr = vals.astype(dt).reshape(shape) if dt != np.float32 else vals.astype(dt).reshape(shape)
    return onnx.numpy_helper.from_array(arr, "t")


def _attr_value(rng: random.Random, kind: int):
    if kind == AttributeProto.INT:
        return rng.choice(INTS)
    if kind == AttributeProto.FLOAT:
        return rng.choice(FLOATS)
    if kind == AttributeProto.STRING:
        return rng.choice(STRINGS)
    if kind == AttributeProto.INTS:
        return _int_list(rng)
    if kind == AttributeProto.FLOATS:
        return [rng.choice(FLOATS) for _ in range(rng.choice([0, 1, 2, 4]))]
    if kind == AttributeProto.STRINGS:
        return [rng.choice(STRINGS) for _ in range(rng.choice([0, 1, 2]))]
    if kind == AttributeProto.TENSOR:
        return _tensor(rng)
    return None


def mutate_attribute(m: onnx.ModelProto, rng: random.Random) -> str:
    """Set one schema attribute of one node to a hostile value of its type."""
    node = rng.choice(_nodes(m.graph))
    try:
        schema = onnx.defs.get_schema(node.op_type, _opset(m), node.domain)
    except onnx.defs.SchemaError:
        return "attr:no-schema"
    attrs = [(k, int(a.type)) for k, a in schema.attributes.items()]
    if not attrs:
        return mutate_field(m, rng)
    name, kind = rng.choice(attrs)
    value = _attr_value(rng, kind)
    if value is None:
        return f"attr:{node.op_type}.{name}:skipped"
    kept = [a for a in node.attribute if a.name != name]
    del node.attribute[:]
    node.attribute.extend(kept)
    node.attribute.append(helper.make_attribute(name, value, attr_type=kind))
    shown = "tensor" if kind == AttributeProto.TENSOR else repr(value)[:60]
    return f"attr:{node.op_type}.{name}={shown}"


def _field_ops(m: onnx.ModelProto, node: onnx.NodeProto, rng: random.Random) -> dict[str, Callable[[], None]]:
    def set_input_empty() -> None:
        if node.input:
            node.input[rng.randrange(len(node.input))] = ""

    def drop_input() -> None:
        if node.input:
            del node.input[rng.randrange(len(node.input))]

    def add_input() -> None:
        node.input.append(rng.choice(list(node.input) or [""]))

    def drop_output() -> None:
        if len(node.output) > 1:
            del node.output[-1]
        elif node.output:
            node.output[0] = ""

    def add_output() -> None:
        node.output.append(f"fuzz_out_{rng.randrange(100)}")

    def set_opset() -> None:
        for o in m.opset_import:
            if o.domain in ("", "ai.onnx"):
                o.version = rng.choice([1, 6, 7, 9, 11, 13, 15, 17, 18, 19, 21, 22, 23])

    def change_dims() -> None:
        tensors = list(m.graph.initializer) + [a.t for n in m.graph.node for a in n.attribute
                                               if a.type == AttributeProto.TENSOR]
        if tensors:
            t = rng.choice(tensors)
            t.dims[:] = [rng.choice([0, 1, 2, 3, 2**20, 2**40]) for _ in range(rng.choice([0, 1, 2, 3]))]

    def change_dtype() -> None:
        t = rng.choice(list(m.graph.input) + list(m.graph.output) or [None])
        if t is not None:
            t.type.tensor_type.elem_type = rng.choice(DTYPES)

    def change_shape() -> None:
        ins = [i for i in m.graph.input if i.type.HasField("tensor_type")]
        if ins:
            shape = rng.choice(ins).type.tensor_type.shape
            del shape.dim[:]
            for _ in range(rng.choice([0, 1, 2, 3, 5])):
                d = shape.dim.add()
                if rng.random() < 0.3:
                    d.dim_param = rng.choice(["N", "?", ""])
                else:
                    d.dim_value = rng.choice([0, 1, 2, 3, 7])

    def swap_op() -> None:
        node.op_type = rng.choice(["Add", "Split", "Min", "Max", "Concat", "Reshape", "Gather", "Conv",
                                   "LayerNormalization", "Resize", "Pad", "Slice", "TopK", "OneHot",
                                   "ConstantOfShape", "MaxUnpool", "If", "Loop", "Scan", "Einsum"])

    def rename_input() -> None:
        if node.input:
            node.input[rng.randrange(len(node.input))] = rng.choice([o for n in m.graph.node for o in n.output]
                                                                   + [i.name for i in m.graph.input])

    return {k: v for k, v in locals().items() if callable(v) and k not in ("rng",)}


def mutate_field(m: onnx.ModelProto, rng: random.Random) -> str:
    """Change one protobuf field: node arity, names, opset, tensor dims, types."""
    node = rng.choice(_nodes(m.graph))
    ops = _field_ops(m, node, rng)
    name = rng.choice(sorted(ops))
    ops[name]()
    return f"field:{name}:{node.op_type}"


def mutate_bytes(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """Flip, overwrite or cut a few bytes of the serialized model."""
    b = bytearray(data)
    how = rng.choice(["flip", "flip", "set", "truncate", "splice"])
    if how == "truncate":
        return bytes(b[: rng.randrange(len(b) + 1)]), "bytes:truncate"
    for _ in range(rng.choice([1, 1, 2, 4, 8])):
        i = rng.randrange(len(b))
        if how == "flip":
            b[i] ^= 1 << rng.randrange(8)
        elif how == "set":
            b[i] = rng.choice([0, 0xFF, 0x7F, 0x80, rng.randrange(256)])
        else:
            j = rng.randrange(len(b))
            b[i:i] = b[j:j + rng.randrange(1, 9)]
    return bytes(b), f"bytes:{how}"


KINDS = ("attr", "attr", "attr", "field", "field", "bytes")


def make_case(corpus: tuple[SeedModel, ...], seed: int, index: int) -> Case:
    """Case ``index`` of the run seeded ``seed`` (the same for the same corpus)."""
    rng = random.Random(f"{seed}:{index}")
    s = corpus[rng.randrange(len(corpus))]
    m = onnx.ModelProto()
    m.CopyFrom(s.model)
    kind = rng.choice(KINDS)
    if kind == "attr":
        what = mutate_attribute(m, rng)
    elif kind == "field":
        what = mutate_field(m, rng)
    if kind == "bytes":
        data, what = mutate_bytes(m.SerializeToString(), rng)
    else:
        data = m.SerializeToString()
    if rng.random() < 0.15 and kind != "bytes":  # a second mutation now and then
        m2 = onnx.ModelProto()
        m2.ParseFromString(data)
        what += " + " + mutate_attribute(m2, rng)
        data = m2.SerializeToString()
    return Case(index, s.name, what, data, s.feeds)
