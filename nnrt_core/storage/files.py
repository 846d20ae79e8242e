"""Atomic file writes: readers never see a half-written file."""
from __future__ import annotations

import os
import stat
import time
from pathlib import Path

__all__ = ["remove_stale_temporaries", "user_cache_file", "write_atomic"]

#: the folder of nnrt's per-user caches (capability probes of the backends); unset:
#: ``$XDG_CACHE_HOME/nnrt``, else ``~/.cache/nnrt``
ENV_CACHE_DIR = "NNRT_CACHE_DIR"


def user_cache_file(prefix: str, version: str) -> Path:
    """``<cache folder>/<prefix>-<version>.json`` (the version made file-name safe):
    the folder is ``$NNRT_CACHE_DIR``, else ``$XDG_CACHE_HOME/nnrt``, else ``~/.cache/nnrt``."""
    base = os.environ.get(ENV_CACHE_DIR)
    if base:
        root = Path(base)
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        root = (Path(xdg) if xdg else Path.home() / ".cache") / "nnrt"
    safe = "".join(c if c.isalnum() or c in ".-_+" else "_" for c in version)
    return root / f"{prefix}-{safe}.json"


def write_atomic(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a unique temporary file and an
    atomic rename, so readers never see a half-written file."""
    import tempfile  # with shutil, random, bz2, lzma: not for sessions that only read files

    p = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return p


def remove_stale_temporaries(directory: str | os.PathLike, marker: str, max_age: float) -> list[str]:
    """Delete the temporary files :func:`write_atomic` left in ``directory``
    for targets whose name contains ``marker`` (a writer killed mid-write)
    once they are older than ``max_age`` seconds: a younger one may be
    another process's write in progress.  Only regular files named
    ``.<target>.<random>.tmp`` are touched; errors are ignored (another
    process may clean at the same time).  Returns the names removed."""
    removed = []
    now = time.time()
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for e in entries:
        name = e.name
        if not (name.startswith(".") and name.endswith(".tmp") and marker in name):
            continue
        try:
            st = e.stat(follow_symlinks=False)
            if stat.S_ISREG(st.st_mode) and now - st.st_mtime > max_age:
                os.unlink(e.path)
                removed.append(name)
        except OSError:
            continue
    return removed
