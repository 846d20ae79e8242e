"""``TFLiteWriter`` (tests/tflite_models.py) plus what the real models use:
custom options per operator (``op(..., custom_options=...)``; the base writer
writes them and string-valued builtin options) and several subgraphs (IF
branches, CALL_ONCE initializers).  No downloads."""
from __future__ import annotations

from typing import Any, Sequence

import flatbuffers

from tflite_models import TFLiteWriter

__all__ = ["RealWriter"]


class RealWriter(TFLiteWriter):
    """Tensors and operators go to the current subgraph; ``subgraph(name)`` starts the next one
    (its index is returned, for IF / CALL_ONCE options)."""

    def __init__(self) -> None:
        super().__init__()
        self.done: list[tuple[str, list[dict[str, Any]], list[dict[str, Any]], list[int], list[int]]] = []
        self.name = "main"

    def subgraph(self, name: str) -> int:
        self.done.append((self.name, self.tensors, self.ops, self.inputs, self.outputs))
        self.name, self.tensors, self.ops, self.inputs, self.outputs = name, [], [], [], []
        return len(self.done)

    def op(self, name: str, inputs: Sequence[int], outputs: Sequence[int], options: str | None = None,
           custom: str | None = None, custom_options: bytes | None = None, **fields: Any) -> None:
        super().op(name, inputs, outputs, options, custom, **fields)
        self.ops[-1]["custom_options"] = custom_options

    def build(self) -> bytes:
        graphs = self.done + [(self.name, self.tensors, self.ops, self.inputs, self.outputs)]
        b = flatbuffers.Builder(1024)
        buffers = [self._buffer(b, d) for d in self.buffers]
        subgraphs = []
        for name, tensors, ops, ins, outs in graphs:
            t = [self._tensor(b, x) for x in tensors]
            o = [self._operator(b, x) for x in ops]
            subgraphs.append(self._subgraph(b, t, o, ins, outs, name))
        return self._model(b, subgraphs, buffers)
