"""Checksums for compiled-session files and device blobs.

They detect corruption (truncation, flipped bits, a half-written file), not
tampering: anyone who can write the cache directory can also write a valid
checksum, so a cryptographic hash buys nothing there (OpenHarmony NNRt uses
CRC16 for its compiled cache for the same reason).  New files use xxHash's
XXH3-128 (about 25 GB/s here against 1.8 GB/s for sha256, so a 51 MB
ResNet50 program is checked in 2 ms instead of 28 ms); files written by
older versions carry sha256 and are still read.
"""
from __future__ import annotations

from typing import Any

import xxhash

__all__ = ["ALGORITHMS", "DEFAULT_ALGORITHM", "digest", "hexdigest"]

DEFAULT_ALGORITHM = "xxh3_128"


def _sha256(data: bytes = b"") -> Any:
    """``hashlib.sha256``, imported on first use (OpenSSL's binding costs ~3 ms
    at import, and only files of older versions carry sha256)."""
    import hashlib

    return hashlib.sha256(data)


#: name -> hasher constructor (``update()`` / ``digest()``)
ALGORITHMS = {"xxh3_128": xxhash.xxh3_128, "sha256": _sha256}


def digest(*parts: Any, algorithm: str = DEFAULT_ALGORITHM) -> bytes:
    """The raw digest of ``parts`` (bytes-like objects) taken as one stream."""
    try:
        h = ALGORITHMS[algorithm]()
    except KeyError:
        raise ValueError(f"unknown checksum algorithm {algorithm!r}; known: {sorted(ALGORITHMS)}") from None
    for p in parts:
        h.update(p)
    return h.digest()


def hexdigest(*parts: Any, algorithm: str = DEFAULT_ALGORITHM) -> str:
    return digest(*parts, algorithm=algorithm).hex()
