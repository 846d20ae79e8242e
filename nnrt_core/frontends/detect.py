"""Which frontend reads a model source (no frontend package imported here)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["TFLITE_IDENTIFIER", "is_tflite_source"]

#: the flatbuffer file identifier of TFLite models, at bytes 4..8
TFLITE_IDENTIFIER = b"TFL3"


def is_tflite_source(source: Any) -> bool:
    """True for bytes with the ``TFL3`` identifier at bytes 4..8 and for a path
    ending in ``.tflite`` or naming a regular file with that identifier."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return len(source) >= 8 and bytes(source[4:8]) == TFLITE_IDENTIFIER
    if isinstance(source, (str, os.PathLike)):
        p = Path(source)
        if p.suffix.lower() == ".tflite":
            return True
        if p.suffix.lower() == ".onnx":
            return False
        try:
            if p.is_file():
                with open(p, "rb") as f:
                    head = f.read(8)
                return len(head) == 8 and head[4:8] == TFLITE_IDENTIFIER
        except OSError:
            return False
    return False
