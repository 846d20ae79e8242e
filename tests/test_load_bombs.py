"""Load-time memory bombs (issue #35): onnx's data-propagating shape
inference allocates one C++ dimension per element of every rank-1 tensor
it looks at, outside the memory budget and the deadline; nnrt runs it only
where no rank-1 value can be long (``bounded_inference``)."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from nnrt_core.frontends.onnx import load_onnx
from nnrt_core.frontends.onnx.bounded_inference import DATA_PROP_MAX_DIM, data_prop_blocker, infer_shapes_bounded


def declared_bomb(n: int = 2 ** 62) -> bytes:
    """The issue's repro: a model declaring an input ``[n]``."""
    g = h.make_graph([h.make_node("CastLike", ["a", "x"], ["ac"]), h.make_node("CastLike", ["z", "x"], ["zc"]),
                      h.make_node("Less", ["x", "zc"], ["c"]), h.make_node("Mul", ["ac", "x"], ["m"]),
                      h.make_node("Where", ["c", "m", "x"], ["y"])], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [n])], [h.make_tensor_value_info("y", T.FLOAT, [n])],
                     [nh.from_array(np.array(.1, np.float32), "a"), nh.from_array(np.array(0., np.float32), "z")])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 18)]).SerializeToString()


def computed_bomb() -> bytes:
    """Small declared sizes; the length 256**4 = 2**32 is computed from ``Shape`` by data propagation."""
    g = h.make_graph([h.make_node("Shape", ["x"], ["s"]), h.make_node("Mul", ["s", "s"], ["p"]),
                      h.make_node("Mul", ["p", "p"], ["p2"]), h.make_node("Reshape", ["w", "p2"], ["r"]),
                      h.make_node("Mul", ["r", "a"], ["y"])], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [256]), h.make_tensor_value_info("w", T.FLOAT, ["n", "k"])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["m"])], [nh.from_array(np.array(.1, np.float32), "a")])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 18)]).SerializeToString()


_CHILD = textwrap.dedent("""
    import json, resource, sys, time
    from nnrt_core import ScheduleConfig, Session
    from nnrt_core.errors import NnrtError
    model = open(sys.argv[1], "rb").read()
    import onnx.helper as h
    from onnx import TensorProto as T
    tiny = h.make_model(h.make_graph([h.make_node("Relu", ["x"], ["y"])], "g",
        [h.make_tensor_value_info("x", T.FLOAT, [2])], [h.make_tensor_value_info("y", T.FLOAT, [2])]),
        opset_imports=[h.make_opsetid("", 18)]).SerializeToString()
    Session(tiny, ScheduleConfig(backends=["numpy"], backup=None))  # the registry, imports: warm
    vm = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (vm + (1 << 30), resource.RLIM_INFINITY))  # old code: bad_alloc, not OOM
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    try:
        Session(model, ScheduleConfig(backends=["numpy"], backup=None))
        outcome = "built"
    except NnrtError as e:
        outcome = type(e).__name__ + ": " + str(e)
    seconds = time.perf_counter() - t0
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    print(json.dumps({"outcome": outcome, "seconds": seconds, "grown_mb": grown}))
""")


def _build_in_child(tmp_path, model: bytes) -> dict:
    path = tmp_path / "m.onnx"
    path.write_bytes(model)
    out = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_declared_2_62_dim_is_refused_within_1_s_and_100_mb(tmp_path):
    r = _build_in_child(tmp_path, declared_bomb())
    assert r["outcome"].startswith("MemoryBudgetError") and "4611686018427387904" in r["outcome"], r
    assert r["seconds"] < 1.0 and r["grown_mb"] < 100, r


def test_length_computed_from_shape_builds_within_1_s_and_100_mb(tmp_path):
    r = _build_in_child(tmp_path, computed_bomb())
    assert r["outcome"] == "built", r
    assert r["seconds"] < 1.0 and r["grown_mb"] < 100, r


def test_blocker_names_the_value():
    proto = onnx.load_from_string(declared_bomb())
    plain = onnx.shape_inference.infer_shapes(proto, data_prop=False)
    assert data_prop_blocker(plain.graph) == f"value 'x' is rank 1 of length {2 ** 62} (over {DATA_PROP_MAX_DIM})"
    proto = onnx.load_from_string(computed_bomb())
    plain = onnx.shape_inference.infer_shapes(proto, data_prop=False)
    assert data_prop_blocker(plain.graph) == "value 'r' is rank 1 of unknown length"
    # still typed: inference without data propagation ran
    out = {vi.name: vi for vi in infer_shapes_bounded(proto).graph.value_info}
    assert out["s"].type.tensor_type.elem_type == T.INT64


def test_shape_chains_still_get_data_propagation():
    """Shape -> Gather -> Concat -> Reshape: the Reshape's output is static only with data propagation."""
    g = h.make_graph([h.make_node("Shape", ["x"], ["s"]),
                      h.make_node("Gather", ["s", "i0"], ["d0"], axis=0),
                      h.make_node("Concat", ["d0", "m1"], ["t"], axis=0),
                      h.make_node("Cast", ["x"], ["xc"], to=T.FLOAT),
                      h.make_node("Reshape", ["xc", "t"], ["y"])], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [2, 3, 4])], [h.make_tensor_value_info("y", T.FLOAT, ["a", "b"])],
                     [h.make_tensor("i0", T.INT64, [1], [0]), h.make_tensor("m1", T.INT64, [1], [-1])])
    model = load_onnx(h.make_model(g, opset_imports=[h.make_opsetid("", 18)]).SerializeToString())
    y = model.graph.outputs[0]
    assert tuple(y.type.shape) == (2, 12)
