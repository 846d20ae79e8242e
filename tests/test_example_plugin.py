"""The third-party example plugin, really pip-installed into a fresh virtual
environment, is discovered by `nnrt devices` and runs a model."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    env_dir = tmp_path_factory.mktemp("venv") / "env"
    # system site-packages: the venv sees the installed nnrt-core, numpy, pip and setuptools
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(env_dir)], check=True)
    py = env_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    proc = subprocess.run(
        [str(py), "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "-q",
         str(ROOT / "examples" / "example_backend")],
        capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return py


def test_example_plugin_is_not_in_this_interpreter():
    from nnrt_core.registry import Registry

    assert "example" not in Registry().backends


def test_installed_plugin_listed_by_devices(venv):
    out = subprocess.run([str(venv), "-m", "nnrt_core.tools.cli", "devices", "--json"],
                         capture_output=True, text=True, check=True).stdout
    backends = {b["name"]: b for b in json.loads(out)["backends"]}
    assert backends["example"]["available"] is True
    assert backends["example"]["plugin"] == "example"
    assert "numpy" in backends


def test_installed_plugin_runs_a_model(venv):
    script = textwrap.dedent("""
        import numpy as np
        from onnx import TensorProto, helper
        from nnrt_core import Session, ScheduleConfig
        g = helper.make_graph(
            [helper.make_node("Relu", ["x"], ["a"], name="relu"),
             helper.make_node("Softmax", ["a"], ["b"], name="softmax"),
             helper.make_node("Neg", ["b"], ["y"], name="neg")], "m",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        s = Session(m, ScheduleConfig(backends=["example"], backup="numpy"))
        y = s.run({"x": np.array([[1, -1, 2, 0]], np.float32)})["y"]
        e = np.exp([1, 0, 2, 0]); ref = -(e / e.sum())
        assert np.allclose(y, ref), (y, ref)
        print(s.placement)
    """)
    out = subprocess.run([str(venv), "-c", script], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "'relu': 'example'" in out.stdout and "'softmax': 'numpy'" in out.stdout
