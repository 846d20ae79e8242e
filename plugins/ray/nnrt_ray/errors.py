"""``ErrorSink``: a small Ray actor the predictors report skipped rows to.
A batch that Ray retries after a worker died may report a row twice; the sink
keeps one record per row id."""
from __future__ import annotations

from typing import Any

import ray

__all__ = ["ErrorSink", "start_error_sink"]


class ErrorSink:
    """Bad-row records, one per row id, in the order first seen."""

    def __init__(self) -> None:
        self.records: dict[str, dict[str, Any]] = {}

    def add(self, records: list[dict[str, Any]]) -> int:
        for r in records:
            self.records.setdefault(str(r["row_id"]), r)
        return len(self.records)

    def get(self) -> list[dict[str, Any]]:
        return list(self.records.values())


def start_error_sink() -> Any:
    """An :class:`ErrorSink` actor (no CPU reserved; never restarted: a lost sink fails the job rather than forgetting rows)."""
    return ray.remote(num_cpus=0, max_restarts=0)(ErrorSink).remote()
