"""Writing small ``.tflite`` models in code (the ``tflite`` package's flatbuffer
builders), for the TFLite frontend tests and benchmarks.  No downloads."""
from __future__ import annotations

import importlib
from typing import Any, Sequence

import flatbuffers
import numpy as np
import tflite

__all__ = ["TFLiteWriter", "TYPE_CODES", "litert_run", "mobilenet_like"]

TYPE_CODES = {np.dtype(np.float32): 0, np.dtype(np.float16): 1, np.dtype(np.int32): 2, np.dtype(np.uint8): 3,
              np.dtype(np.int64): 4, np.dtype(np.bool_): 6, np.dtype(np.int16): 7, np.dtype(np.complex64): 8,
              np.dtype(np.int8): 9}


def _mod(name: str) -> Any:
    return importlib.import_module(f"tflite.{name}")


class TFLiteWriter:
    """Collects tensors and operators of one subgraph, then ``build()`` returns the file bytes."""

    def __init__(self) -> None:
        self.tensors: list[dict[str, Any]] = []
        self.buffers: list[bytes | None] = [None]
        self.ops: list[dict[str, Any]] = []
        self.opcodes: list[tuple[int, str | None]] = []
        self.inputs: list[int] = []
        self.outputs: list[int] = []
        self.version = 3
        #: (key, subgraph) or (key, subgraph, inputs, outputs), inputs/outputs as (name, tensor index) pairs
        self.signatures: list[tuple] = []
        self.extra_subgraphs = 0
        #: buffer index -> (offset, size): data stored outside the flatbuffer (large-model layout)
        self.external: dict[int, tuple[int, int]] = {}

    def tensor(self, name: str, shape: Sequence[int], dtype: Any = np.float32, data: np.ndarray | None = None,
               quant: tuple[Any, Any, int] | None = None, buffer: int | None = None) -> int:
        """Add a tensor (a constant when ``data`` is given); ``quant`` = (scales, zero points, axis)."""
        if buffer is None:
            buffer = 0
            if data is not None:
                self.buffers.append(np.ascontiguousarray(data).tobytes())
                buffer = len(self.buffers) - 1
        self.tensors.append({"name": name, "shape": list(shape), "type": TYPE_CODES[np.dtype(dtype)],
                             "buffer": buffer, "quant": quant, "sparse": None})
        return len(self.tensors) - 1

    def sparse_const(self, name: str, dense: np.ndarray) -> int:
        """A 2-D constant stored CSR-sparse (row DENSE, column SPARSE_CSR), as converters write pruned weights."""
        rows = [np.flatnonzero(r) for r in dense]
        segments = np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(np.int32)
        indices = np.concatenate(rows).astype(np.int32)
        values = dense[dense != 0]
        t = self.tensor(name, dense.shape, dense.dtype, values)
        self.tensors[t]["sparse"] = (dense.shape[0], segments, indices)
        return t

    def const(self, name: str, data: np.ndarray, quant: tuple[Any, Any, int] | None = None) -> int:
        data = np.asarray(data)
        return self.tensor(name, data.shape, data.dtype, data, quant)

    def input(self, name: str, shape: Sequence[int], dtype: Any = np.float32, quant: Any = None) -> int:
        t = self.tensor(name, shape, dtype, quant=quant)
        self.inputs.append(t)
        return t

    def op(self, name: str, inputs: Sequence[int], outputs: Sequence[int], options: str | None = None,
           custom: str | None = None, **fields: Any) -> None:
        """Add builtin operator ``name`` (or custom operator ``custom``) with ``options`` table
        class name (e.g. ``"Conv2DOptions"``) and its scalar fields (``Padding=0``...)."""
        code = getattr(tflite.BuiltinOperator, "CUSTOM" if custom else name)
        key = (code, custom)
        if key not in self.opcodes:
            self.opcodes.append(key)
        self.ops.append({"opcode": self.opcodes.index(key), "inputs": list(inputs), "outputs": list(outputs),
                         "options": options, "fields": fields})

    # ------------------------------------------------------------------ build
    def build(self) -> bytes:
        b = flatbuffers.Builder(1024)
        buffers = [self._buffer(b, d, self.external.get(k)) for k, d in enumerate(self.buffers)]
        tensors = [self._tensor(b, t) for t in self.tensors]
        ops = [self._operator(b, o) for o in self.ops]
        subgraphs = [self._subgraph(b, tensors, ops, self.inputs, self.outputs, "main")]
        for k in range(self.extra_subgraphs):
            subgraphs.append(self._subgraph(b, [], [], [], [], f"extra_{k}"))
        return self._model(b, subgraphs, buffers, "written by tests/tflite_models.py")

    def _model(self, b: flatbuffers.Builder, subgraphs: list[int], buffers: list[int],
               description: str | None = None) -> bytes:
        """The finished file: the Model table over ``subgraphs`` and ``buffers``
        with the operator codes and signatures gathered so far."""
        codes = self._opcode_tables(b)
        sigs = [self._signature(b, *sig) for sig in self.signatures]
        m = _mod("Model")
        vec = {name: self._vector(b, m, name, items) for name, items in
               (("OperatorCodes", codes), ("Subgraphs", subgraphs), ("Buffers", buffers), ("SignatureDefs", sigs))}
        desc = None if description is None else b.CreateString(description)
        m.Start(b)
        m.AddVersion(b, self.version)
        m.AddOperatorCodes(b, vec["OperatorCodes"])
        m.AddSubgraphs(b, vec["Subgraphs"])
        m.AddBuffers(b, vec["Buffers"])
        m.AddSignatureDefs(b, vec["SignatureDefs"])
        if desc is not None:
            m.AddDescription(b, desc)
        b.Finish(m.End(b), file_identifier=b"TFL3")
        return bytes(b.Output())

    @staticmethod
    def _vector(b: flatbuffers.Builder, mod: Any, name: str, items: Sequence[int]) -> int:
        getattr(mod, f"Start{name}Vector")(b, len(items))
        for it in reversed(items):
            b.PrependUOffsetTRelative(it)
        return b.EndVector()

    @staticmethod
    def _ints(b: flatbuffers.Builder, values: Sequence[int]) -> int:
        b.StartVector(4, len(values), 4)
        for v in reversed(values):
            b.PrependInt32(int(v))
        return b.EndVector()

    def _buffer(self, b: flatbuffers.Builder, data: bytes | None, external: tuple[int, int] | None = None) -> int:
        vec = None
        if data and external is None:
            b.StartVector(1, len(data), 16)
            b.head = b.head - len(data)
            b.Bytes[b.head:b.head + len(data)] = data
            vec = b.EndVector()
        m = _mod("Buffer")
        m.Start(b)
        if vec is not None:
            m.AddData(b, vec)
        if external is not None:
            m.AddOffset(b, external[0])
            m.AddSize(b, external[1])
        return m.End(b)

    def _quant(self, b: flatbuffers.Builder, quant: tuple[Any, Any, int]) -> int:
        scales, zps, axis = (np.atleast_1d(np.asarray(quant[0], np.float32)),
                             np.atleast_1d(np.asarray(quant[1], np.int64)), quant[2])
        b.StartVector(4, len(scales), 4)
        for s in reversed(scales):
            b.PrependFloat32(float(s))
        sv = b.EndVector()
        b.StartVector(8, len(zps), 8)
        for z in reversed(zps):
            b.PrependInt64(int(z))
        zv = b.EndVector()
        m = _mod("QuantizationParameters")
        m.Start(b)
        m.AddScale(b, sv)
        m.AddZeroPoint(b, zv)
        m.AddQuantizedDimension(b, axis)
        return m.End(b)

    def _opcode_tables(self, b) -> list:
        """The OperatorCode tables of ``self.opcodes`` (builtin code, custom name)."""
        codes = []
        for code, custom in self.opcodes:
            cc = b.CreateString(custom) if custom else None
            m = _mod("OperatorCode")
            m.Start(b)
            m.AddDeprecatedBuiltinCode(b, min(code, 127))
            m.AddBuiltinCode(b, code)
            m.AddVersion(b, 1)
            if cc is not None:
                m.AddCustomCode(b, cc)
            codes.append(m.End(b))
        return codes

    def _tensor(self, b: flatbuffers.Builder, t: dict[str, Any]) -> int:
        name = b.CreateString(t["name"])
        shape = self._ints(b, t["shape"])
        sig = self._ints(b, t["signature"]) if t.get("signature") is not None else None
        q = self._quant(b, t["quant"]) if t["quant"] is not None else None
        sp = self._sparsity(b, *t["sparse"]) if t["sparse"] is not None else None
        m = _mod("Tensor")
        m.Start(b)
        m.AddShape(b, shape)
        m.AddType(b, t["type"])
        m.AddBuffer(b, t["buffer"])
        m.AddName(b, name)
        if q is not None:
            m.AddQuantization(b, q)
        if sp is not None:
            m.AddSparsity(b, sp)
        if sig is not None:
            m.AddShapeSignature(b, sig)
        return m.End(b)

    def _sparsity(self, b: flatbuffers.Builder, rows: int, segments: np.ndarray, indices: np.ndarray) -> int:
        vecs = []
        for arr in (segments, indices):
            v = self._ints(b, arr.tolist())
            m = _mod("Int32Vector")
            m.Start(b)
            m.AddValues(b, v)
            vecs.append(m.End(b))
        dm = _mod("DimensionMetadata")
        dm.Start(b)
        dm.AddFormat(b, 0)
        dm.AddDenseSize(b, rows)
        dense_dim = dm.End(b)
        dm.Start(b)
        dm.AddFormat(b, 1)
        dm.AddArraySegmentsType(b, 1)
        dm.AddArraySegments(b, vecs[0])
        dm.AddArrayIndicesType(b, 1)
        dm.AddArrayIndices(b, vecs[1])
        sparse_dim = dm.End(b)
        order = self._ints(b, [0, 1])
        sp = _mod("SparsityParameters")
        metas = self._vector(b, sp, "DimMetadata", [dense_dim, sparse_dim])
        sp.Start(b)
        sp.AddTraversalOrder(b, order)
        sp.AddDimMetadata(b, metas)
        return sp.End(b)

    def _operator(self, b: flatbuffers.Builder, o: dict[str, Any]) -> int:
        ins, outs = self._ints(b, o["inputs"]), self._ints(b, o["outputs"])
        custom = o.get("custom_options")
        cv = b.CreateByteVector(custom) if custom is not None else None
        opts = None
        if o["options"]:
            strings = {k: b.CreateString(v) for k, v in o["fields"].items() if isinstance(v, str)}
            m = _mod(o["options"])
            m.Start(b)
            for k, v in o["fields"].items():
                getattr(m, f"Add{k}")(b, strings.get(k, v))
            opts = m.End(b)
        m = _mod("Operator")
        m.Start(b)
        m.AddOpcodeIndex(b, o["opcode"])
        m.AddInputs(b, ins)
        m.AddOutputs(b, outs)
        if opts is not None:
            m.AddBuiltinOptionsType(b, getattr(tflite.BuiltinOptions, o["options"]))
            m.AddBuiltinOptions(b, opts)
        if cv is not None:
            m.AddCustomOptions(b, cv)
        return m.End(b)

    def _subgraph(self, b: flatbuffers.Builder, tensors: list[int], ops: list[int], ins: list[int],
                  outs: list[int], name: str) -> int:
        m = _mod("SubGraph")
        tv, ov = self._vector(b, m, "Tensors", tensors), self._vector(b, m, "Operators", ops)
        iv, outv, nm = self._ints(b, ins), self._ints(b, outs), b.CreateString(name)
        m.Start(b)
        m.AddTensors(b, tv)
        m.AddInputs(b, iv)
        m.AddOutputs(b, outv)
        m.AddOperators(b, ov)
        m.AddName(b, nm)
        return m.End(b)

    def _signature(self, b: flatbuffers.Builder, key: str, subgraph: int, inputs: Sequence[tuple[str, int]] = (),
                   outputs: Sequence[tuple[str, int]] = ()) -> int:
        maps = []
        for pairs in (inputs, outputs):
            tables = []
            for name, index in pairs:
                nm = b.CreateString(name)
                tm = _mod("TensorMap")
                tm.Start(b)
                tm.AddName(b, nm)
                tm.AddTensorIndex(b, index)
                tables.append(tm.End(b))
            maps.append(tables)
        m = _mod("SignatureDef")
        vin = self._vector(b, m, "Inputs", maps[0]) if inputs else None
        vout = self._vector(b, m, "Outputs", maps[1]) if outputs else None
        k = b.CreateString(key)
        m.Start(b)
        m.AddSignatureKey(b, k)
        m.AddSubgraphIndex(b, subgraph)
        if vin is not None:
            m.AddInputs(b, vin)
        if vout is not None:
            m.AddOutputs(b, vout)
        return m.End(b)


def litert_run(model: bytes, feeds: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Outputs of the LiteRT interpreter on ``model`` (inputs in order)."""
    from ai_edge_litert.interpreter import Interpreter
    it = Interpreter(model_content=model)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), feeds):
        it.set_tensor(d["index"], x)
    it.invoke()
    return [it.get_tensor(d["index"]).copy() for d in it.get_output_details()]


def mobilenet_like(size: int = 224, width: int = 32, blocks: int = 13, classes: int = 1000,
                   fp16: bool = False, seed: int = 0) -> bytes:
    """A MobileNet-v1-shaped float model (conv, depthwise-separable blocks with
    RELU6, mean, fully connected, softmax); ``fp16``: weights stored as fp16
    behind DEQUANTIZE, as converters write them."""
    rng = np.random.default_rng(seed)
    w = TFLiteWriter()

    def weight(name: str, shape: list[int], fan_in: int | None = None, gain: float = 2.0) -> int:
        fan_in = fan_in or int(np.prod(shape[1:]))
        data = (rng.standard_normal(shape) * (gain / fan_in) ** 0.5).astype(np.float32)
        if not fp16:
            return w.const(name, data)
        half = w.const(name + "_fp16", data.astype(np.float16))
        out = w.tensor(name, shape)
        w.op("DEQUANTIZE", [half], [out])
        return out

    x = w.input("input", [1, size, size, 3])
    c, hw = width, (size + 1) // 2
    y = w.tensor("conv0", [1, hw, hw, c])
    w.op("CONV_2D", [x, weight("conv0_w", [c, 3, 3, 3]), w.const("conv0_b", np.zeros(c, np.float32))], [y],
         "Conv2DOptions", Padding=0, StrideW=2, StrideH=2, FusedActivationFunction=3)
    for k in range(blocks):
        stride = 2 if k in (1, 3, 5, 11) else 1
        hw2 = (hw + stride - 1) // stride
        d = w.tensor(f"dw{k}", [1, hw2, hw2, c])
        w.op("DEPTHWISE_CONV_2D", [y, weight(f"dw{k}_w", [1, 3, 3, c], fan_in=9), w.const(f"dw{k}_b", np.zeros(c, np.float32))],
             [d], "DepthwiseConv2DOptions", Padding=0, StrideW=stride, StrideH=stride, DepthMultiplier=1,
             DilationWFactor=1, DilationHFactor=1, FusedActivationFunction=3)
        c2 = min(c * 2, 1024) if stride == 2 or k == 0 else c
        y = w.tensor(f"pw{k}", [1, hw2, hw2, c2])
        w.op("CONV_2D", [d, weight(f"pw{k}_w", [c2, 1, 1, c]), w.const(f"pw{k}_b", np.zeros(c2, np.float32))], [y],
             "Conv2DOptions", Padding=0, StrideW=1, StrideH=1, FusedActivationFunction=3)
        c, hw = c2, hw2
    m = w.tensor("pool", [1, c])
    w.op("MEAN", [y, w.const("axes", np.array([1, 2], np.int32))], [m], "ReducerOptions", KeepDims=False)
    logits = w.tensor("logits", [1, classes])
    w.op("FULLY_CONNECTED", [m, weight("fc_w", [classes, c], gain=0.05), w.const("fc_b", np.zeros(classes, np.float32))],
         [logits], "FullyConnectedOptions")
    probs = w.tensor("probs", [1, classes])
    w.op("SOFTMAX", [logits], [probs], "SoftmaxOptions", Beta=1.0)
    w.outputs = [probs]
    return w.build()
