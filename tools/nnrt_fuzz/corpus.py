"""Seed models: onnx's node conformance cases and the small real models the
onnx wheel ships (``simple``, ``pytorch-operator``, ``pytorch-converted``)."""
from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

__all__ = ["SeedModel", "load_corpus"]

DATA_DIR = Path(onnx.__file__).parent / "backend" / "test" / "data"
#: real-model folders small enough to mutate many times (``light`` holds ResNet-sized models)
REAL_DIRS = ("simple", "pytorch-operator", "pytorch-converted")
#: seed models larger than this (serialized bytes) are left out
MAX_SEED_BYTES = 2 << 20


@dataclass(frozen=True)
class SeedModel:
    """One seed: a name, the model and the feeds of its first data set."""

    name: str
    model: onnx.ModelProto
    feeds: dict[str, np.ndarray]


def _node_cases() -> list[SeedModel]:
    import onnx.backend.test.case.node as node_cases

    seeds = []
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        cases = node_cases.collect_testcases(None)
    for c in cases:
        if not c.data_sets or c.model is None:
            continue
        inputs = c.data_sets[0][0]
        names = [i.name for i in c.model.graph.input]
        if len(inputs) != len(names) or not all(isinstance(x, np.ndarray) for x in inputs):
            continue  # sequences / optionals: left out
        seeds.append(SeedModel(c.name, c.model, dict(zip(names, inputs))))
    return seeds


def _real_models() -> list[SeedModel]:
    seeds = []
    for folder in REAL_DIRS:
        for model_path in sorted((DATA_DIR / folder).glob("*/model.onnx")):
            if model_path.stat().st_size > MAX_SEED_BYTES:
                continue
            model = onnx.load(str(model_path))
            names = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
            data = sorted((model_path.parent / "test_data_set_0").glob("input_*.pb"))
            arrays = []
            for p in data:
                t = onnx.TensorProto()
                t.ParseFromString(p.read_bytes())
                arrays.append(numpy_helper.to_array(t))
            if len(arrays) == len(names):
                seeds.append(SeedModel(f"{folder}/{model_path.parent.name}", model, dict(zip(names, arrays))))
    return seeds


@functools.lru_cache(maxsize=1)
def load_corpus() -> tuple[SeedModel, ...]:
    """Every seed model, in a fixed order (node cases first)."""
    return tuple(_node_cases() + _real_models())
