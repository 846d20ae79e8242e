"""The staged build: ``compile_model(model, config, registry) -> CompiledModel``
(select backends -> optimize -> place -> partition -> compile with fallback ->
explain), and loading a compiled model from a session file or the cache.

``load_model`` (the frontends) is imported on first use: a session loaded from
a compiled file never needs it."""
from __future__ import annotations

from typing import Any

from nnrt_core.compiler.build import compile_model
from nnrt_core.compiler.model import CompiledModel, EventLog, PartitionInfo

__all__ = ["CompiledModel", "EventLog", "PartitionInfo", "compile_model", "load_model"]


def __getattr__(name: str) -> Any:
    if name == "load_model":
        from nnrt_core.compiler.load import load_model

        return load_model
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
