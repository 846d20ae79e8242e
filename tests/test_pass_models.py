"""Every optimization level computes what level ``none`` computes, on the
onnx `light` models run by the NumPy backend.

The light models build all their weights with ``ConstantOfShape(0.02)``, so
their outputs are nearly uniform and would hide a wrong fold.  The weights are
therefore first materialized (constant folding) and replaced by random
values of a sensible scale (He-initialised conv/gemm weights, BN statistics
around 1), the same random model being given to every level.
"""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest

from nnrt_core import ScheduleConfig, Session
from nnrt_core.frontends import load_onnx
from nnrt_core.ir import Model
from nnrt_core.passes import PassContext, PassManager, fold_constants
from nnrt_core.registry import default_registry

# A representative subset keeps the test quick: Conv+BN (resnet50), Conv+BN+Mul+Add
# (inception_v2), grouped convs and channel shuffles (shufflenet), Conv+Relu
# stacks (squeezenet).  The other models repeat those patterns with more
# weights; tests/test_passes.py checks standalone BN+Mul+Add (densenet121's
# pattern) and FusedGemm (alexnet, vgg19, zfnet512) on small graphs.
RANDOMIZED = ["inception_v2", "resnet50", "shufflenet", "squeezenet"]
ALL_LIGHT = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
             "shufflenet", "squeezenet", "vgg19", "zfnet512"]

#: node counts after each level (before -> basic, all); documented in docs/passes.md
EXPECTED_NODES = {
    "bvlc_alexnet": (40, 22, 15), "densenet121": (1746, 367, 308), "inception_v1": (237, 142, 85),
    "inception_v2": (916, 164, 95), "resnet50": (415, 123, 90), "shufflenet": (446, 154, 137),
    "squeezenet": (105, 65, 39), "vgg19": (82, 44, 26), "zfnet512": (38, 22, 15),
}


def _randomize(model: Model, seed: int) -> Model:
    """Fold the weight-building nodes, then give every float weight random data."""
    g = model.graph
    g.topological_sort()
    fold_constants(g, default_registry().backend("numpy").backend)
    rng = np.random.default_rng(seed)
    done: set[int] = set()
    for node in g.nodes:
        for slot, v in enumerate(node.inputs):
            if v is None or v.const is None or v.producer is not None or id(v) in done:
                continue
            a = v.const
            if a.dtype.kind != "f" or a.size <= 1:
                continue
            done.add(id(v))
            op = node.op_type
            if op in ("Conv", "Gemm") and slot == 1:
                fan_in = a[0].size if op == "Conv" else (a.shape[0] if not node.attr("transB", 0) else a.shape[1])
                new = rng.standard_normal(a.shape) * np.sqrt(2.0 / max(fan_in, 1))
            elif op == "BatchNormalization" and slot in (1, 4):
                new = rng.uniform(0.5, 1.5, a.shape)
            elif op == "Mul":
                new = rng.uniform(0.5, 1.5, a.shape)
            else:
                new = rng.normal(0.0, 0.1, a.shape)
            v.const = new.astype(a.dtype)
    return model


@functools.lru_cache(maxsize=2)
def _random_model(path: str) -> Model:
    return _randomize(load_onnx(path), seed=0)


def _feeds(sess: Session) -> dict[str, np.ndarray]:
    inp = sess.inputs[0]
    return {inp.name: np.random.default_rng(1).standard_normal(tuple(inp.shape)).astype(np.float32)}


def _outputs(model, level: str) -> tuple[Session, list[np.ndarray]]:
    sess = Session(model, ScheduleConfig(backends=["numpy"], optimization_level=level))
    return sess, list(sess.run(_feeds(sess)).values())


@pytest.mark.parametrize("name", RANDOMIZED)
def test_levels_match_level_none_on_random_weights(light_dir: Path, name: str):
    model = _random_model(str(light_dir / f"light_{name}.onnx"))
    _, ref = _outputs(model, "none")
    levels = ["basic", "all"] + (["extended"] if name == "shufflenet" else [])
    for level in levels:
        sess, got = _outputs(model, level)
        for r, y in zip(ref, got):
            assert y.shape == r.shape and y.dtype == r.dtype
            np.testing.assert_allclose(y, r, rtol=1e-4, atol=1e-4 * float(np.max(np.abs(r))),
                                       err_msg=f"{name} at level {level}")
        if level == "all":
            assert sess.pass_report.nodes_after < sess.pass_report.nodes_before


@pytest.mark.parametrize("name", ALL_LIGHT)
def test_node_counts_per_level(light_dir: Path, name: str):
    """The models as shipped: what basic, then all, leave of them."""
    before, basic, full = EXPECTED_NODES[name]
    g = load_onnx(light_dir / f"light_{name}.onnx").graph
    g.topological_sort()
    ctx = PassContext(evaluator=default_registry().backend("numpy").backend)
    report = PassManager("basic", validate=True).run(g, ctx)
    assert (report.nodes_before, report.nodes_after) == (before, basic)
    report = PassManager("all", validate=True).run(g, ctx)
    assert report.nodes_after == full
    assert report.iterations <= 2  # one productive sweep, one that finds nothing left
