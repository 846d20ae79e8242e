"""The staged build: ``compile_model(model, config, registry) -> CompiledModel``
(select backends -> optimize -> place -> partition -> compile with fallback ->
explain), and loading a compiled model from a session file or the cache."""
from __future__ import annotations

from nnrt_core.compiler.build import compile_model
from nnrt_core.compiler.load import load_model
from nnrt_core.compiler.model import CompiledModel, EventLog, PartitionInfo

__all__ = ["CompiledModel", "EventLog", "PartitionInfo", "compile_model", "load_model"]
