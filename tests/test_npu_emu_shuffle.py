"""Rank > 4 data movement on the emulated NPU: reshapes are re-labelled
buffers (no instruction, any rank) and a transpose folds its axes (size-1
axes dropped, axes that stay adjacent merged), so ShuffleNet's channel
shuffle (Reshape to rank 5 -> Transpose -> Reshape back) runs on a rank-4
chip as one rank-3/4 permute, exactly."""
from __future__ import annotations

import itertools

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

pytest.importorskip("nnrt_npu_emu")

from nnrt_core.backend import CompileOptions  # noqa: E402
from nnrt_core.config import ScheduleConfig  # noqa: E402
from nnrt_core.frontends import load_onnx  # noqa: E402
from nnrt_core.registry import Registry  # noqa: E402
from nnrt_core.session import Session  # noqa: E402
from nnrt_npu_emu.ops.tensor import fold_transpose  # noqa: E402

from light_weights import he_initialized  # noqa: E402


@pytest.fixture(scope="module")
def backend():
    return Registry().backends["npu_emu"].backend


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and bool(
        ((a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))).all())


def _fp16_exact(shape, seed: int = 0) -> np.ndarray:
    """Random fp32 values that fp16 holds exactly (the chip's input cast keeps them)."""
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float16).astype(np.float32)


# ------------------------------------------------------------ fold_transpose
@pytest.mark.parametrize("shape,perm,want", [
    ((1, 3, 8, 7, 5), (0, 2, 1, 3, 4), ([3, 8, 35], [1, 0, 2])),  # channel shuffle, N = 1
    ((2, 4, 6, 7, 5), (0, 2, 1, 3, 4), ([2, 4, 6, 35], [0, 2, 1, 3])),  # channel shuffle, N = 2
    ((2, 3, 4), (0, 1, 2), ([24], [0])),  # identity: a copy
    ((1, 1, 1), (2, 0, 1), ([1], [0])),  # every axis of size 1
    ((2, 1, 3, 1, 4), (4, 3, 2, 1, 0), ([2, 3, 4], [2, 1, 0])),
    ((2, 3, 4, 5, 6, 7), (0, 1, 4, 5, 2, 3), ([6, 20, 42], [0, 2, 1])),  # rank 6 -> 3
])
def test_fold_transpose_examples(shape, perm, want):
    assert fold_transpose(shape, perm) == (want[0], want[1])


def test_fold_transpose_moves_the_same_elements():
    rng = np.random.default_rng(1)
    for rank in range(1, 7):
        for _ in range(40):
            shape = tuple(int(v) for v in rng.choice([1, 2, 3, 4], rank))
            perm = tuple(int(v) for v in rng.permutation(rank))
            x = rng.standard_normal(shape)
            fshape, fperm = fold_transpose(shape, perm)
            assert len(fperm) <= rank and sorted(fperm) == list(range(len(fperm)))
            assert int(np.prod(fshape)) == x.size
            got = np.transpose(x.reshape(fshape), fperm).reshape(-1)
            assert np.array_equal(got, np.transpose(x, perm).reshape(-1)), (shape, perm)


# ------------------------------------------------------ the shuffle on the chip
def _shuffle_model(n: int, c: int, hw: tuple[int, int], groups: int, conv: bool = True) -> onnx.ModelProto:
    """[conv ->] Reshape (N, g, C/g, H, W) -> Transpose (0, 2, 1, 3, 4) -> Reshape (N, C, H, W) [-> conv]."""
    H, W = hw
    rs = np.random.RandomState(groups * 7 + c)
    nodes, inits = [], [nh.from_array(np.array([n, groups, c // groups, H, W], np.int64), "s5"),
                        nh.from_array(np.array([n, c, H, W], np.int64), "s4")]
    src = "x"
    if conv:
        nodes.append(h.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1], group=c))  # depthwise
        inits.append(nh.from_array((rs.randn(c, 1, 3, 3) * 0.5).astype(np.float32), "w1"))
        src = "c1"
    nodes += [h.make_node("Reshape", [src, "s5"], ["r5"]),
              h.make_node("Transpose", ["r5"], ["t5"], perm=[0, 2, 1, 3, 4]),
              h.make_node("Reshape", ["t5", "s4"], ["y0" if conv else "y"])]
    if conv:
        nodes.append(h.make_node("Conv", ["y0", "w2"], ["y"], group=groups))
        inits.append(nh.from_array((rs.randn(c, c // groups, 1, 1) * 0.5).astype(np.float32), "w2"))
    g = h.make_graph(nodes, "shuffle", [h.make_tensor_value_info("x", T.FLOAT, [n, c, H, W])],
                     [h.make_tensor_value_info("y", T.FLOAT, [n, c, H, W])], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 13)], ir_version=8)


@pytest.mark.parametrize("n,c,hw,groups", [(1, 6, (5, 4), 2), (1, 12, (3, 3), 3), (2, 8, (4, 5), 4),
                                           (1, 24, (7, 1), 8), (3, 10, (2, 2), 5), (1, 9, (1, 1), 9)])
def test_channel_shuffle_runs_on_the_chip_bit_exact(n, c, hw, groups):
    m = _shuffle_model(n, c, hw, groups, conv=False)
    x = _fp16_exact((n, c) + hw, seed=c)
    npu = Session(m, ScheduleConfig(backends=["npu_emu"], backup="numpy", precision="fp16"))
    assert [p.backend for p in npu.partitions] == ["npu_emu"]
    kernels = [op["kernel"] for op in npu.partitions[0].details["per_op"]]
    assert kernels.count("transpose") == 1  # the reshapes are re-labelled buffers, no instructions
    ref = Session(m, ScheduleConfig(backends=["numpy"]))
    got, want = npu.run({"x": x})["y"], ref.run({"x": x})["y"]
    assert _same_bits(got, want)
    assert np.array_equal(want, x.reshape(n, groups, c // groups, *hw).swapaxes(1, 2).reshape(x.shape))


@pytest.mark.parametrize("n,c,hw,groups", [(1, 12, (6, 5), 3), (2, 8, (4, 4), 2)])
def test_shuffle_between_convs_is_one_partition_same_bits_as_on_the_host(tmp_path, n, c, hw, groups):
    """The same numbers as when the shuffle ran on the host (fp16 values move exactly either way)."""
    m = _shuffle_model(n, c, hw, groups)
    prof = tmp_path / "chips.toml"
    prof.write_text('[[chip]]\nname = "no-transpose"\ndtypes = ["fp16"]\nexclude_ops = ["Transpose"]\n')
    x = np.random.default_rng(2).standard_normal((n, c) + hw).astype(np.float32)
    on_chip = Session(m, ScheduleConfig(backends=["npu_emu"], backup="numpy", precision="fp16"))
    split = Session(m, ScheduleConfig(backends=["npu_emu"], backup="numpy", precision="fp16",
                                      devices={"npu_emu": "no-transpose"},
                                      backend_options={"npu_emu": {"profile_file": str(prof)}}))
    assert len(on_chip.partitions) == 1 and on_chip.partitions[0].backend == "npu_emu"
    assert [p.backend for p in split.partitions] == ["npu_emu", "numpy", "npu_emu"]
    assert _same_bits(on_chip.run({"x": x})["y"], split.run({"x": x})["y"])


def test_chip_rank_limit_applies_to_the_folded_permute(backend, tmp_path):
    prof = tmp_path / "chips.toml"
    prof.write_text('[[chip]]\nname = "rank2"\ndtypes = ["fp16"]\nmax_rank = 2\n')
    backend.add_profiles(prof)
    g = load_onnx(_shuffle_model(1, 12, (3, 3), 3, conv=False)).graph
    rej = backend.capability(g, CompileOptions(precision="fp16", device="rank2")).rejected
    t = next(nd.name for nd in g.nodes if nd.op_type == "Transpose")
    assert "rank-3 data movement after folding" in rej[t] and "rank <= 2" in rej[t]
    assert not any(nd.name in rej for nd in g.nodes if nd.op_type == "Reshape")  # no instruction, any rank
    # a rank-5 compute op is still refused by a rank-4 chip
    m = h.make_model(h.make_graph([h.make_node("Relu", ["x"], ["y"])], "r5",
                                  [h.make_tensor_value_info("x", T.FLOAT, [1, 2, 3, 4, 5])],
                                  [h.make_tensor_value_info("y", T.FLOAT, [1, 2, 3, 4, 5])]),
                     opset_imports=[h.make_opsetid("", 13)], ir_version=8)
    g = load_onnx(m).graph
    assert "rank 5" in backend.capability(g, CompileOptions(precision="fp16")).rejected[g.nodes[0].name]


def test_transpose_with_a_bad_perm_stays_on_the_host(backend):
    m = h.make_model(h.make_graph([h.make_node("Transpose", ["x"], ["y"], perm=[0, 0, 1])], "bad",
                                  [h.make_tensor_value_info("x", T.FLOAT, [2, 3, 4])],
                                  [h.make_tensor_value_info("y", T.FLOAT, None)]),
                     opset_imports=[h.make_opsetid("", 13)], ir_version=8)
    g = load_onnx(m, check=False).graph
    assert "not a permutation" in backend.capability(g, CompileOptions(precision="fp16")).rejected[g.nodes[0].name]


@pytest.mark.parametrize("name", ["shufflenet", "squeezenet"])
def test_light_model_is_one_npu_partition_and_matches_the_literal_executor(name):
    """The fast path (fp32 shadow, round_fp16 in pieces, separable max pooling...) gives the
    bits of the literal executor, which stores every fp16 value with numpy's cast."""
    path = onnx.__file__.replace("__init__.py", f"backend/test/data/light/light_{name}.onnx")
    m = he_initialized(onnx.load(path))
    s = Session(m, ScheduleConfig(backends=["npu_emu"], backup="numpy", precision="fp16"))
    assert [p.backend for p in s.partitions] == ["npu_emu"]
    assert not [p for p in s.placement_report if p.backend != "npu_emu"]
    inp = s.inputs[0]
    x = np.random.default_rng(0).random(tuple(inp.shape), dtype=np.float32)
    part = s.compiled_model.steps[0].compiled
    fast = s.run({inp.name: x})
    prof = part.last_profile  # the per-instruction table is built when read
    assert len(prof["per_op"]) == len(part.program.instrs)
    # every instruction has its host time, except the activations applied in the store before them
    idle = [r for r in prof["per_op"] if r["host_us"] == 0]
    assert part.bound.fused > 0 and len(idle) == part.bound.fused and {r["kernel"] for r in idle} == {"unary"}
    assert all(r["host_us"] > 0 for r in prof["per_op"] if r not in idle)
    assert prof["cycles"] == part.estimate["cycles"] and dict(prof)["host_seconds"] > 0
    slow = part.run_reference({inp.name: x})
    for name, v in slow.items():
        assert _same_bits(fast[name], v), name


def test_blob_of_the_previous_plugin_version_is_refused():
    """0.2.0 blobs held transposes with unfolded perms and no folded shape: refused, not misread."""
    from nnrt_npu_emu import blob as npu_blob
    from nnrt_npu_emu.blob import OfflineModelError

    sess = Session(_shuffle_model(1, 6, (2, 2), 2, conv=False), ScheduleConfig(precision="fp16", backends=["npu_emu"]))
    meta, program, weights = npu_blob.decode(sess.compiled_model.compiled[0].serialize())
    assert any(i.kernel == "transpose" and i.attrs["shape"] == [2, 3, 4] for i in program.instrs)
    old = npu_blob.encode(program, weights, {**meta, "producer": "nnrt-backend-npu-emu 0.2.0"})
    with pytest.raises(OfflineModelError, match="compiled by 'nnrt-backend-npu-emu 0.2.0'.*recompile it"):
        sess.compiled_model.steps[0].backend.load_compiled(old, sess.config.compile_options("npu_emu"))


@pytest.mark.parametrize("n,c,hw,groups", [(1, 12, (6, 5), 3), (2, 8, (4, 4), 4)])
def test_quantized_channel_shuffle_runs_in_int8_on_the_chip(n, c, hw, groups):
    """DQ -> Reshape (rank 5) -> Q, DQ -> Transpose -> Q, ... as the quantizer writes them: one int8 partition."""
    from nnrt_core.quantization import quantize

    m = _shuffle_model(n, c, hw, groups)
    rng = np.random.default_rng(3)
    qdq = quantize(m, {"x": rng.standard_normal((4, c) + hw).astype(np.float32)}, progress=False).proto
    assert sum(nd.op_type == "QuantizeLinear" for nd in qdq.graph.node) >= 3
    npu = Session(qdq, ScheduleConfig(backends=["npu_emu"], backup="numpy", precision="int8"))
    assert [p.backend for p in npu.partitions] == ["npu_emu"]
    kernels = [op["kernel"] for op in npu.partitions[0].details["per_op"]]
    assert kernels.count("qconv") == 2 and "transpose" not in kernels  # the permute moves int8 values
    x = rng.standard_normal((n, c) + hw).astype(np.float32)
    got = npu.run({"x": x})["y"]
    want = Session(qdq, ScheduleConfig(backends=["numpy"])).run({"x": x})["y"]
    scale = float(np.abs(want).max())
    assert np.abs(got - want).max() <= 0.02 * scale  # int8 rounding of the convolutions only


def test_large_stores_are_rounded_in_pieces_with_the_same_bits():
    from nnrt_npu_emu.binding import SPLIT_ROUND, round_store
    from nnrt_npu_emu.numerics import round_fp16
    from nnrt_numpy import parallel

    rng = np.random.default_rng(5)
    for n in (SPLIT_ROUND - 1, SPLIT_ROUND, 3 * SPLIT_ROUND + 17):
        x = (rng.standard_normal(n) * 10.0 ** rng.integers(-9, 7, n)).astype(np.float32).reshape(-1, 1)
        want = round_fp16(x.copy())
        prev = parallel.set_threads(2)
        try:
            got = x.copy()
            round_store(got, np.empty(n, np.uint32))
        finally:
            parallel.set_threads(*prev)
        assert _same_bits(got, want)
