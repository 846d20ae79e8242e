"""``ScheduleConfig(measure_feeds=...)``: real inputs for measured selection.

Measured selection (:mod:`nnrt_core.compiler.measure`) times the candidate
plans on synthetic inputs (standard-normal floats, integers 0).  A model
whose inputs must make sense cannot run any plan on those (silero VAD: a
sample rate of 0), and the build then falls back to the static priority order.
``measure_feeds`` gives the inputs to time on instead:

* a mapping ``{input name: array}`` (one feed set);
* a list of at most ``MAX_SETS`` such mappings (each plan run is one run of
  every set; a plan's error under ``precision="auto"`` is its worst over them);
* the path of an ``.npz`` file (``np.savez``: one feed set), loaded with
  ``allow_pickle=False``.

:class:`MeasureFeeds` holds read-only copies and their xxh3 digest
(``xxh3_128:<hex>`` over every set's names, dtypes, shapes and bytes).  The
digest stands for the feeds in ``ScheduleConfig.to_dict()``, so the
model-cache key and the stored measured choice change with them: another
feed set measures again, the same one loads what was measured.  The feeds are
checked against the graph by a build that measures (:meth:`MeasureFeeds.check`):
every name an input, every input given, the dtype and rank the model's,
static dimensions equal.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from nnrt_core.errors import ConfigError

__all__ = ["MAX_FEED_BYTES", "MAX_SETS", "MeasureFeeds"]

#: at most this many feed sets
MAX_SETS = 16
#: all feed sets together hold at most this many bytes (an .npz file's arrays as declared in it, too)
MAX_FEED_BYTES = 1 << 30


class MeasureFeeds:
    """Validated measurement feeds: ``sets`` (tuple of ``{name: read-only
    array}``), ``digest``, ``nbytes``, ``source`` (the .npz path or
    ``"given"``).  Equal and hashed by digest."""

    __slots__ = ("sets", "digest", "nbytes", "source")

    def __init__(self, sets: Sequence[Mapping[str, np.ndarray]], source: str = "given") -> None:
        self.sets = tuple(sets)
        self.source = source
        self.nbytes = sum(a.nbytes for s in self.sets for a in s.values())
        self.digest = _digest(self.sets)

    @classmethod
    def coerce(cls, value: Any) -> "MeasureFeeds":
        """``value`` (a mapping, a list of mappings, an .npz path or a
        ``MeasureFeeds``) as a ``MeasureFeeds``; :class:`ConfigError` naming what is wrong."""
        if isinstance(value, MeasureFeeds):
            return value
        if isinstance(value, (str, os.PathLike)):
            return cls(_load_npz(os.fspath(value)), source=os.fspath(value))
        if isinstance(value, Mapping):
            sets = [value]
        elif isinstance(value, (list, tuple)):
            sets = list(value)
            if not sets:
                raise ConfigError("measure_feeds: an empty list; give at least one {input name: array} feed set")
        else:
            raise ConfigError(f"measure_feeds must be a {{input name: array}} mapping, a list of at most "
                              f"{MAX_SETS} such mappings or the path of an .npz file, got {type(value).__name__}")
        if len(sets) > MAX_SETS:
            raise ConfigError(f"measure_feeds: {len(sets)} feed sets; at most {MAX_SETS}")
        out = [_feed_set(s, i if len(sets) > 1 else None) for i, s in enumerate(sets)]
        total = sum(a.nbytes for s in out for a in s.values())
        if total > MAX_FEED_BYTES:
            raise ConfigError(f"measure_feeds: {total:,} bytes of arrays, over the {MAX_FEED_BYTES:,}-byte limit")
        return cls(out)

    def check(self, inputs: Sequence[Any]) -> None:
        """Every set against the graph's ``inputs`` (IR values): names,
        dtypes, ranks and static dimensions; :class:`ConfigError` naming the
        input, what was given and what the model expects."""
        from nnrt_core.ir.types import TensorType

        types = {v.name: v.type for v in inputs}
        for i, feeds in enumerate(self.sets):
            where = "measure_feeds" if len(self.sets) == 1 else f"measure_feeds[{i}]"
            unknown = sorted(set(feeds) - set(types))
            if unknown:
                raise ConfigError(f"{where}: {unknown} {'is not an input' if len(unknown) == 1 else 'are not inputs'}"
                                  f" of the model; its inputs: {sorted(types)}")
            for name, t in types.items():
                if name not in feeds:
                    raise ConfigError(f"{where}: input {name!r} is missing; the model expects {_expected(t)}")
                x = feeds[name]
                if not isinstance(t, TensorType):
                    raise ConfigError(f"{where}: input {name!r} is a {t} in the model; measure_feeds gives tensors only")
                try:
                    want = t.dtype.numpy
                except TypeError:  # no numpy equivalent (bfloat16...): nothing given can match it
                    want = None
                dims = t.shape
                ok = want is not None and x.dtype == want and (dims is None or (len(dims) == x.ndim and all(
                    not isinstance(d, int) or d == n for d, n in zip(dims, x.shape))))
                if not ok:
                    raise ConfigError(f"{where}: input {name!r} is {x.dtype} {list(x.shape)}; the model expects "
                                      f"{_expected(t)}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MeasureFeeds) and other.digest == self.digest

    def __hash__(self) -> int:
        return hash(self.digest)

    def __repr__(self) -> str:
        return f"MeasureFeeds({len(self.sets)} set(s), {self.nbytes:,} bytes, {self.digest})"


def _expected(t: Any) -> str:
    shape = getattr(t, "shape", None)
    dtype = getattr(t, "dtype", None)
    dims = "any shape" if shape is None else "[" + ", ".join(str(d) if d is not None else "?" for d in shape) + "]"
    if dtype is None:
        return str(t)
    try:
        name = str(dtype.numpy)
    except (AttributeError, TypeError):  # no numpy equivalent
        name = getattr(dtype, "name", str(dtype))
    return f"{name} {dims}"


def _feed_set(feeds: Any, index: int | None) -> dict[str, np.ndarray]:
    """One ``{name: array}`` set as read-only copies (object arrays refused)."""
    where = "measure_feeds" if index is None else f"measure_feeds[{index}]"
    if not isinstance(feeds, Mapping):
        raise ConfigError(f"{where} must be a {{input name: array}} mapping, got {type(feeds).__name__}")
    if not feeds:
        raise ConfigError(f"{where}: an empty feed set")
    out = {}
    for name, x in feeds.items():
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{where}: keys must be input names, got {name!r}")
        if not isinstance(x, (np.ndarray, np.generic, int, float, bool)):
            raise ConfigError(f"{where}[{name!r}] must be a numpy array, got {type(x).__name__}")
        a = np.array(x, copy=True, order="C")
        if a.dtype.kind in "OV":
            raise ConfigError(f"{where}[{name!r}]: a {a.dtype} array; give numeric (or string) arrays")
        a.flags.writeable = False
        out[name] = a
    return out


def _load_npz(path: str) -> list[dict[str, np.ndarray]]:
    """The one feed set of an ``.npz`` file (``allow_pickle=False``), its
    declared sizes checked before anything is read."""
    import zipfile  # only for a config naming a file (zipfile brings bz2, lzma)

    p = Path(path)
    if p.suffix.lower() != ".npz":
        raise ConfigError(f"measure_feeds: {path!r} is not an .npz file (np.savez(path, name=array, ...))")
    if not p.is_file():
        raise ConfigError(f"measure_feeds: {path!r} does not exist (or is not a file)")
    try:
        with zipfile.ZipFile(p) as z:
            declared = sum(info.file_size for info in z.infolist())
        if declared > MAX_FEED_BYTES:
            raise ConfigError(f"measure_feeds: {path!r} holds {declared:,} bytes of arrays, over the "
                              f"{MAX_FEED_BYTES:,}-byte limit")
        with np.load(p, allow_pickle=False) as npz:
            feeds = {name: npz[name] for name in npz.files}
    except ConfigError:
        raise
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
        raise ConfigError(f"measure_feeds: cannot read {path!r} as an .npz of arrays: {type(e).__name__}: {e}") from e
    return [_feed_set(feeds, None)]


def _digest(sets: Sequence[Mapping[str, np.ndarray]]) -> str:
    import xxhash

    h = xxhash.xxh3_128()
    h.update(str(len(sets)).encode())
    for feeds in sets:
        for name in sorted(feeds):
            a = feeds[name]
            h.update(f"|{name}|{a.dtype.str}|{a.shape}|".encode())
            h.update(a.reshape(-1))  # C-contiguous (a copy made so): its bytes, not copied again
    return f"xxh3_128:{h.hexdigest()}"
