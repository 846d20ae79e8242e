"""The lifetime-based memory planner and the figures Session.stats() reports."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from nnrt_core import InputError, ScheduleConfig, Session
from nnrt_core.runtime.memory_plan import Buffer, align, lower_bound, plan_offsets


def _overlap(a: Buffer, b: Buffer) -> bool:
    return a.first <= b.last and b.first <= a.last


@pytest.mark.parametrize("seed", range(5))
def test_plan_never_shares_bytes_between_live_buffers(seed):
    rng = np.random.default_rng(seed)
    bufs = []
    for k in range(60):
        first = int(rng.integers(0, 40))
        bufs.append(Buffer(k, int(rng.integers(1, 5000)), first, first + int(rng.integers(0, 8))))
    size = plan_offsets(bufs)
    for i, a in enumerate(bufs):
        assert a.offset >= 0 and a.offset % 64 == 0 and a.offset + a.size <= size
        for b in bufs[i + 1:]:
            if _overlap(a, b):
                assert a.offset + align(a.size) <= b.offset or b.offset + align(b.size) <= a.offset
    assert lower_bound(bufs) <= size <= sum(align(b.size) for b in bufs)


def test_chain_reuses_memory():
    bufs = [Buffer(i, 1024, i, i + 1) for i in range(10)]  # each read by the next step only
    assert plan_offsets(bufs) == 2 * 1024 == lower_bound(bufs)


def test_resnet50_plan_is_within_10_percent_of_the_lower_bound(light_dir):
    mib = 2 ** 20
    for level in ("none", "basic"):  # without folding the generated weights count as intermediates
        st = Session(light_dir / "light_resnet50.onnx",
                     ScheduleConfig(backends=["numpy"], optimization_level=level)).stats()
        assert st["lower_bound_bytes"] <= st["planned_peak_bytes"] <= 1.1 * st["lower_bound_bytes"]
        assert st["naive_bytes"] > 2 * st["planned_peak_bytes"]
    assert st["naive_bytes"] > 80 * mib
    assert 8 * mib < st["lower_bound_bytes"] < 11 * mib  # default level: ~9 MiB of 100+ MiB naive


def _dynamic_model() -> bytes:
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Sigmoid", ["a"], ["b"]),
         helper.make_node("Add", ["b", "a"], ["c"]), helper.make_node("Neg", ["c"], ["y"])], "dyn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 16])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def test_dynamic_shapes_plan_per_shape():
    sess = Session(_dynamic_model(), ScheduleConfig(backends=["numpy"]))
    assert sess.stats()["planned_peak_bytes"] is None  # unknown until shapes are given
    p4 = sess.memory_plan({"x": (4, 16)})
    assert p4.lower_bound_bytes == 3 * 4 * 16 * 4  # a, b (read) and c (written) at the Add
    assert sess.stats()["planned_peak_bytes"] == p4.planned_peak_bytes
    p8 = sess.memory_plan({"x": (8, 16)})
    assert p8.planned_peak_bytes == 2 * p4.planned_peak_bytes
    assert sess.memory_plan({"x": (4, 16)}) is p4  # cached per shape
    with pytest.raises(InputError, match="unknown input"):
        sess.memory_plan({"z": (1, 16)})
    with pytest.raises(InputError, match="rank"):
        sess.memory_plan({"x": (4,)})


def test_saved_session_keeps_its_plan_figures(tmp_path, light_dir):
    sess = Session(light_dir / "light_squeezenet.onnx", ScheduleConfig(backends=["numpy"]))
    loaded = Session(sess.save(tmp_path / "s.nnrt"))
    for k in ("planned_peak_bytes", "naive_bytes", "lower_bound_bytes"):
        assert loaded.stats()[k] == sess.stats()[k]


def test_live_peak_bytes_is_the_lower_bound_of_the_graphs_buffers(light_dir):
    """The one-walk ``live_peak_bytes`` (warm-up of every NumPy partition) equals ``lower_bound``
    of the graph's planned buffers, on real graphs (optimized and not) and one with symbolic sizes."""
    from nnrt_core.frontends import load_onnx
    from nnrt_core.runtime.memory_plan import _buffers, live_peak_bytes

    graphs = [load_onnx(_dynamic_model()).graph]
    for name in ("light_resnet50.onnx", "light_squeezenet.onnx", "light_inception_v1.onnx"):
        if (light_dir / name).is_file():
            for level in ("none", "basic"):
                graphs.append(Session(light_dir / name, ScheduleConfig(backends=["numpy"], optimization_level=level))
                              .graph)
    assert len(graphs) >= 3
    for g in graphs:
        assert live_peak_bytes(g) == lower_bound(_buffers(g, {})[0])
    assert live_peak_bytes(graphs[0]) == 0 and live_peak_bytes(graphs[1]) > 0


def _reference_plan(buffers: list[Buffer]) -> tuple[int, dict]:
    """The planner as first written (live buffers re-sorted by offset for every buffer placed)."""
    placed: list[Buffer] = []
    total = 0
    for b in sorted(buffers, key=lambda b: (-b.size, b.first, str(b.key))):
        live = sorted((p for p in placed if p.first <= b.last and b.first <= p.last), key=lambda p: p.offset)
        off, best = 0, None
        for p in live:
            gap = p.offset - off
            if gap >= b.size and (best is None or gap < best[1]):
                best = (off, gap)
            off = max(off, p.offset + align(p.size))
        b.offset = best[0] if best is not None else off
        placed.append(b)
        total = max(total, b.offset + align(b.size))
    return total, {b.key: b.offset for b in buffers}


@pytest.mark.parametrize("seed", range(40))
def test_plan_offsets_and_lower_bound_give_the_reference_figures(seed):
    """Offsets kept sorted as they are placed: the same arena, offsets and lower bound as the
    reference planner, with ties of size, start and offset (sizes from a few values, 0 included)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 120))
    spec = []
    for i in range(n):
        first = int(rng.integers(0, 60))
        spec.append((f"v{i}", int(rng.choice([0, 1, 64, 100, 1000, 4096, int(rng.integers(1, 1 << 20))])), first,
                     first + int(rng.integers(0, 12))))
    want_total, want = _reference_plan([Buffer(*s) for s in spec])
    bufs = [Buffer(*s) for s in spec]
    assert plan_offsets(bufs) == want_total and {b.key: b.offset for b in bufs} == want
    delta = np.zeros(max(s[3] for s in spec) + 2, np.int64)
    for _, size, first, last in spec:
        delta[first] += align(size)
        delta[last + 1] -= align(size)
    assert lower_bound(bufs) == int(np.cumsum(delta).max())
