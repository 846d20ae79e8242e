"""Models that run (practically) forever, for deadline and cancellation tests
and ``benchmarks/bench_deadlines.py``."""
from __future__ import annotations

from onnx import TensorProto as T
from onnx import helper as h

__all__ = ["loop_model"]


def loop_model(trips: int = 2 ** 62) -> bytes:
    """y = x + trips, one Add per iteration (the trip count is a constant)."""
    body = h.make_graph(
        [h.make_node("Identity", ["c_in"], ["c_out"]), h.make_node("Add", ["x_in", "one"], ["x_out"])], "body",
        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c_in", T.BOOL, []),
         h.make_tensor_value_info("x_in", T.FLOAT, [1])],
        [h.make_tensor_value_info("c_out", T.BOOL, []), h.make_tensor_value_info("x_out", T.FLOAT, [1])],
        [h.make_tensor("one", T.FLOAT, [1], [1.0])])
    g = h.make_graph([h.make_node("Loop", ["M", "cond", "x"], ["y"], body=body, name="loop")], "loop",
                     [h.make_tensor_value_info("x", T.FLOAT, [1])], [h.make_tensor_value_info("y", T.FLOAT, [1])],
                     [h.make_tensor("M", T.INT64, [], [trips]), h.make_tensor("cond", T.BOOL, [], [True])])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()
