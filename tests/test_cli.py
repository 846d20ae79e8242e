"""The nnrt command line."""
from __future__ import annotations

import json

import numpy as np
import pytest

from nnrt_core.tools.cli import main


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_devices_json_lists_installed_backends(capsys):
    from importlib import metadata

    code, out, _ = run_cli(capsys, "devices", "--json")
    assert code == 0
    data = json.loads(out)
    names = {b["name"] for b in data["backends"]}
    installed = {ep.name for ep in metadata.entry_points(group="nnrt.backends")}
    assert "numpy" in names and installed <= names | {p["name"] for p in data["plugins"]}
    numpy_rec = next(b for b in data["backends"] if b["name"] == "numpy")
    assert numpy_rec["available"] and numpy_rec["devices"][0]["type"] == "cpu"
    assert "priority" in {s["name"] for s in data["schedulers"]}


def test_devices_table(capsys):
    code, out, _ = run_cli(capsys, "devices")
    assert code == 0 and "numpy" in out and "schedulers:" in out


def test_run_json_on_real_model(capsys, light_dir, tmp_path):
    code, out, _ = run_cli(capsys, "run", str(light_dir / "light_squeezenet.onnx"), "--backends", "numpy",
                           "--json", "--save", str(tmp_path))
    assert code == 0
    data = json.loads(out)
    (name, summary), = data["outputs"].items()
    assert summary["shape"] == [1, 1000, 1, 1]
    saved = np.load(tmp_path / f"{name}.npy")
    assert saved.shape == (1, 1000, 1, 1) and abs(float(saved.sum()) - 1.0) < 1e-3  # softmax
    assert data["placement"] == {"numpy": 65}  # 105 nodes, 39 ConstantOfShape folded, 1 Dropout removed


def test_run_with_npy_input_and_pins(capsys, tmp_path):
    from onnx import TensorProto, helper, save

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "m",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    path = tmp_path / "m.onnx"
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    np.save(tmp_path / "x.npy", np.array([-1, 2, -3], np.float32))
    code, out, _ = run_cli(capsys, "run", str(path), "--input", f"x={tmp_path / 'x.npy'}",
                           "--pin", "r=numpy", "--json")
    assert code == 0
    assert json.loads(out)["outputs"]["y"]["max"] == 2.0


def test_partition_json_and_table(capsys, light_dir):
    model = str(light_dir / "light_resnet50.onnx")
    code, out, _ = run_cli(capsys, "partition", model, "--backends", "numpy", "--json")
    assert code == 0
    data = json.loads(out)
    assert len(data["placement"]) == 123 and data["partitions"][0]["backend"] == "numpy"  # 415 - 239 folded - 53 BN
    assert data["partitions"][0]["op_counts"]["Conv"] == 53
    code, out, _ = run_cli(capsys, "partition", model, "--backends", "numpy")
    assert code == 0 and "Conv" in out


@pytest.mark.parametrize("argv,match", [
    (["run", "missing.onnx"], "does not exist"),
    (["partition", "x.onnx", "--backends", "tpu"], "unknown backend 'tpu'|does not exist"),
    (["run", "m.onnx", "--pin", "bad"], "NODE=BACKEND|does not exist"),
])
def test_errors_are_one_line_and_exit_2(capsys, argv, match):
    import re

    code, _, err = run_cli(capsys, *argv)
    assert code == 2 and re.search(match, err) and err.startswith("nnrt: error:")


def test_unknown_backend_error_lists_installed(capsys, light_dir):
    code, _, err = run_cli(capsys, "partition", str(light_dir / "light_squeezenet.onnx"), "--backends", "tpu")
    assert code == 2 and "installed backends:" in err and "numpy" in err


def test_config_file(capsys, light_dir, tmp_path):
    cfg = tmp_path / "cfg.toml"
    cfg.write_text('backends = ["numpy"]\nbackup = "numpy"\n')
    code, out, _ = run_cli(capsys, "partition", str(light_dir / "light_squeezenet.onnx"), "--config", str(cfg),
                           "--json")
    assert code == 0 and json.loads(out)["config"]["backends"] == ["numpy"]


def test_input_shape_flag(capsys, tmp_path):
    from onnx import TensorProto, helper, save

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "m",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])])
    path = tmp_path / "m.onnx"
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    cfg = tmp_path / "cfg.toml"
    cfg.write_text('backends = ["numpy"]\n[input_shapes]\nx = [2, 3]\n')
    code, out, _ = run_cli(capsys, "run", str(path), "--config", str(cfg), "--input-shape", "x=4,3", "--json")
    assert code == 0 and json.loads(out)["outputs"]["y"]["shape"] == [4, 3]  # the flag wins over the file
    code, out, _ = run_cli(capsys, "partition", str(path), "--backends", "numpy", "--input-shape", "x=5,3",
                           "--json")
    assert code == 0 and json.loads(out)["config"]["input_shapes"] == {"x": [5, 3]}
    code, _, err = run_cli(capsys, "run", str(path), "--input-shape", "z=1,3")  # checked against the model
    assert code == 2 and "unknown input(s) ['z']" in err and err.startswith("nnrt: error:")
    for bad in ("x", "x=", "=1,3", "x=1,a", "x=1,-3", "x=1,,3"):
        with pytest.raises(SystemExit) as e:
            main(["bench", str(path), "--input-shape", bad])
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert "argument --input-shape: expected NAME=D1,D2,..." in err and repr(bad) in err


def test_measure_feeds_flag(capsys, tmp_path):
    """``--measure-feeds FILE.npz`` is ``ScheduleConfig.measure_feeds``: the
    feeds' digest is in the config shown, a bad file is a usage error naming it."""
    from onnx import TensorProto, helper, save

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "m",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    path = tmp_path / "m.onnx"
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    feeds = tmp_path / "feeds.npz"
    np.savez(feeds, x=np.ones((2, 3), np.float32))
    code, out, _ = run_cli(capsys, "partition", str(path), "--backends", "numpy", "--measure-feeds", str(feeds),
                           "--json")
    assert code == 0 and json.loads(out)["config"]["measure_feeds"].startswith("xxh3_128:")
    code, _, err = run_cli(capsys, "run", str(path), "--measure-feeds", str(tmp_path / "none.npz"))
    assert code == 2 and "does not exist" in err and "none.npz" in err
