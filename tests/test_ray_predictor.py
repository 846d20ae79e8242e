"""NnrtPredictor without a Ray cluster: columns to feeds, outputs to columns,
bad rows named by column and row id, fixed batch sizes, device resources."""
from __future__ import annotations

import numpy as np
import pytest

from nnrt_core import ScheduleConfig, Session
from nnrt_core.errors import InputError
from nnrt_ray import NnrtPredictor, device_resources
from ray_models import image_model, two_input_model

NUMPY = ScheduleConfig(backends=["numpy"])


def _batch(n, seed=0, start=0):
    x = np.random.RandomState(seed).rand(n, 3, 8, 8).astype(np.float32)
    return {"row_id": np.array([f"r{i}" for i in range(start, start + n)]), "x": x}


def test_outputs_come_back_as_columns_with_row_ids():
    sess = Session(image_model(), NUMPY)
    pred = NnrtPredictor(sess)
    batch = _batch(5)
    out = pred(batch)
    assert list(out) == ["row_id", "y"]
    assert list(out["row_id"]) == [f"r{i}" for i in range(5)]
    np.testing.assert_allclose(out["y"], sess.run({"x": batch["x"]})["y"], rtol=1e-6)


def test_a_session_file_loads_and_input_map_renames_columns(tmp_path):
    sess = Session(two_input_model(), NUMPY)
    path = sess.save(tmp_path / "m.nnrt")
    pred = NnrtPredictor(path.read_bytes(), input_map={"a": "features"}, passthrough=("label",))
    rs = np.random.RandomState(1)
    a, k = rs.rand(3, 4).astype(np.float32), rs.rand(3, 4).astype(np.float32)
    out = pred({"row_id": np.array(["a", "b", "c"]), "features": a, "k": k, "label": np.array([1, 2, 3])})
    assert list(out["label"]) == [1, 2, 3]
    np.testing.assert_allclose(out["s"], sess.run({"a": a, "k": k})["s"], rtol=1e-6)


def test_unknown_and_missing_columns_are_named():
    pred = NnrtPredictor(Session(two_input_model(), NUMPY))
    a = np.zeros((2, 4), np.float32)
    with pytest.raises(InputError, match=r"no column for model input\(s\): 'k'"):
        pred({"row_id": np.array(["0", "1"]), "a": a})
    with pytest.raises(InputError, match=r"column\(s\) \['extra'\] are no inputs of the model"):
        pred({"row_id": np.array(["0", "1"]), "a": a, "k": a, "extra": a})
    with pytest.raises(InputError, match="input_map names"):
        NnrtPredictor(Session(two_input_model(), NUMPY), input_map={"nope": "a"})


def test_bad_rows_fail_with_their_row_id_and_column():
    pred = NnrtPredictor(Session(image_model(), NUMPY))
    x = np.empty(3, dtype=object)
    x[0], x[1], x[2] = (np.zeros((3, 8, 8), np.float32), np.zeros((3, 7, 8), np.float32),
                        np.zeros((3, 8, 8), np.float64))
    with pytest.raises(InputError, match=r"row 'r1', column 'x': has row shape \(3, 7, 8\).*\(3, 8, 8\) float32"
                                         r".*1 more bad row"):
        pred({"row_id": np.array(["r0", "r1", "r2"]), "x": x})
    whole = {"row_id": np.array(["r0", "r1"]), "x": np.zeros((2, 3, 8, 8), np.float64)}
    with pytest.raises(InputError, match=r"row 'r0', column 'x': has dtype float64"):
        pred(whole)


def test_bad_rows_are_skipped_and_reported():
    sess = Session(image_model(), NUMPY)
    pred = NnrtPredictor(sess, on_error="skip")
    reported = []
    pred.error_sink = None
    pred._report = reported.extend  # noqa: SLF001 - capture what would go to the sink
    good = np.random.RandomState(0).rand(2, 3, 8, 8).astype(np.float32)
    x = np.empty(3, dtype=object)
    x[0], x[1], x[2] = good[0], np.zeros((8, 8), np.float32), good[1]
    out = pred({"row_id": np.array(["a", "b", "c"]), "x": x})
    assert list(out["row_id"]) == ["a", "c"]
    np.testing.assert_allclose(out["y"], sess.run({"x": good})["y"], rtol=1e-6)
    assert [(r.row_id, r.column) for r in reported] == [("b", "x")]
    assert "row shape (8, 8)" in reported[0].error
    empty = pred({"row_id": np.array(["d"]), "x": np.zeros((1, 2), np.float32)})
    assert len(empty["row_id"]) == 0 and empty["y"].shape == (0, 4)


def test_a_fixed_batch_model_runs_in_its_batch_size_and_pads_the_last_run():
    fixed, free = Session(image_model(batch=2), NUMPY), Session(image_model(), NUMPY)
    pred = NnrtPredictor(fixed)
    batch = _batch(5, seed=3)
    out = pred(batch)
    assert out["y"].shape == (5, 4)
    np.testing.assert_allclose(out["y"], free.run({"x": batch["x"]})["y"], rtol=1e-5, atol=1e-6)


def test_device_backends_become_ray_resources(light_dir):
    npu = Session(str(light_dir / "light_squeezenet.onnx"), ScheduleConfig(precision="fp16", backends=["npu_emu"], backup="numpy"))
    assert device_resources(npu) == {"npu_emu": 1.0}
    assert device_resources(Session(image_model(), ScheduleConfig(backends=["numpy"]))) == {}


def test_on_error_is_checked():
    with pytest.raises(InputError, match="on_error must be one of"):
        NnrtPredictor(Session(image_model(), NUMPY), on_error="ignore")


def test_warmup_runs_the_session_once_at_start():
    sess = Session(image_model(batch=2), NUMPY)
    calls = []
    real_run = sess.run
    sess.run = lambda feeds, *a, **k: (calls.append({n: v.shape for n, v in feeds.items()}), real_run(feeds))[1]
    NnrtPredictor(sess, warmup=True)
    assert calls == [{"x": (2, 3, 8, 8)}]
    NnrtPredictor(sess)
    assert len(calls) == 1
