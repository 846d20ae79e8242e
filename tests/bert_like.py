"""A small BERT-style encoder written node by node in ONNX (embeddings with
LayerNormalization, self-attention with an additive padding mask, erf GELU
feed-forward, residual LayerNormalization), shaped like a PyTorch export so
that ONNX Runtime's transformer optimizer recognizes its patterns."""
from __future__ import annotations

import numpy as np
from onnx import ModelProto, TensorProto, helper, numpy_helper

__all__ = ["bert_like"]


class _Builder:
    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.nodes: list = []
        self.inits: list = []
        self.count = 0

    def const(self, value: np.ndarray, name: str | None = None) -> str:
        name = name or f"c{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(value, name))
        return name

    def weight(self, *shape: int, scale: float = 0.2) -> str:
        return self.const((self.rng.standard_normal(shape) * scale).astype(np.float32))

    def op(self, op_type: str, inputs: list[str], **attrs) -> str:
        self.count += 1
        out = f"{op_type.lower()}_{self.count}"
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=f"{op_type}_{self.count}", **attrs))
        return out

    def linear(self, x: str, d_in: int, d_out: int) -> str:
        return self.op("Add", [self.weight(d_out, scale=0.05), self.op("MatMul", [x, self.weight(d_in, d_out)])])

    def layer_norm(self, x: str, hidden: int) -> str:
        gamma = self.const((1 + 0.1 * self.rng.standard_normal(hidden)).astype(np.float32))
        beta = self.const((0.1 * self.rng.standard_normal(hidden)).astype(np.float32))
        return self.op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=1e-12)

    def heads(self, x: str, num_heads: int, head: int, perm: list[int]) -> str:
        shape = self.const(np.array([0, 0, num_heads, head], np.int64))
        return self.op("Transpose", [self.op("Reshape", [x, shape])], perm=perm)

    def gelu(self, x: str) -> str:
        scaled = self.op("Div", [x, self.const(np.array(np.sqrt(2.0), np.float32))])
        one_plus = self.op("Add", [self.op("Erf", [scaled]), self.const(np.array(1.0, np.float32))])
        return self.op("Mul", [self.op("Mul", [x, one_plus]), self.const(np.array(0.5, np.float32))])


def _attention(b: _Builder, x: str, mask: str, hidden: int, num_heads: int) -> str:
    head = hidden // num_heads
    q = b.heads(b.linear(x, hidden, hidden), num_heads, head, [0, 2, 1, 3])
    k = b.heads(b.linear(x, hidden, hidden), num_heads, head, [0, 2, 3, 1])
    v = b.heads(b.linear(x, hidden, hidden), num_heads, head, [0, 2, 1, 3])
    scores = b.op("Div", [b.op("MatMul", [q, k]), b.const(np.array(np.sqrt(head), np.float32))])
    probs = b.op("Softmax", [b.op("Add", [scores, mask])], axis=-1)
    ctx = b.op("Transpose", [b.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    ctx = b.op("Reshape", [ctx, b.const(np.array([0, 0, hidden], np.int64))])
    return b.layer_norm(b.op("Add", [b.linear(ctx, hidden, hidden), x]), hidden)


def bert_like(seed: int = 0, vocab: int = 40, hidden: int = 32, num_heads: int = 4, layers: int = 2,
              max_positions: int = 16) -> ModelProto:
    """The encoder: inputs ``input_ids``, ``attention_mask``, ``token_type_ids``
    (int64, [batch, sequence]); output ``last_hidden_state`` [batch, sequence, hidden]."""
    b = _Builder(np.random.default_rng(seed))
    ids, mask_in, types = "input_ids", "attention_mask", "token_type_ids"
    seq = b.op("Gather", [b.op("Shape", [ids]), b.const(np.array(1, np.int64))], axis=0)
    buffer = b.const(np.arange(max_positions, dtype=np.int64)[None, :])  # HF BERT's position_ids buffer
    positions = b.op("Slice", [buffer, b.const(np.array([0], np.int64)),
                               b.op("Unsqueeze", [seq, b.const(np.array([0], np.int64))]),
                               b.const(np.array([1], np.int64)), b.const(np.array([1], np.int64))])
    emb = b.op("Add", [b.op("Gather", [b.weight(vocab, hidden, scale=0.5), ids], axis=0),
                       b.op("Gather", [b.weight(2, hidden, scale=0.5), types], axis=0)])
    emb = b.op("Add", [emb, b.op("Gather", [b.weight(max_positions, hidden, scale=0.5), positions], axis=0)])
    x = b.layer_norm(emb, hidden)
    ext = b.op("Unsqueeze", [mask_in, b.const(np.array([1], np.int64))])
    ext = b.op("Unsqueeze", [ext, b.const(np.array([2], np.int64))])
    ext = b.op("Cast", [ext], to=TensorProto.FLOAT)
    mask = b.op("Mul", [b.op("Sub", [b.const(np.array(1.0, np.float32)), ext]), b.const(np.array(-10000.0, np.float32))])
    for _ in range(layers):
        x = _attention(b, x, mask, hidden, num_heads)
        ff = b.linear(b.gelu(b.linear(x, hidden, 4 * hidden)), 4 * hidden, hidden)
        x = b.layer_norm(b.op("Add", [ff, x]), hidden)
    b.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="output"))
    int_in = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "sequence"]) for n in (ids, mask_in, types)]
    out = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", hidden])]
    graph = helper.make_graph(b.nodes, "bert_like", int_in, out, b.inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
