"""ScheduleConfig validation and loading."""
from __future__ import annotations

import json

import pytest

from nnrt_core import ScheduleConfig
from nnrt_core.errors import ConfigError


def test_defaults_and_backend_list_forms():
    assert ScheduleConfig().backends == "auto"
    assert ScheduleConfig(backends=["a", "b"]).backends == ("a", "b")
    assert ScheduleConfig(backends="a, b").backends == ("a", "b")


@pytest.mark.parametrize("kwargs,match", [
    ({"precision": "fp8"}, "precision must be one of fp32, fp16, bf16, int8, auto"),
    ({"performance_mode": "turbo"}, "performance_mode must be one of none, low, medium, high, extreme"),
    ({"priority": "urgent"}, "priority must be one of low, medium, high"),
    ({"num_threads": -1}, "num_threads must be an integer"),
    ({"backends": ["a", "a"]}, "lists a backend twice"),
    ({"backends": 3}, "backends must be a list"),
    ({"pins": {"n": 3}}, "pins must map"),
    ({"optimization_level": "max"}, "optimization_level must be one of"),
])
def test_bad_values_name_the_option_and_choices(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        ScheduleConfig(**kwargs)


def test_from_toml_and_json(tmp_path):
    toml = tmp_path / "c.toml"
    toml.write_text('[nnrt]\nbackends = ["onnxruntime", "numpy"]\nbackup = "numpy"\nprecision = "fp16"\n'
                    '[nnrt.backend_options.onnxruntime]\ngraph_optimization_level = "all"\n')
    cfg = ScheduleConfig.from_file(toml)
    assert cfg.backends == ("onnxruntime", "numpy") and cfg.precision == "fp16"
    assert cfg.compile_options("onnxruntime").extra == {"graph_optimization_level": "all"}
    js = tmp_path / "c.json"
    js.write_text(json.dumps({"backends": "auto", "num_threads": 2, "pins": {"conv1": "numpy"}}))
    cfg = ScheduleConfig.from_file(js)
    assert cfg.num_threads == 2 and cfg.pins == {"conv1": "numpy"}


def test_file_errors(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        ScheduleConfig.from_file(tmp_path / "none.toml")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="is not valid"):
        ScheduleConfig.from_file(bad)
    unknown = tmp_path / "u.json"
    unknown.write_text('{"backendz": ["numpy"]}')
    with pytest.raises(ConfigError, match=r"unknown config keys \['backendz'\]; valid keys: .*backends"):
        ScheduleConfig.from_file(unknown)
    ext = tmp_path / "c.yaml"
    ext.write_text("x: 1")
    with pytest.raises(ConfigError, match=".toml or .json"):
        ScheduleConfig.from_file(ext)


def test_requested_options_and_round_trip():
    cfg = ScheduleConfig(precision="fp16", num_threads=2)
    assert cfg.requested_options() == {"precision", "num_threads"}
    assert ScheduleConfig.from_dict(cfg.to_dict()) == cfg
