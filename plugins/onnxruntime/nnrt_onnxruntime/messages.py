"""Short texts of ONNX Runtime's errors for events and messages."""
from __future__ import annotations

__all__ = ["first_line"]


def first_line(e: BaseException | str) -> str:
    """The first line of an error's text (ORT's messages run over many lines), or its type's name."""
    text = str(e).strip()
    return text.splitlines()[0].strip() if text else type(e).__name__
