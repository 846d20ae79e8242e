"""``nnrt_core.record``: the plain-class records that replaced dataclasses on
the import path keep the dataclass behaviour callers rely on."""
from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from nnrt_core.backend.base import Capability, CompileOptions, DeviceInfo
from nnrt_core.config import ScheduleConfig
from nnrt_core.entry_points import Dist, EntryPointInfo
from nnrt_core.ir import DataType, TensorType
from nnrt_core.placement import NodePlacement, PlacementEvent
from nnrt_core.record import FrozenInstanceError, FrozenRecord, Record
from nnrt_numpy.kernel import NodeInfo


class Point(Record):
    __slots__ = ("x", "y")

    def __init__(self, x: int, y: int = 0) -> None:
        self.x, self.y = x, y


class Key(FrozenRecord):
    __slots__ = ("a", "b")

    def __init__(self, a: int, b: tuple = ()) -> None:
        object.__setattr__(self, "a", a)
        object.__setattr__(self, "b", b)


def test_repr_eq_and_hash_like_a_dataclass():
    assert repr(Point(1, 2)) == "Point(x=1, y=2)"
    assert Point(1, 2) == Point(1, 2) and Point(1, 2) != Point(2, 1)
    assert Point(1) != Key(1) and (Point(1) == (1, 0)) is False  # other classes never compare equal
    with pytest.raises(TypeError):
        hash(Point(1))  # mutable: unhashable, as @dataclass(eq=True)
    assert hash(Key(1, (2,))) == hash(Key(1, (2,))) and len({Key(1), Key(1), Key(2)}) == 2


def test_frozen_records_refuse_assignment():
    k = Key(1)
    with pytest.raises(FrozenInstanceError, match="cannot assign to field 'a' of Key"):
        k.a = 2
    with pytest.raises(AttributeError):
        del k.b
    with pytest.raises(AttributeError):
        k.other = 1  # no __dict__ either
    t = TensorType(DataType.FLOAT, (1, 2))
    with pytest.raises(AttributeError):
        t.shape = None


def test_replace_fields_and_as_dict():
    p = Point(1, 2)
    assert p.replace(y=5) == Point(1, 5) and p == Point(1, 2)
    with pytest.raises(TypeError, match="Point has no field 'z'"):
        p.replace(z=1)
    assert Point.fields() == ("x", "y") and p.as_dict() == {"x": 1, "y": 2}
    opts = CompileOptions(num_threads=2).replace(device="cpu:0")
    assert (opts.num_threads, opts.device, opts.precision) == (2, "cpu:0", "fp32")


def test_pickle_and_copy_rebuild_through_init():
    for obj in (Point(1, [2]), Key(3, (4,)), TensorType(DataType.INT64, (None, "n")),
                DeviceInfo("cpu:0", "host", "cpu", {"cores": 2}),
                ScheduleConfig(backends=["numpy"], pins={"a": "numpy"}),
                NodePlacement("n", "Relu", "numpy", 0, "only one"), PlacementEvent("k", "b", "m", ["n"])):
        assert pickle.loads(pickle.dumps(obj)) == obj
        assert copy.copy(obj) == obj and copy.deepcopy(obj) == obj
    deep = copy.deepcopy(Point(1, [2]))
    assert deep.y == [2]


def test_mutable_defaults_are_fresh_per_instance():
    a, b = Capability("x"), Capability("y")
    a.supported.add("n")
    assert b.supported == set() and a.rejected is not b.rejected
    assert PlacementEvent("k", "b", "m").nodes == [] and DeviceInfo("d", "n", "cpu").properties == {}


def test_entry_point_equality_ignores_the_distribution():
    a = EntryPointInfo("numpy", "nnrt_numpy.plugin", "nnrt.backends", Dist("nnrt-backend-numpy", "0.1"))
    b = EntryPointInfo("numpy", "nnrt_numpy.plugin", "nnrt.backends", None)
    assert a == b and hash(a) == hash(b) and a != b.replace(value="other")


def test_schedule_config_keeps_its_checks_and_dict_form():
    cfg = ScheduleConfig(backends="onnxruntime, numpy", input_shapes={"x": [1, 3]})
    assert cfg.backends == ("onnxruntime", "numpy") and cfg.input_shapes == {"x": (1, 3)}
    d = cfg.to_dict()
    assert d["backends"] == ["onnxruntime", "numpy"] and ScheduleConfig.from_dict(d) == cfg
    d["pins"]["n"] = "numpy"
    assert cfg.pins == {}  # to_dict shares nothing with the config
    assert ScheduleConfig().pins == {} and ScheduleConfig().pins is not ScheduleConfig().pins
    from nnrt_core.errors import ConfigError
    with pytest.raises(ConfigError, match="pins must map"):
        ScheduleConfig(pins=None)  # as before: only an omitted mapping defaults to empty
    with pytest.raises(TypeError):
        cfg.replace(nonsense=1)


def test_node_info_replace_keeps_the_other_fields():
    info = NodeInfo("n", "Conv", opset=11, attrs={"group": 1}, num_inputs=2, const_inputs=(None, np.ones(2)))
    other = info.replace(op_type="FusedConv", num_inputs=3)
    assert (other.name, other.op_type, other.opset, other.num_inputs, other.attrs) == ("n", "FusedConv", 11, 3,
                                                                                      {"group": 1})
    assert other.const_inputs is info.const_inputs


def test_a_subclass_adds_its_slots_after_the_base_fields():
    class Labelled(Point):
        __slots__ = ("label",)

        def __init__(self, x: int, y: int = 0, label: str = "") -> None:
            super().__init__(x, y)
            self.label = label

    p = Labelled(1, 2, "a")
    assert Labelled.fields() == ("x", "y", "label") and repr(p).endswith("Labelled(x=1, y=2, label='a')")
    assert p == Labelled(1, 2, "a") and p != Labelled(1, 2, "b") and p != Point(1, 2)
    assert p.replace(label="b").as_dict() == {"x": 1, "y": 2, "label": "b"}
    assert pickle.loads(pickle.dumps(Key(1, (2,)))) == Key(1, (2,))
