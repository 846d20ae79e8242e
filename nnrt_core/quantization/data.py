"""Calibration data: ``.npz`` files (or a folder of them, or a mapping) with one
array per model input, checked against the model before anything runs.

Each array has a leading sample axis.  For a model input of rank ``r`` an array
may be

* rank ``r + 1``: ``array[i]`` is one complete feed (its static dims must
  match the model's), or
* rank ``r``: the leading axis stands in for the model's batch dimension and
  is cut into feeds of the model's static batch size (which must divide it)
  or, when the batch dimension is dynamic, of ``batch_size`` samples.

Every model input needs an array; every array must have the model's dtype,
finite values and the same number of samples.  Extra arrays (labels...) are
ignored and reported.
"""
from __future__ import annotations

import logging
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from nnrt_core.errors import QuantizationError
from nnrt_core.ir import TensorType, Value

__all__ = ["CalibrationSet", "load_calibration", "read_npz"]

log = logging.getLogger("nnrt.quantization")


@dataclass
class CalibrationSet:
    """Feeds ready for ``Session.run`` (views into the loaded arrays)."""

    feeds: list[dict[str, np.ndarray]]
    samples: int  #: calibration samples (leading-axis entries of each input)
    sources: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)  #: arrays that name no model input

    def __len__(self) -> int:
        return len(self.feeds)


def read_npz(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Every array of a ``.npz`` file, read without unpickling anything."""
    p = Path(path)
    try:
        with np.load(p, allow_pickle=False) as z:
            if not isinstance(z, np.lib.npyio.NpzFile):  # pragma: no cover - np.load on a .npz
                raise QuantizationError(f"calibration file {str(p)!r} is not a .npz archive")
            out = {}
            for key in z.files:
                try:
                    out[key] = z[key]
                except ValueError as e:
                    raise QuantizationError(
                        f"calibration file {str(p)!r}: array {key!r} cannot be read without unpickling "
                        f"(object arrays are not accepted): {e}") from None
            return out
    except AttributeError:
        raise QuantizationError(f"calibration file {str(p)!r} is a single .npy array, not a .npz archive "
                                "of arrays keyed by input name (use numpy.savez)") from None
    except QuantizationError:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise QuantizationError(f"calibration file {str(p)!r} is not a readable .npz archive: {e}") from None


def _read_path(path: str | os.PathLike) -> list[tuple[str, dict[str, np.ndarray]]]:
    p = Path(path)
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.is_file() and f.suffix.lower() == ".npz")
        if not files:
            raise QuantizationError(f"calibration folder {str(p)!r} contains no .npz files")
        return [(str(f), read_npz(f)) for f in files]
    if not p.exists():
        raise QuantizationError(f"calibration data {str(p)!r} does not exist (expected a .npz file or a folder "
                                "of .npz files)")
    if p.suffix.lower() == ".npy":
        raise QuantizationError(f"calibration file {str(p)!r} is a single .npy array; expected a .npz archive "
                                "of arrays keyed by input name (numpy.savez)")
    return [(str(p), read_npz(p))]


def _sources(source: Any) -> list[tuple[str, Mapping[str, Any]]]:
    if isinstance(source, (str, os.PathLike)):
        return _read_path(source)
    if isinstance(source, Mapping):
        return [("calibration data", source)]
    if isinstance(source, Sequence) and not isinstance(source, (bytes, bytearray)):
        if not source:
            raise QuantizationError("calibration data is an empty list")
        out = []
        for i, item in enumerate(source):
            if isinstance(item, (str, os.PathLike)):
                out.extend(_read_path(item))
            elif isinstance(item, Mapping):
                out.append((f"calibration data [{i}]", item))
            else:
                raise QuantizationError(f"calibration data [{i}] is a {type(item).__name__}; expected a mapping of "
                                        "input name -> array or a .npz path")
        return out
    raise QuantizationError(f"calibration data must be a .npz path, a folder of .npz files or a mapping of input "
                            f"name -> array, got {type(source).__name__}")


def _shape_str(shape: Sequence[Any] | None) -> str:
    if shape is None:
        return "[?]"
    return "[" + ", ".join("?" if not isinstance(d, int) else str(d) for d in shape) + "]"


def _feeds_for(where: str, arrays: Mapping[str, Any], inputs: Sequence[Value],
               batch_size: int) -> tuple[list[dict[str, np.ndarray]], int, list[str]]:
    names = [v.name for v in inputs]
    ignored = sorted(k for k in arrays if k not in names)
    missing = [n for n in names if n not in arrays]
    if missing:
        have = sorted(arrays) or "none"
        raise QuantizationError(f"{where}: no array for model input(s) {missing}; arrays: {have} "
                                "(arrays must be keyed by input name)")
    slices: dict[str, list[Any]] = {}
    counts: dict[str, int] = {}
    for v in inputs:
        t = v.type
        if not isinstance(t, TensorType):
            raise QuantizationError(f"model input {v.name!r} is a {t}; only tensor inputs can be calibrated")
        x = arrays[v.name]
        if not isinstance(x, np.ndarray):
            raise QuantizationError(f"{where}: {v.name!r} is a {type(x).__name__}, expected a numpy array")
        try:
            want = t.dtype.numpy
        except (TypeError, ValueError):
            raise QuantizationError(f"model input {v.name!r} has element type {t.dtype.name}, which calibration "
                                    "cannot feed") from None
        if x.dtype != want:
            raise QuantizationError(f"{where}: array {v.name!r} has dtype {x.dtype}; model input {v.name!r} expects "
                                    f"{want} (convert it with .astype(numpy.{want}))")
        if x.ndim == 0 or x.shape[0] == 0:
            raise QuantizationError(f"{where}: array {v.name!r} is empty (shape {tuple(x.shape)}); calibration "
                                    "needs at least one sample")
        if x.dtype.kind == "f" and not np.isfinite(x).all():
            bad = int(np.size(x) - np.count_nonzero(np.isfinite(x)))
            raise QuantizationError(f"{where}: array {v.name!r} contains {bad} NaN/inf value(s)")
        n = x.shape[0]
        shape = t.shape
        expect = (f"shape [samples, *{_shape_str(shape)}] or, with the sample axis as the batch axis, "
                  f"[samples, *{_shape_str(shape[1:]) if shape else '[?]'}]")
        if shape is None or x.ndim == len(shape) + 1:
            if shape is not None:
                for i, (d, got) in enumerate(zip(shape, x.shape[1:])):
                    if isinstance(d, int) and d != got:
                        raise QuantizationError(
                            f"{where}: array {v.name!r} has shape {tuple(x.shape)}: each sample must have shape "
                            f"{_shape_str(shape)} (dimension {i} must be {d}, got {got}); expected {expect}")
            slices[v.name] = list(range(n))
        elif x.ndim == len(shape) and len(shape) >= 1:
            for i, (d, got) in enumerate(zip(shape[1:], x.shape[1:]), start=1):
                if isinstance(d, int) and d != got:
                    raise QuantizationError(
                        f"{where}: array {v.name!r} has shape {tuple(x.shape)}: dimension {i} must be {d} "
                        f"(model input shape {_shape_str(shape)}); expected {expect}")
            b = shape[0]
            if isinstance(b, int):
                if b <= 0 or n % b:
                    raise QuantizationError(
                        f"{where}: array {v.name!r} has {n} samples along its batch axis, not a multiple of the "
                        f"model's static batch size {b} (input shape {_shape_str(shape)})")
                step = b
            else:
                step = batch_size
            slices[v.name] = [slice(s, min(s + step, n)) for s in range(0, n, step)]
        else:
            raise QuantizationError(f"{where}: array {v.name!r} has shape {tuple(x.shape)} (rank {x.ndim}); model "
                                    f"input {v.name!r} has shape {_shape_str(shape)}, so expected {expect}")
        counts[v.name] = n
    if len(set(counts.values())) > 1:
        raise QuantizationError(f"{where}: arrays have different numbers of samples: "
                                + ", ".join(f"{k}={c}" for k, c in counts.items()))
    runs = {len(s) for s in slices.values()}
    if len(runs) > 1:
        raise QuantizationError(f"{where}: inputs give different numbers of runs ("
                                + ", ".join(f"{k}: {len(s)}" for k, s in slices.items())
                                + "); give every input with the same layout")
    r = runs.pop()
    feeds = [{name: arrays[name][slices[name][i]] for name in names} for i in range(r)]
    return feeds, next(iter(counts.values())), ignored


def load_calibration(source: Any, inputs: Sequence[Value], *, batch_size: int = 32) -> CalibrationSet:
    """Read and check calibration data for a model with graph inputs ``inputs``.

    ``source``: a ``.npz`` path, a folder of ``.npz`` files, a mapping of input
    name -> array, a list of those, or a :class:`CalibrationSet` (returned as is)."""
    if isinstance(source, CalibrationSet):
        if not source.feeds:
            raise QuantizationError("the calibration set is empty")
        return source
    if not inputs:
        raise QuantizationError("the model has no inputs to calibrate")
    feeds: list[dict[str, np.ndarray]] = []
    samples = 0
    where_list: list[str] = []
    ignored: set[str] = set()
    for where, arrays in _sources(source):
        f, n, ign = _feeds_for(where, arrays, inputs, batch_size)
        feeds.extend(f)
        samples += n
        where_list.append(where)
        ignored.update(ign)
    if not feeds:  # pragma: no cover - every source yields at least one feed or raises
        raise QuantizationError("the calibration data is empty")
    if ignored:
        log.info("calibration arrays %s name no model input; ignored", sorted(ignored))
    return CalibrationSet(feeds, samples, where_list, sorted(ignored))
