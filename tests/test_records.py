"""Every ``Record`` subclass's ``__init__`` takes its fields first, in field
order: pickling and ``copy`` rebuild a record as ``cls(*fields)``
(``Record.__reduce__``), so a field order that differs from the parameters
would restore values into the wrong fields."""
from __future__ import annotations

import importlib
import inspect
import pickle
import pkgutil

import pytest

from nnrt_core.record import FrozenRecord, Record

PACKAGES = ("nnrt_core", "nnrt_numpy", "nnrt_onnxruntime", "nnrt_npu_emu", "nnrt_schedulers", "nnrt_ray")


def _import_all() -> None:
    for name in PACKAGES:
        pkg = pytest.importorskip(name)
        for info in pkgutil.walk_packages(pkg.__path__, name + "."):
            try:
                importlib.import_module(info.name)
            except ImportError:  # an optional dependency (tflite, ray...) missing here
                continue


def _records() -> list[type]:
    _import_all()
    out, todo = [], [Record]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            todo.append(sub)
            if sub.__module__.split(".")[0] in PACKAGES and sub is not FrozenRecord:
                out.append(sub)
    return sorted(set(out), key=lambda c: (c.__module__, c.__qualname__))


def init_mismatches(classes: list[type]) -> list[str]:
    """Classes whose ``__init__`` does not take ``FIELDS`` first, in order (the rest must have
    defaults); a class that pickles itself (its own ``__reduce__``) is not bound by it."""
    bad = []
    for cls in classes:
        if cls.__reduce__ is not Record.__reduce__:
            continue
        params = list(inspect.signature(cls.__init__).parameters.values())[1:]
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        names = [p.name for p in positional[:len(cls.FIELDS)]]
        rest = positional[len(cls.FIELDS):]
        if names != list(cls.FIELDS) or any(p.default is p.empty for p in rest):
            bad.append(f"{cls.__module__}.{cls.__qualname__}: fields {list(cls.FIELDS)}, __init__ {names}")
    return bad


def test_every_record_takes_its_fields_in_order():
    classes = _records()
    assert len(classes) >= 30, [c.__qualname__ for c in classes]
    assert init_mismatches(classes) == []


def test_the_check_finds_a_swapped_order_and_pickling_shows_why():
    class Swapped(Record):
        __slots__ = ("a", "b")

        def __init__(self, b: int, a: int) -> None:
            self.a, self.b = a, b

    class Right(FrozenRecord):
        __slots__ = ("a", "b")

        def __init__(self, a: int, b: int = 0) -> None:
            object.__setattr__(self, "a", a)
            object.__setattr__(self, "b", b)

    assert init_mismatches([Swapped, Right]) == [
        f"{__name__}.{Swapped.__qualname__}: fields ['a', 'b'], __init__ ['b', 'a']"]
    s = Swapped(b=2, a=1)
    copied = Swapped.__new__(Swapped)
    copied.__init__(*s._values())  # what unpickling does: cls(*fields)
    assert (copied.a, copied.b) == (2, 1)  # the fields swapped
    assert Right(*Right(1, 2)._values()) == Right(1, 2)


def test_a_real_record_survives_pickling():
    from nnrt_core.backend.base import CompileOptions

    opts = CompileOptions(precision="fp16", num_threads=2, device="cpu:0", extra={"k": 1}, serializable=True)
    assert pickle.loads(pickle.dumps(opts)) == opts
