"""Checks of what a compiled partition returns (plugins are data too).

Every run of a partition must return a mapping of its output names to
tensors of the declared element type and static dimensions: host arrays for
host-memory backends, device tensors otherwise.  :class:`OutputCheck` tests
the common case with a few tuple compares (a plain dict of numpy arrays of the
declared dtypes and static shapes) and otherwise finds the precise problem,
raising :class:`~nnrt_core.errors.ExecutionError` naming the backend, the
partition and the value.  Values are not scanned (no NaN checks per run)."""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from nnrt_core.errors import ExecutionError
from nnrt_core.ir import SequenceType, TensorType
from nnrt_core.ir.types import ValueType
from nnrt_core.runtime.dims import shape_test

__all__ = ["DeclaredShapeWatch", "OutputCheck", "describe_value"]

#: per output: (name, dtype or None, rank or None, fixed dims, the whole shape when static)
_Spec = tuple[str, "np.dtype | None", "int | None", tuple[tuple[int, int], ...], "tuple[int, ...] | None"]


class OutputCheck:
    """Checks the outputs of one partition against their declared types.

    ``types`` maps output names to IR types where known (a partition loaded
    from a session file knows only the graph outputs' types): unknown ones are
    only checked to be present and to be a tensor."""

    def __init__(self, backend: str, partition: str, names: Sequence[str], types: Mapping[str, ValueType],
                 host_memory: bool = True) -> None:
        self.backend = backend
        self.partition = partition
        self.names = list(names)
        self.types = dict(types)
        self.host_memory = host_memory
        self.specs: list[_Spec] = [_spec(n, self.types.get(n)) for n in self.names]
        #: per output: (name, dtype or None, rank or None, static shape, getter of the fixed dims, their
        #: values): what the common case compares (a fast path may inline it, then call ``check`` on a miss)
        self.tests = [(name, dtype, *shape_test(None if ndim is None else _declared(ndim, fixed)))
                      for name, dtype, ndim, fixed, _ in self.specs]
        #: ``__call__``'s fast test, specialized for what is declared
        self.fast = _fast_check(self.specs, self.tests, self.check) if host_memory else self.check

    def __call__(self, outs: Any) -> Any:
        """``outs`` itself when right (checked cheaply in the common case: a
        dict of host arrays); else :class:`ExecutionError` saying what is wrong."""
        return self.fast(outs)

    def check(self, outs: Any) -> Any:
        """The precise check (every rule, one error naming the first violation)."""
        if not isinstance(outs, Mapping):
            raise self._error(f"returned {describe_value(outs)} instead of a dict of output name -> tensor "
                              f"(outputs {self.names})")
        for name, dtype, ndim, fixed, _static in self.specs:
            if name not in outs:
                raise self._error(f"returned no value for output {name!r} (got keys {sorted(map(str, outs))[:8]})")
            self._check_one(name, outs[name], dtype, ndim, fixed)
        return outs

    def _check_one(self, name: str, x: Any, dtype: np.dtype | None, ndim: int | None,
                   fixed: tuple[tuple[int, int], ...]) -> None:
        t = self.types.get(name)
        if isinstance(t, SequenceType):
            if not isinstance(x, (list, tuple)):
                raise self._error(f"returned {describe_value(x)} for sequence output {name!r}; expected a list")
            return
        if t is not None and not isinstance(t, TensorType):
            return  # optional (None allowed) or opaque
        if self.host_memory:
            if not isinstance(x, np.ndarray):
                raise self._error(f"returned {describe_value(x)} for output {name!r}; expected a numpy array"
                                  + (f" of {t}" if t is not None else ""))
        elif x is None or isinstance(x, (list, tuple, dict, str, bytes, int, float, bool)):
            raise self._error(f"returned {describe_value(x)} for output {name!r}; expected a device tensor")
        got_dtype, got_shape = _dtype_shape(x)
        if dtype is not None and got_dtype is not None and got_dtype != dtype \
                and not (dtype.kind == "O" and got_dtype.kind in "OUS"):
            raise self._error(f"returned dtype {got_dtype} for output {name!r}; declared {t}")
        if ndim is not None and got_shape is not None:
            if len(got_shape) != ndim or any(got_shape[i] != d for i, d in fixed):
                raise self._error(f"returned shape {list(got_shape)} for output {name!r}; declared {t}")

    def _error(self, what: str) -> ExecutionError:
        return ExecutionError(f"backend {self.backend!r} partition {self.partition!r} {what}")


class DeclaredShapeWatch:
    """Compares a partition's graph outputs with the shapes the model file
    declares for them where inference could not confirm the declaration
    (``Graph.declared_outputs``): a run whose output contradicts it is
    reported once per output through ``report(name, message)`` and the
    output returned as computed, as ONNX Runtime's ``VerifyOutputSizes``
    warns and goes on."""

    def __init__(self, partition: str, declared: Mapping[str, TensorType],
                 report: Callable[[str, str], None]) -> None:
        self.partition = partition
        self.pending = {n: t for n, t in declared.items() if t.shape is not None}
        self.report = report
        #: per pending output: (name, its shape test), decided here: a run that agrees costs a compare or two
        self._tests = tuple((n, *shape_test(t.shape)) for n, t in self.pending.items())

    def __call__(self, outs: Any) -> Any:
        for name, ndim, static, getter, want in self._tests:
            shape = getattr(outs.get(name), "shape", None)
            if not isinstance(shape, tuple) or (shape == static if static is not None else
                                                len(shape) == ndim and (getter is None or getter(shape) == want)):
                continue
            self._tests = tuple(t for t in self._tests if t[0] != name)
            t = self.pending.pop(name, None)
            if t is not None:  # once per output, also when runs on several threads see it
                self.report(name, f"graph output {name!r}: partition {self.partition!r} returned shape "
                                  f"{list(shape)}, the model declares {t}; the output is returned as computed "
                                  "(the declaration is not what the graph computes)")
        return outs


def _fast_check(specs: list[_Spec], tests: list[Any], slow: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A closure accepting a dict of numpy arrays matching ``specs`` with a
    few compares decided at build (:func:`~nnrt_core.runtime.dims.shape_test`;
    one output fully static: one probe) and handing anything else
    (sequences, optionals, errors) to ``slow``."""
    if len(specs) == 1 and specs[0][1] is not None and specs[0][4] is not None:
        name, dtype, _, _, shape = specs[0]

        def check_one(outs: Any) -> Any:
            if type(outs) is dict:
                x = outs.get(name)
                if type(x) is np.ndarray and (x.dtype is dtype or x.dtype == dtype) and x.shape == shape:
                    return outs
            return slow(outs)
        return check_one

    def check(outs: Any) -> Any:
        if type(outs) is dict:
            get = outs.get
            for name, dtype, ndim, static, getter, want in tests:
                x = get(name)
                if type(x) is not np.ndarray or (dtype is not None and x.dtype is not dtype and x.dtype != dtype):
                    break
                shape = x.shape  # a new tuple per access: read once
                if static is not None:
                    if shape != static:
                        break
                elif ndim is not None and (len(shape) != ndim or (getter is not None and getter(shape) != want)):
                    break
            else:
                return outs
        return slow(outs)
    return check


def _declared(ndim: int, fixed: tuple[tuple[int, int], ...]) -> list[Any]:
    """A declared shape of rank ``ndim`` with the ``fixed`` (index, size) dims, ``None`` elsewhere."""
    dims: list[Any] = [None] * ndim
    for i, d in fixed:
        dims[i] = d
    return dims


def _spec(name: str, t: ValueType | None) -> _Spec:
    if not isinstance(t, TensorType):
        return name, None, None, (), None
    try:
        dtype: np.dtype | None = np.dtype(t.dtype.numpy)
    except TypeError:
        dtype = None
    if t.shape is None:
        return name, dtype, None, (), None
    fixed = tuple((i, d) for i, d in enumerate(t.shape) if isinstance(d, int))
    static = tuple(t.shape) if len(fixed) == len(t.shape) else None
    return name, dtype, len(t.shape), fixed, static


def _dtype_shape(x: Any) -> tuple[np.dtype | None, tuple[int, ...] | None]:
    """``x``'s dtype and shape when it exposes them as numpy does (device
    tensors may not), else ``None``s."""
    dtype, shape = getattr(x, "dtype", None), getattr(x, "shape", None)
    if not isinstance(dtype, np.dtype):
        dtype = None
    if not (isinstance(shape, tuple) and all(isinstance(d, (int, np.integer)) for d in shape)):
        shape = None
    return dtype, shape


def describe_value(x: Any) -> str:
    """A short description of a returned value for error messages."""
    if x is None:
        return "None"
    if isinstance(x, np.ndarray):
        return f"array {x.dtype}{list(x.shape)}"
    if isinstance(x, (list, tuple)):
        return f"a {type(x).__name__} of {len(x)} item(s)"
    return f"a {type(x).__name__}"
