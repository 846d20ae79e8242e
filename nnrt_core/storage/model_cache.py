"""The compiled-model cache (``ScheduleConfig.cache_dir`` + ``cache_version``).

A session built with a cache directory stores its compiled form (placement
plus every partition's ``serialize()`` bytes, in the session-file format of
:mod:`nnrt_core.storage.session_file`) under a key covering the model bytes, the
configuration, the nnrt and backend versions and the backends' device
profiles.  The next session with the same key loads it instead of compiling.

Rules (after OpenHarmony NNRt's compilation cache):

* cache written with an older ``cache_version`` -> rebuilt and rewritten;
* an entry with a newer ``cache_version`` than the config asks for, or in a
  newer session-file *format* -> not used and left as it is (it may belong to
  a newer nnrt or configuration); the session is built without the cache and
  reports a ``cache_disabled`` event naming the entry -- never a failed session;
* truncated, corrupted or checksum-mismatched files, and files with valid
  checksums whose records do not hold together (see
  :mod:`nnrt_core.storage.header_check`) -> detected, a warning, rebuilt and
  rewritten; never used.  The same for an entry its backends cannot load
  (:func:`nnrt_core.compiler.build.compile_model` catches that), and for an
  entry that is not a regular file or is too large, which is never read;
  the session reports a ``cache_rebuilt`` event;
* writes go through a unique temporary file and an atomic rename, so
  concurrent writers cannot corrupt an entry;
* a full disk or an I/O error while writing, a cache directory that is not
  writable (read-only) or cannot be created -> a warning and a
  ``cache_disabled`` event; the session runs without writing the cache (a
  read-only directory's entries are still read);
* a cache directory that is a file -> ``ConfigError`` (a configuration mistake);
* temporary files of writers killed mid-write (``.<entry>.<random>.tmp``)
  are removed when a process first opens the directory, once older than
  :data:`STALE_TMP_SECONDS` (a younger one may be a write in progress).
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from nnrt_core.errors import ConfigError, SessionFileError
from nnrt_core.logs import get_logger
from nnrt_core.storage.files import remove_stale_temporaries, write_atomic
from nnrt_core.storage.session_file import FORMAT_VERSION, NewerFormatError, SessionImage, decode, encode, read_bytes

__all__ = ["STALE_TMP_SECONDS", "ModelCache"]

log = get_logger("nnrt.cache")  # logging is imported by the first record that can be emitted

SUFFIX = ".nnrtc"
#: a temporary entry file older than this (seconds) is a dead writer's: removed on open
STALE_TMP_SECONDS = 3600.0
_cleaned: set[str] = set()  # directories this process removed stale temporaries from


class ModelCache:
    """One cache directory; entries are session files named by key."""

    def __init__(self, directory: str | os.PathLike, version: int) -> None:
        self.dir = Path(directory)
        self.version = version
        #: why entries cannot be written (``None``: they can); the session then runs without writing
        self.problem: str | None = None
        if self.dir.exists() and not self.dir.is_dir():
            raise ConfigError(f"cache_dir {str(self.dir)!r} is a file, expected a directory")
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            self.problem = f"cache_dir {str(self.dir)!r} cannot be created: {e}"
        else:
            if not os.access(self.dir, os.W_OK | os.X_OK):
                self.problem = f"cache_dir {str(self.dir)!r} is not writable"
        if self.problem is not None:
            log.warning("model cache: %s; running without writing the cache", self.problem)
        elif str(self.dir) not in _cleaned:
            _cleaned.add(str(self.dir))
            for name in remove_stale_temporaries(self.dir, SUFFIX + ".", STALE_TMP_SECONDS):
                log.info("model cache: removed %s, a temporary file of a writer that did not finish", name)

    @staticmethod
    def key(model_digest: str, config: dict[str, Any], backends: list[dict[str, Any]]) -> str:
        """The cache key: model digest + config + nnrt and backend versions + devices."""
        from nnrt_core.version import __version__

        cfg = {k: v for k, v in config.items() if k not in ("cache_dir", "cache_version")}
        blob = json.dumps({"model": model_digest, "config": cfg, "nnrt": __version__, "format": FORMAT_VERSION,
                           "backends": backends}, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:40]

    def path(self, key: str) -> Path:
        return self.dir / f"{key}{SUFFIX}"

    def load(self, key: str) -> tuple[SessionImage | None, str]:
        """(image, why) — the cached image, or ``None`` with the reason it is
        not usable ("miss", "stale", "corrupted: ...", "refused: ...", or
        "newer: ..." for an entry to leave alone).  An
        entry that is not a regular file (a directory, a FIFO, a link to a
        device) or is over ``MAX_FILE_BYTES`` is refused without reading it."""
        p = self.path(key)
        what = f"cache file {str(p)!r}"
        if not os.path.lexists(p):
            return None, "miss"
        try:
            data = read_bytes(p, what)
        except SessionFileError as e:
            log.warning("model cache: %s; rebuilding", e)
            return None, f"refused: {e}"
        try:
            image = decode(data, what=what)
        except NewerFormatError as e:
            log.warning("model cache: %s; building without the cache", e)
            return None, f"newer: {e}"
        except SessionFileError as e:
            log.warning("model cache: %s; rebuilding", e)
            return None, f"corrupted: {e}"
        got = image.meta.get("cache_version")
        if not isinstance(got, int):
            log.warning("model cache: %s has no cache version; rebuilding", p)
            return None, "corrupted: no cache version"
        if got > self.version:
            log.warning("model cache: %s has cache_version %d > %d; building without the cache", p, got, self.version)
            return None, (f"newer: written with cache_version {got}, newer than the configured cache_version "
                          f"{self.version}; raise cache_version or clear the cache")
        if got < self.version:
            log.info("model cache: %s has cache_version %d < %d; rebuilding", p, got, self.version)
            return None, "stale"
        return image, "hit"

    def store(self, key: str, image: SessionImage) -> str | None:
        """Write ``image``; returns ``None`` or the reason it was not written
        (the caller reports it; the session works without a cache)."""
        if self.problem is not None:
            return self.problem
        image.meta["cache_version"] = self.version
        try:
            data = encode(image)
        except (SessionFileError, TypeError, ValueError) as e:  # e.g. a plugin's blob of the wrong type
            return str(e)
        try:
            write_atomic(self.path(key), data)
        except OSError as e:  # full disk, permissions changed...
            return f"cannot write {str(self.path(key))!r}: {e}"
        return None
