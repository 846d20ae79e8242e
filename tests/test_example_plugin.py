"""The third-party example plugin, really pip-installed (into a folder of its
own), is discovered by `nnrt devices` and runs a model."""
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
def plugin_env(tmp_path_factory) -> dict[str, str]:
    """The environment of a process that has the example plugin pip-installed
    (into its own folder on PYTHONPATH, so this interpreter, in a virtual
    environment or not, keeps seeing the installed nnrt-core, numpy and onnx)."""
    target = tmp_path_factory.mktemp("plugin") / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "-q",
         "--target", str(target), str(ROOT / "examples" / "example_backend")],
        capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    paths = [str(target), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def test_example_plugin_is_not_in_this_interpreter():
    from nnrt_core.registry import Registry

    assert "example" not in Registry().backends


def test_installed_plugin_listed_by_devices(plugin_env):
    out = subprocess.run([sys.executable, "-m", "nnrt_core.tools.cli", "devices", "--json"],
                         capture_output=True, text=True, check=True, env=plugin_env).stdout
    backends = {b["name"]: b for b in json.loads(out)["backends"]}
    assert backends["example"]["available"] is True
    assert backends["example"]["plugin"] == "example"
    assert "numpy" in backends


def test_installed_plugin_runs_a_model(plugin_env):
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
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=plugin_env)
    assert out.returncode == 0, out.stderr
    assert "'relu': 'example'" in out.stdout and "'softmax': 'numpy'" in out.stdout
