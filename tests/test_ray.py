"""nnrt on Ray, on one shared local Ray instance (2 CPUs, 2 emulated NPU
units): map_batches with shipped sessions, heterogeneous configs, a worker
killed mid-dataset, and ``nnrt batch`` end to end."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import ray
import ray.cloudpickle

from nnrt_core import ScheduleConfig, Session
from nnrt_core.errors import CompileError, ConfigError
from nnrt_core.tools.cli import main
from nnrt_ray import NnrtPredictor, map_dataset, ship
from nnrt_ray.cluster import connect
from ray.data.extensions import ArrowTensorArray
from ray_models import image_model, onnx_bytes

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the test's predictor subclass goes by value

NUMPY = ScheduleConfig(backends=["numpy"], num_threads=1)


@pytest.fixture(scope="module", autouse=True)
def ray_instance():
    ray.init(num_cpus=2, resources={"npu_emu": 2}, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield
    ray.shutdown()


def _rows(n, seed=0):
    return np.random.RandomState(seed).rand(n, 3, 8, 8).astype(np.float32)


def _dataset(x):
    return ray.data.from_items([{"row_id": f"r{i}", "x": x[i]} for i in range(len(x))], override_num_blocks=4)


def _collect(ds):
    rows = ds.take_all()
    return [r["row_id"] for r in rows], {r["row_id"]: r for r in rows}


def test_map_batches_loads_the_shipped_file_warm():
    x = _rows(24)
    shipped = ship(image_model(), NUMPY)
    assert shipped.mode == "file" and shipped.file_bytes > 0 and shipped.resources == {}
    ids, rows = _collect(map_dataset(_dataset(x), shipped, workers=2, batch_size=5))
    assert sorted(ids) == sorted(f"r{i}" for i in range(24))
    want = Session(image_model(), NUMPY).run({"x": x})["y"]
    got = np.stack([rows[f"r{i}"]["y"] for i in range(24)])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_heterogeneous_config_passes_through_and_asks_for_the_device(light_dir):
    # the light model's last convolutions exceed fp16, and a shipped compiled file cannot fall back: keep them
    cfg = ScheduleConfig(precision="fp16", backends=["npu_emu"], backup="numpy", on_overflow="warn")
    model = str(light_dir / "light_squeezenet.onnx")
    shipped = ship(model, cfg)
    assert shipped.mode == "file" and shipped.resources == {"npu_emu": 1.0}
    x = np.random.RandomState(0).rand(3, 3, 224, 224).astype(np.float32)
    ds = ray.data.from_items([{"row_id": f"r{i}", "data_0": x[i]} for i in range(3)])
    ids, rows = _collect(map_dataset(ds, shipped, workers=1, batch_size=2))
    local = Session(model, cfg)
    assert {p.backend for p in local.partitions} >= {"npu_emu"}
    for i in range(3):
        want = local.run({"data_0": x[i:i + 1]})["softmaxout_1"][0]
        np.testing.assert_allclose(rows[f"r{i}"]["softmaxout_1"], want, rtol=1e-6, atol=1e-7)


ORT = ScheduleConfig(backends=["onnxruntime"], backup="numpy", num_threads=1)


def test_ship_sends_onnxruntimes_optimized_graph_and_loads_it_warm(light_dir):
    model = str(light_dir / "light_squeezenet.onnx")
    shipped = ship(model, ORT)
    assert shipped.mode == "file" and shipped.fallback is not None and shipped.config.cache_dir is None
    pred = NnrtPredictor(shipped)
    assert pred.loaded_as == "file"
    [step] = pred.session.executor.steps
    assert step.compiled.describe()["stored_form"] == "optimized"  # ORT's own graph: its optimizers stay off
    x = np.random.RandomState(0).rand(1, 3, 224, 224).astype(np.float32)
    np.testing.assert_allclose(pred.session.run({"data_0": x})["softmaxout_1"],
                               Session(model, ORT).run({"data_0": x})["softmaxout_1"], rtol=1e-5, atol=1e-6)


def test_a_worker_that_refuses_the_compiled_file_builds_from_the_model(light_dir, monkeypatch):
    import nnrt_onnxruntime.backend as ort_backend

    model = str(light_dir / "light_squeezenet.onnx")
    shipped = ship(model, ORT)
    other = {"onnxruntime": "0.0", "arch": "elsewhere", "features": []}
    monkeypatch.setattr(ort_backend, "machine_fingerprint", lambda: other)  # another CPU than the driver's
    pred = NnrtPredictor(shipped)
    assert pred.loaded_as.startswith("model (file refused: ") and "optimized for another machine" in pred.loaded_as
    x = np.random.RandomState(1).rand(1, 3, 224, 224).astype(np.float32)
    np.testing.assert_allclose(pred.session.run({"data_0": x})["softmaxout_1"],
                               Session(model, ORT).run({"data_0": x})["softmaxout_1"], rtol=1e-5, atol=1e-6)
    shipped.fallback = None  # nothing to build from: the refusal is the error
    with pytest.raises(CompileError, match="optimized for another machine"):
        NnrtPredictor(shipped)


class DiesOnce(NnrtPredictor):
    """Exits its process on its second batch, once per test (a marker file remembers)."""

    def __init__(self, session, marker, **kw):
        super().__init__(session, **kw)
        self.marker, self.calls = marker, 0

    def __call__(self, batch):
        self.calls += 1
        if self.calls == 2 and not os.path.exists(self.marker):
            Path(self.marker).write_text(str(os.getpid()))
            os._exit(1)  # the worker dies mid-dataset, its batch unfinished
        return super().__call__(batch)


def test_a_worker_killed_mid_dataset_loses_no_row_and_duplicates_none(tmp_path):
    x = _rows(40, seed=2)
    shipped = ship(image_model(), NUMPY)
    marker = tmp_path / "died"
    ds = _dataset(x).map_batches(
        DiesOnce, fn_constructor_kwargs={"session": shipped, "marker": str(marker)}, batch_size=4,
        compute=ray.data.ActorPoolStrategy(size=2), num_cpus=1, max_restarts=3, max_task_retries=3)
    ids, rows = _collect(ds)
    assert marker.exists()  # a worker did die
    assert sorted(ids) == sorted(f"r{i}" for i in range(40)) and len(ids) == 40
    want = Session(image_model(), NUMPY).run({"x": x})["y"]
    np.testing.assert_allclose(np.stack([rows[f"r{i}"]["y"] for i in range(40)]), want, rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------- nnrt batch
@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "img.onnx"
    path.write_bytes(onnx_bytes(image_model()))
    return path


def _npz_rows(out):
    parts = [np.load(f) for f in sorted(Path(out).glob("part-*.npz"))]
    ids = np.concatenate([p["row_id"] for p in parts])
    return list(ids), dict(zip(ids, np.concatenate([p["y"] for p in parts])))


def test_nnrt_batch_npy_folder_to_npz(tmp_path, model_file, capsys):
    data = tmp_path / "in"
    data.mkdir()
    a, b = _rows(7, 1), _rows(5, 2)
    np.save(data / "a.npy", a)
    np.savez(data / "b.npz", x=b)
    out = tmp_path / "out"
    rc = main(["batch", str(model_file), "--input", str(data), "--output", str(out), "--workers", "2",
               "--batch-size", "3", "--format", "npz", "--backends", "numpy", "--json"])
    assert rc == 0
    report = json.loads(capsys.readouterr().out)
    assert report["rows"] == 12 and report["shipped"] == "file" and report["bad_rows"] == []
    ids, rows = _npz_rows(out)
    assert sorted(ids) == sorted([f"a.npy#{i}" for i in range(7)] + [f"b.npz#{i}" for i in range(5)])
    sess = Session(image_model(), NUMPY)
    np.testing.assert_allclose(rows["a.npy#6"], sess.run({"x": a[6:7]})["y"][0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rows["b.npz#0"], sess.run({"x": b[0:1]})["y"][0], rtol=1e-5, atol=1e-6)
    assert json.loads((out / "_summary.json").read_text())["rows"] == 12


def test_nnrt_batch_bad_rows_skip_or_fail(tmp_path, model_file, capsys):
    data = tmp_path / "in"
    data.mkdir()
    np.savez(data / "good.npz", x=_rows(4))
    np.savez(data / "bad.npz", x=np.zeros((2, 3, 4, 4), np.float32))
    out = tmp_path / "out"
    args = ["batch", str(model_file), "--input", str(data), "--workers", "1", "--format", "npz", "--backends",
            "numpy"]
    assert main([*args, "--output", str(out), "--on-error", "skip"]) == 0
    err = capsys.readouterr().err
    assert "2 bad row(s) skipped" in err and "row 'bad.npz#0', column 'x'" in err
    ids, _ = _npz_rows(out)
    assert sorted(ids) == [f"good.npz#{i}" for i in range(4)]
    bad = [json.loads(line) for line in (out / "_errors.jsonl").read_text().splitlines()]
    assert sorted(r["row_id"] for r in bad) == ["bad.npz#0", "bad.npz#1"]
    assert all("row shape (3, 4, 4)" in r["error"] and r["column"] == "x" for r in bad)
    assert main([*args, "--output", str(tmp_path / "out2"), "--on-error", "fail"]) == 2
    err = capsys.readouterr().err
    assert "nnrt: error: row 'bad.npz#" in err and "column 'x'" in err and "(3, 8, 8) float32" in err


def test_nnrt_batch_skip_lists_wrong_dtype_files_and_flags_nonfinite_rows(tmp_path, model_file, capsys):
    """Issue #35: one float64 .npy among float32 ones made Ray Data fail to unify its blocks (rc 1,
    ArrowTypeError, 0-8 good rows written, no list); NaN rows passed unflagged."""
    data = tmp_path / "in"
    data.mkdir()
    good, nan = _rows(6, 1), _rows(4, 2)
    nan[1, 0, 0, 0] = np.nan
    nan[3, 2, 7, 7] = np.inf
    np.save(data / "a_good.npy", good)
    np.save(data / "b_f64.npy", _rows(3, 3).astype(np.float64))
    np.savez(data / "c_i64.npz", x=np.ones((2, 3, 8, 8), np.int64))
    np.save(data / "d_nan.npy", nan)
    out = tmp_path / "out"
    rc = main(["batch", str(model_file), "--input", str(data), "--output", str(out), "--workers", "1",
               "--batch-size", "8", "--format", "npz", "--backends", "numpy", "--on-error", "skip"])
    err = capsys.readouterr().err
    assert rc == 0, err
    parts = [np.load(f) for f in sorted(out.glob("part-*.npz"))]
    ids = list(np.concatenate([p["row_id"] for p in parts]))
    assert sorted(ids) == sorted([f"a_good.npy#{i}" for i in range(6)] + [f"d_nan.npy#{i}" for i in range(4)])
    flags = dict(zip(ids, np.concatenate([p["_nonfinite"] for p in parts])))
    assert sorted(i for i, f in flags.items() if f) == ["d_nan.npy#1", "d_nan.npy#3"]
    bad = {r["row_id"]: r for r in map(json.loads, (out / "_errors.jsonl").read_text().splitlines())}
    assert sorted(bad) == ["b_f64.npy#0", "b_f64.npy#1", "b_f64.npy#2", "c_i64.npz#0", "c_i64.npz#1"]
    assert "has dtype float64" in bad["b_f64.npy#0"]["error"] and bad["b_f64.npy#0"]["column"] == "x"
    assert "has dtype int64" in bad["c_i64.npz#1"]["error"] and "float32" in bad["c_i64.npz#1"]["error"]
    assert "5 bad row(s) skipped" in err and "2 row(s) gave NaN or infinite outputs" in err
    assert [json.loads(x)["row_id"] for x in (out / "_nonfinite.jsonl").read_text().splitlines()] == \
        ["d_nan.npy#1", "d_nan.npy#3"]
    summary = json.loads((out / "_summary.json").read_text())
    assert summary["rows"] == 10 and summary["bad_rows"] == 5 and summary["nonfinite_rows"] == 2
    # fail mode: the first file that does not fit, named, before the job starts
    rc = main(["batch", str(model_file), "--input", str(data), "--output", str(tmp_path / "o2"), "--workers", "1",
               "--format", "npz", "--backends", "numpy"])
    assert rc == 2 and "row 'b_f64.npy#0', column 'x': has dtype float64" in capsys.readouterr().err


def _parquet_rows(out):
    table = pq.read_table(str(out))
    return dict(zip(table["row_id"].to_pylist(), table["y"].combine_chunks().to_numpy()))


def test_nnrt_batch_images_and_parquet(tmp_path, model_file, capsys):
    from PIL import Image

    imgs = tmp_path / "imgs"
    imgs.mkdir()
    rs = np.random.RandomState(0)
    pixels = {}
    for name in ("cat.png", "dog.png", "sub/owl.png"):
        (imgs / name).parent.mkdir(exist_ok=True)
        pixels[name] = rs.randint(0, 256, (8, 8, 3)).astype(np.uint8)
        Image.fromarray(pixels[name]).save(imgs / name)
    out = tmp_path / "out"
    assert main(["batch", str(model_file), "--input", str(imgs), "--output", str(out), "--workers", "1",
                 "--backends", "numpy"]) == 0
    got = _parquet_rows(out)
    assert sorted(got) == ["cat.png", "dog.png", "sub/owl.png"]
    x = (pixels["sub/owl.png"].astype(np.float32) / 255).transpose(2, 0, 1)[None]
    np.testing.assert_allclose(got["sub/owl.png"], Session(image_model(), NUMPY).run({"x": x})["y"][0],
                               rtol=1e-5, atol=1e-6)
    table = tmp_path / "table"
    x = _rows(6, 3)
    table.mkdir()
    pq.write_table(pa.table({"key": [f"k{i}" for i in range(6)], "x": ArrowTensorArray.from_numpy(x)}),
                   table / "part.parquet")
    out2 = tmp_path / "out2"
    assert main(["batch", str(model_file), "--input", str(table), "--output", str(out2), "--id-column", "key",
                 "--workers", "1", "--backends", "numpy"]) == 0
    got = _parquet_rows(out2)
    assert sorted(got) == [f"k{i}" for i in range(6)]
    np.testing.assert_allclose(got["k5"], Session(image_model(), NUMPY).run({"x": x[5:6]})["y"][0],
                               rtol=1e-5, atol=1e-6)
    assert main(["batch", str(model_file), "--input", str(table), "--output", str(tmp_path / "o3")]) == 2
    assert "no row id column 'row_id'" in capsys.readouterr().err


def test_nnrt_batch_errors_are_clear(tmp_path, model_file, capsys, monkeypatch):
    data = tmp_path / "a.npy"
    np.save(data, _rows(2))
    t0 = time.perf_counter()
    assert main(["batch", str(model_file), "--input", str(data), "--output", str(tmp_path / "o"),
                 "--address", "127.0.0.1:9"]) == 2
    assert time.perf_counter() - t0 < 15
    assert "cannot reach a Ray cluster at '127.0.0.1:9'" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="not HOST:PORT"):
        connect("nowhere")
    np.savez(tmp_path / "wrong.npz", y=_rows(2))
    assert main(["batch", str(model_file), "--input", str(tmp_path / "wrong.npz"), "--output",
                 str(tmp_path / "o2")]) == 2
    assert "no column for model input(s): 'x'" in capsys.readouterr().err
    from importlib import metadata  # what nnrt_core.tools.batch_cli reads the entry points with

    monkeypatch.setattr(metadata, "entry_points", lambda group: [])
    assert main(["batch", str(model_file), "--input", str(data), "--output", str(tmp_path / "o3")]) == 2
    assert "install ./plugins/ray" in capsys.readouterr().err


def test_missing_device_resources_fail_before_the_job():
    from nnrt_ray.cluster import check_resources, local_device_resources

    check_resources({"npu_emu": 1.0}, 2)  # the module's instance offers 2 units
    with pytest.raises(ConfigError, match=r"3 worker\(s\) need device resources.*'npu_emu': 3 needed, the "
                                          r"cluster has 2"):
        check_resources({"npu_emu": 1.0}, 3)
    assert local_device_resources().get("npu_emu", 0) >= 1  # what a local instance offers


def test_nnrt_batch_with_an_npu_config_falls_back_on_overflow(tmp_path, light_dir, capsys):
    """The light SqueezeNet's last convolutions overflow fp16 on random inputs: the shipped compiled
    file falls back to its stored numpy copy of the partition, and the job completes."""
    model = str(light_dir / "light_squeezenet.onnx")
    data = tmp_path / "in"
    data.mkdir()
    x = np.random.RandomState(0).rand(2, 3, 224, 224).astype(np.float32)
    np.save(data / "a.npy", x)
    out = tmp_path / "out"
    rc = main(["batch", model, "--input", str(data), "--output", str(out), "--workers", "1", "--batch-size", "2",
               "--format", "npz", "--backends", "npu_emu", "--backup", "numpy", "--precision", "fp16", "--json"])
    assert rc == 0
    report = json.loads(capsys.readouterr().out)
    assert report["rows"] == 2 and report["shipped"] == "file" and report["bad_rows"] == []
    parts = [np.load(f) for f in sorted(out.glob("part-*.npz"))]
    rows = dict(zip(np.concatenate([p["row_id"] for p in parts]), np.concatenate([p["softmaxout_1"] for p in parts])))
    ref = Session(model, ScheduleConfig(backends=["numpy"]))
    for i in range(2):
        np.testing.assert_allclose(rows[f"a.npy#{i}"], ref.run({"data_0": x[i:i + 1]})["softmaxout_1"][0],
                                   rtol=1e-5, atol=1e-6)
