"""Machine-specific session files (``ScheduleConfig.machine_specific``): ONNX
Runtime partitions stored as ORT's optimized graph, refused on another machine."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from nnrt_core import ScheduleConfig, Session  # noqa: E402
from nnrt_core.errors import CompileError, ConfigError  # noqa: E402
from nnrt_core.storage.session_file import read_session_file  # noqa: E402
from nnrt_onnxruntime.partition import unpack_blob  # noqa: E402

from test_model_cache import small_cnn  # noqa: E402

ORT = ["onnxruntime"]


@pytest.fixture
def x():
    return {"x": np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)}


def _header(path):
    return unpack_blob(bytes(read_session_file(path).partitions[0].blob))[0]


def test_a_machine_specific_file_stores_ort_s_optimized_graph_and_runs_the_same(tmp_path, x):
    portable, specific = tmp_path / "p.nnrt", tmp_path / "m.nnrt"
    ref = Session(small_cnn(), ScheduleConfig(backends=ORT))
    ref.save(portable)
    Session(small_cnn(), ScheduleConfig(backends=ORT, machine_specific=True)).save(specific)
    assert "optimized_for" not in _header(portable)
    assert "optimized_for" in _header(specific)
    loaded = Session(specific)
    assert loaded.compiled_model.steps[0].compiled.describe()["stored_form"] == "optimized"
    np.testing.assert_allclose(loaded.run(x)["y"], ref.run(x)["y"], rtol=1e-5, atol=1e-6)
    assert Session(portable).compiled_model.steps[0].compiled.describe()["stored_form"] == "onnx"


def test_a_machine_specific_file_is_refused_on_another_machine(tmp_path, monkeypatch):
    import nnrt_onnxruntime.backend as ort_backend

    path = tmp_path / "m.nnrt"
    Session(small_cnn(), ScheduleConfig(backends=ORT, machine_specific=True)).save(path)
    monkeypatch.setattr(ort_backend, "machine_fingerprint", lambda: {"onnxruntime": "0", "arch": "x", "features": []})
    with pytest.raises(CompileError, match="optimized for another machine"):
        Session(path)


def test_machine_specific_is_a_bool_and_a_cli_flag(tmp_path, x):
    with pytest.raises(ConfigError, match="machine_specific must be true or false"):
        ScheduleConfig(machine_specific="yes")
    src, out = tmp_path / "m.onnx", tmp_path / "m.nnrt"
    src.write_bytes(small_cnn())
    subprocess.run([sys.executable, "-m", "nnrt_core.tools.cli", "compile", str(src), "-o", str(out),
                    "--backends", "onnxruntime", "--machine-specific"], check=True, capture_output=True)
    assert "optimized_for" in _header(out)
    assert Session(out).config.machine_specific is True


def test_a_machine_specific_file_loads_without_onnx(tmp_path, x):
    """Feeding weights as inputs needs onnx's protos: a fresh process loading a
    small model's file keeps them initializers (ORT copies a few MB) and never imports onnx."""
    path = tmp_path / "m.nnrt"
    ref = Session(small_cnn(), ScheduleConfig(backends=ORT, machine_specific=True))
    ref.save(path)
    np.save(tmp_path / "x.npy", x["x"])
    code = ("import sys, numpy as np; from nnrt_core import Session; s = Session(sys.argv[1]); "
            "y = s.run({'x': np.load(sys.argv[2])})['y']; np.save(sys.argv[3], y); "
            "info = s.compiled_model.steps[0].compiled.describe(); "
            "print('onnx' in sys.modules, info['stored_form'], info.get('weights_fed', 0))")
    out = subprocess.run([sys.executable, "-c", code, str(path), str(tmp_path / "x.npy"), str(tmp_path / "y.npy")],
                         capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "optimized", "0"]
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), ref.run(x)["y"])


def test_weights_are_fed_without_onnx_only_when_the_copy_would_cost_more(monkeypatch):
    from nnrt_core.plugin_api import ExternalWeights
    from nnrt_onnxruntime import offline

    w = ExternalWeights("w.bin")
    w.names, w.arrays = ["a", "b"], [np.zeros(1 << 16, np.float32), np.zeros(10, np.float32)]
    assert offline.worth_feeding(w)  # onnx is imported in this process
    monkeypatch.delitem(sys.modules, "onnx")
    assert not offline.worth_feeding(w)
    monkeypatch.setattr(offline, "FEED_IMPORT_BYTES", 1 << 18)  # the 256 KiB weight alone
    assert offline.worth_feeding(w)
