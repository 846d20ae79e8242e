"""The installed entry points of some groups, read without ``importlib.metadata``.

``importlib.metadata.entry_points()`` builds a ``Distribution`` per installed
package, normalizes every name with a regular expression and parses every
``METADATA`` file it is asked about: ~8 ms of a cold start on a machine with
140 packages (and ~17 ms more where nothing else imports the module).  nnrt
only needs its own groups, so :func:`entry_points` lists the ``*.dist-info``
and ``*.egg-info`` folders of ``sys.path`` itself, reads each
``entry_points.txt`` (skipping those that name no wanted group before
parsing), and the ``METADATA`` of the few distributions that declare one.

It answers what ``importlib.metadata`` answers: distributions in ``sys.path``
order (the folder's listing order within one folder), one per normalized name
(the first one found wins), the same ``entry_points.txt`` syntax and
``module:attr`` loading.  Where it could not, it asks ``importlib.metadata``
itself: a zip or egg on ``sys.path``, or a ``sys.meta_path`` finder other than
the standard path finder that can list distributions.
"""
from __future__ import annotations

import importlib
import os
import re
import sys
from typing import Any, Iterable

from nnrt_core.record import FrozenRecord

__all__ = ["Dist", "EntryPointInfo", "entry_points", "installed_distributions"]

_VALUE = re.compile(r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$")


class Dist(FrozenRecord):
    """The distribution an entry point comes from (name and version as its metadata says)."""

    __slots__ = ("name", "version")
    name: str
    version: str

    def __init__(self, name: str, version: str) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "version", version)


class EntryPointInfo(FrozenRecord):
    """One entry point: what ``importlib.metadata.EntryPoint`` holds and does
    (``dist`` is not compared)."""

    __slots__ = ("name", "value", "group", "dist")
    name: str
    value: str
    group: str
    dist: Dist | None

    def __init__(self, name: str, value: str, group: str, dist: Dist | None = None) -> None:
        for k, v in (("name", name), ("value", value), ("group", group), ("dist", dist)):
            object.__setattr__(self, k, v)

    def _key(self) -> tuple[Any, ...]:
        return self.name, self.value, self.group

    def load(self) -> Any:
        """Import the module and return the attribute the value names (the module without one)."""
        match = _VALUE.match(self.value)
        if match is None:
            raise ValueError(f"entry point {self.name!r} has an invalid value {self.value!r}")
        obj: Any = importlib.import_module(match.group("module"))
        for part in filter(None, (match.group("attr") or "").split(".")):
            obj = getattr(obj, part)
        return obj


def entry_points(groups: Iterable[str]) -> list[EntryPointInfo]:
    """Every entry point of ``groups`` in the installed distributions (see module docstring)."""
    groups = tuple(groups)
    if not _plain_path_finders():
        return _from_importlib(groups)
    found: list[EntryPointInfo] = []
    seen: set[str] = set()
    for entry in sys.path:
        if not isinstance(entry, str):  # importlib's path finder skips these too
            continue
        folder = entry or "."
        if not os.path.isdir(folder):
            if os.path.exists(folder):  # a zip archive or an egg: importlib.metadata reads those
                return _from_importlib(groups)
            continue
        try:
            with os.scandir(folder) as it:
                names = [e.name for e in it]
        except OSError:
            continue
        for name in names:
            low = name.lower()
            if low.endswith(".egg"):
                return _from_importlib(groups)
            if not low.endswith((".dist-info", ".egg-info")):
                continue
            key = _normalize(_name_from_stem(name))
            if key in seen:
                continue
            seen.add(key)
            found += _read_dist(os.path.join(folder, name), groups)
    return found


def installed_distributions() -> list[str] | None:
    """The ``*.dist-info`` / ``*.egg-info`` folder names of ``sys.path`` in
    order (they carry each distribution's version): what is installed, read
    without opening a file; ``None`` where :func:`entry_points` would ask
    ``importlib.metadata`` (a zip or egg on the path, another finder)."""
    if not _plain_path_finders():
        return None
    out: list[str] = []
    for entry in sys.path:
        if not isinstance(entry, str):
            continue
        folder = entry or "."
        if not os.path.isdir(folder):
            if os.path.exists(folder):
                return None
            continue
        try:
            with os.scandir(folder) as it:
                names = sorted(e.name for e in it)
        except OSError:
            continue
        for name in names:
            low = name.lower()
            if low.endswith(".egg"):
                return None
            if low.endswith((".dist-info", ".egg-info")):
                out.append(name)
    return out


def _plain_path_finders() -> bool:
    """True when the standard path finder is the only ``sys.meta_path`` entry that lists distributions."""
    from importlib.machinery import PathFinder

    return all(f is PathFinder or not hasattr(f, "find_distributions") for f in sys.meta_path)


def _read_dist(path: str, groups: tuple[str, ...]) -> list[EntryPointInfo]:
    text = _read_text(os.path.join(path, "entry_points.txt"))
    if text is None or not any(f"[{g}]" in text for g in groups):
        return []
    dist = _dist_of(path)
    out = []
    section = None
    for line in map(str.strip, text.splitlines()):
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
            continue
        if section in groups:
            name, _, value = line.partition("=")
            out.append(EntryPointInfo(name.strip(), value.strip(), section, dist))
    return out


def _dist_of(path: str) -> Dist:
    """Name and version from ``METADATA`` (``PKG-INFO`` for an egg-info) headers."""
    text = _read_text(os.path.join(path, "METADATA")) or _read_text(os.path.join(path, "PKG-INFO")) or ""
    headers: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break  # the body starts
        key, sep, value = line.partition(":")
        if sep and not key.startswith((" ", "\t")):
            headers.setdefault(key.strip().lower(), value.strip())
    return Dist(headers.get("name", ""), headers.get("version", ""))


def _read_text(path: str) -> str | None:
    """The file's text, ``None`` when it is missing or not UTF-8 (raw ``os``
    calls: half the time of ``open()``, for ~100 small files per scan)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    finally:
        os.close(fd)


def _name_from_stem(stem: str) -> str:
    """``foo-3.0.dist-info`` -> ``foo`` (as ``importlib.metadata`` reads it)."""
    base, _ = os.path.splitext(stem)
    name, _, _ = base.partition("-")
    return name


def _normalize(name: str) -> str:
    """PEP 503's name (runs of ``-_.`` as one separator, lower case), with ``_``."""
    out = name.lower().replace("-", "_").replace(".", "_")
    while "__" in out:
        out = out.replace("__", "_")
    return out


def _from_importlib(groups: tuple[str, ...]) -> list[EntryPointInfo]:
    from importlib import metadata

    found = metadata.entry_points()
    out = []
    for g in groups:
        for ep in found.select(group=g):
            d = getattr(ep, "dist", None)
            dist = Dist(getattr(d, "name", "") or "", getattr(d, "version", "") or "") if d is not None else None
            out.append(EntryPointInfo(ep.name, ep.value, ep.group, dist))
    return out
