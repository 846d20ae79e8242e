"""Feeds: the description of a model's inputs and outputs
(:class:`TensorInfo`), their validation (:class:`FeedValidator`: a cheap check
for the common case, a precise error otherwise) and synthetic feeds for tools
(:func:`random_feeds`)."""
from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

import numpy as np

from nnrt_core.errors import InputError
from nnrt_core.ir import Dim, OptionalType, SequenceType, TensorType, Value
from nnrt_core.record import FrozenRecord
from nnrt_core.runtime.dims import shape_test
from nnrt_core.runtime.tensor import Tensor

__all__ = ["TensorInfo", "FeedValidator", "FeedSpec", "feed_specs", "allocate_input", "fits", "tensor_info",
           "random_feeds", "shape_text", "split_tensors"]


class TensorInfo(FrozenRecord):
    """Name, element type and shape of a session input or output."""

    __slots__ = ("name", "dtype", "shape", "kind")
    name: str
    dtype: np.dtype | None
    shape: tuple[Dim, ...] | None
    kind: str  #: tensor | sequence | optional

    def __init__(self, name: str, dtype: np.dtype | None, shape: tuple[Dim, ...] | None, kind: str = "tensor") -> None:
        for k, v in (("name", name), ("dtype", dtype), ("shape", shape), ("kind", kind)):
            object.__setattr__(self, k, v)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": str(self.dtype) if self.dtype is not None else None,
                "shape": list(self.shape) if self.shape is not None else None, "kind": self.kind}


class FeedValidator:
    """Checks feeds against a graph's inputs (names, dtypes, ranks, static dims)."""

    def __init__(self, inputs: Sequence[Value]) -> None:
        self.inputs = list(inputs)
        self._fast = feed_specs(self.inputs)

    def validate(self, feeds: Mapping[str, Any]) -> Mapping[str, Any]:
        """``feeds`` itself when it is a dict of host arrays matching the
        inputs exactly (the common case, checked cheaply with what was decided
        at build: names, dtypes, static shapes); else the checked feeds (numpy
        scalars as arrays...) or :class:`InputError`."""
        fast = self._fast
        if fast is not None and type(feeds) is dict and len(feeds) == len(fast):
            get = feeds.get
            for name, dtype, ndim, static, getter, want in fast:  # the common case, checked cheaply
                x = get(name)
                if type(x) is not np.ndarray or (x.dtype is not dtype and x.dtype != dtype):
                    break
                shape = x.shape  # a new tuple per access: read once
                if static is not None:
                    if shape != static:
                        break
                elif len(shape) != ndim or (getter is not None and getter(shape) != want):
                    break
            else:
                return feeds
        return self.check(feeds)

    def check(self, feeds: Mapping[str, Any]) -> dict[str, Any]:
        """Full validation with a precise error for whatever is wrong."""
        if not isinstance(feeds, Mapping):
            raise InputError(f"feeds must be a mapping of input name -> array, got {type(feeds).__name__}")
        expected = {v.name: v for v in self.inputs}
        odd = [k for k in feeds if not isinstance(k, str)]
        if odd:
            got = [f"{k!r} ({type(k).__name__})" for k in odd[:5]]
            raise InputError(f"feed keys must be input names (str), got {got}; the model's inputs are {list(expected)}")
        unknown = sorted(set(feeds) - set(expected))
        if unknown:
            raise InputError(f"unknown input(s) {unknown}; the model's inputs are {list(expected)}")
        missing = [n for n in expected if n not in feeds]
        if missing:
            raise InputError(f"missing input(s) {missing}; expected "
                             f"{[str(tensor_info(expected[n]).to_dict()) for n in missing]}")
        return {name: _check_one(name, v, feeds[name]) for name, v in expected.items()}


    def check_shapes(self, shapes: Mapping[str, tuple[int, ...]]) -> None:
        """:class:`InputError` when a shape contradicts its input's rank or static dimensions."""
        expected = {v.name: v for v in self.inputs}
        for name, shape in shapes.items():
            t = expected[name].type if name in expected else None
            if not isinstance(t, TensorType) or t.shape is None:
                continue
            if not fits(t.shape, shape) or any(s < 0 for s in shape):
                raise InputError(f"input {name!r} has shape {shape_text(t.shape)}; cannot plan for {list(shape)}")


#: (name, dtype, rank, the shape when static, getter of the fixed dims, their values)
FeedSpec = tuple[str, np.dtype, int, Any, Any, Any]


def feed_specs(inputs: Sequence[Value]) -> list[FeedSpec] | None:
    """(name, dtype, rank, the shape when static, getter of the fixed dims, their values) per input
    (:func:`~nnrt_core.runtime.dims.shape_test`) when every input is a tensor of known dtype and rank;
    None otherwise (then every run takes the slow check)."""
    specs = []
    for v in inputs:
        t = v.type
        if not isinstance(t, TensorType) or t.shape is None:
            return None
        try:
            dtype = t.dtype.numpy
        except TypeError:
            return None
        if dtype == np.dtype(object):
            return None
        ndim, static, getter, want = shape_test(t.shape)
        specs.append((v.name, dtype, ndim, static, getter, want))
    return specs


def tensor_info(v: Value) -> TensorInfo:
    """The :class:`TensorInfo` of a graph input or output."""
    if isinstance(v.type, TensorType):
        try:
            dt = v.type.dtype.numpy
        except TypeError:
            dt = None
        return TensorInfo(v.name, dt, v.type.shape)
    kind = "sequence" if isinstance(v.type, SequenceType) else "optional" if isinstance(v.type, OptionalType) else "unknown"
    return TensorInfo(v.name, None, None, kind)


def _check_one(name: str, v: Value, x: Any) -> Any:
    t = v.type
    if isinstance(t, SequenceType):
        if not isinstance(x, list):
            raise InputError(f"input {name!r} expects a sequence (list of arrays), got {type(x).__name__}")
        return x
    if isinstance(t, OptionalType):
        return x
    if not isinstance(t, TensorType):
        return x
    if isinstance(x, Tensor):  # zero-copy tensor: check what it holds, never copy it
        want = t.dtype.numpy
        if x.dtype != want or (t.shape is not None and not fits(t.shape, x.shape)):
            raise InputError(f"tensor fed to input {name!r} holds {x.dtype}{list(x.shape)}; the input expects "
                             f"{want}{shape_text(t.shape) if t.shape is not None else '[?]'}")
        return x
    if isinstance(x, np.generic):  # numpy scalar -> 0-d array
        x = np.asarray(x)
    if not isinstance(x, np.ndarray):
        if np.isscalar(x) or isinstance(x, (list, tuple)):
            raise InputError(f"input {name!r} expects a numpy array of {t}, got {type(x).__name__}")
        if hasattr(x, "__array__"):
            x = np.asarray(x)
        else:
            raise InputError(f"input {name!r} expects a numpy array of {t}, got {type(x).__name__}")
    try:
        want = t.dtype.numpy
    except TypeError:
        want = None
    if want is not None:
        ok = x.dtype == want or (want == np.dtype(object) and x.dtype.kind in "OU")
        if not ok:
            raise InputError(f"input {name!r} expects dtype {want}, got {x.dtype}")
        if want == np.dtype(object) and x.dtype.kind == "U":
            x = x.astype(object)
    if t.shape is not None:
        if x.ndim != len(t.shape):
            raise InputError(f"input {name!r} expects rank {len(t.shape)} (shape {shape_text(t.shape)}), "
                             f"got shape {tuple(x.shape)}")
        for i, (d, got) in enumerate(zip(t.shape, x.shape)):
            if isinstance(d, int) and d != got:
                raise InputError(f"input {name!r} expects dimension {i} to be {d} "
                                 f"(shape {shape_text(t.shape)}), got shape {tuple(x.shape)}")
    return x


def fits(declared: Sequence[Dim], shape: Sequence[int]) -> bool:
    """Whether ``shape`` has the rank of ``declared`` and its static dimensions."""
    return len(shape) == len(declared) and all(not isinstance(d, int) or d == s for d, s in zip(declared, shape))


def shape_text(shape: tuple) -> str:
    """``[1, ?, 224]``: a shape with unknown dimensions as ``?``."""
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def random_feeds(inputs: Sequence[TensorInfo], seed: int = 0, *, floats: str = "uniform", int_high: int = 3,
                 hint: str = "pass feeds explicitly") -> dict[str, np.ndarray]:
    """Synthetic feeds for ``inputs`` (symbolic dims as 1): floats uniform in
    [0, 1) or standard ``"normal"``, integers in ``[0, int_high)`` (all zeros,
    valid indices, with ``int_high=1``), booleans random (False with
    ``int_high=1``).  :class:`InputError` (ending in ``hint``) for inputs that
    are not tensors of a known numeric dtype and rank."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for info in inputs:
        if info.kind != "tensor" or info.dtype is None or info.shape is None:
            what = info.kind if info.kind != "tensor" else "tensor of unknown dtype or rank"
            raise InputError(f"input {info.name!r} is a {what}; {hint}")
        shape = tuple(d if isinstance(d, int) else 1 for d in info.shape)
        dt = np.dtype(info.dtype)
        if dt.kind == "f":
            x = rng.standard_normal(shape) if floats == "normal" else rng.random(shape)
            feeds[info.name] = x.astype(dt)
        elif dt.kind in "iub":
            high = int_high if dt.kind != "b" else min(int_high, 2)
            feeds[info.name] = (rng.integers(0, high, size=shape) if high > 1 else np.zeros(shape)).astype(dt)
        else:
            raise InputError(f"input {info.name!r} has dtype {dt}; {hint}")
    return feeds


def split_tensors(feeds: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Checked feeds as (name -> array or device buffer, name -> the backend
    whose memory holds it, for :class:`Tensor` s on a device)."""
    raw, owners = {}, {}
    for name, x in feeds.items():
        if type(x) is Tensor:
            raw[name] = x.data
            if x.on_device:
                owners[name] = x.backend
        else:
            raw[name] = x
    return raw, owners


def allocate_input(inputs: Sequence[Value], steps: Sequence[Any], name: str,
                   shape: Sequence[int] | None = None) -> Tensor:
    """A :class:`Tensor` for input ``name`` in the memory of the backend that
    reads it among ``steps`` (host memory when several or a host backend do)."""
    spec = next((v for v in inputs if v.name == name), None)
    if spec is None:
        raise InputError(f"unknown input {name!r}; the model's inputs are {[v.name for v in inputs]}")
    t = spec.type
    if not isinstance(t, TensorType) or t.shape is None:
        raise InputError(f"input {name!r} is not a tensor of known rank; it cannot be allocated")
    dims = list(t.shape)
    if shape is not None:
        try:
            shape = tuple(int(d) for d in shape)
        except (TypeError, ValueError) as e:
            raise InputError(f"input {name!r}: shape must be a sequence of ints, got {shape!r}") from e
        if not fits(t.shape, shape) or any(s < 0 for s in shape):
            raise InputError(f"input {name!r} has shape {shape_text(t.shape)}; cannot allocate {list(shape)}")
    elif all(isinstance(d, int) for d in dims):
        shape = tuple(dims)
    else:
        raise InputError(f"input {name!r} has dynamic shape {shape_text(t.shape)}; pass shape=")
    dtype = t.dtype.numpy
    _check_allocation(name, shape, np.dtype(dtype))
    readers = {id(st.backend): st.backend for st in steps if name in st.inputs}
    backend = next(iter(readers.values())) if len(readers) == 1 else None
    try:
        if backend is None or backend.host_memory:
            return Tensor(np.empty(shape, dtype), None, shape, dtype)
        return Tensor(backend.allocate(shape, dtype), backend, shape, dtype)
    except (MemoryError, ValueError) as e:
        raise InputError(f"input {name!r}: cannot allocate {np.dtype(dtype)}{list(shape)}: "
                         f"{type(e).__name__}: {e}") from e


def _check_allocation(name: str, shape: tuple[int, ...], dtype: np.dtype) -> None:
    """:class:`InputError` when a tensor of ``shape`` cannot fit in this machine's memory
    (checked before allocating, in exact integer arithmetic)."""
    nbytes = dtype.itemsize
    for d in shape:
        nbytes *= d
    limit = physical_memory()
    if nbytes > limit:
        raise InputError(f"input {name!r}: a {dtype}{list(shape)} tensor needs {nbytes:,} bytes, more than "
                         f"this machine's memory ({limit:,} bytes)")


def physical_memory() -> int:
    """This machine's physical memory in bytes (the largest numpy allocation when unknown)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return np.iinfo(np.intp).max
