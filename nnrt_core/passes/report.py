"""What a pass-manager run did to a graph (:class:`PassReport`), apart from
the passes themselves: compiled session files store it and read it back
without importing a pass."""
from __future__ import annotations

from typing import Any

from nnrt_core.passes.base import PassResult
from nnrt_core.record import Record

__all__ = ["PassReport", "PassSummary"]


class PassSummary(Record):
    """One pass's changes summed over the manager's iterations."""

    __slots__ = ("name", "level", "rewrites", "nodes_removed", "nodes_added", "seconds", "notes")
    name: str
    level: str
    rewrites: int
    nodes_removed: int
    nodes_added: int
    seconds: float
    notes: list[str]

    def __init__(self, name: str, level: str, rewrites: int = 0, nodes_removed: int = 0, nodes_added: int = 0,
                 seconds: float = 0.0, notes: list[str] | None = None) -> None:
        self.name, self.level, self.rewrites, self.nodes_removed = name, level, rewrites, nodes_removed
        self.nodes_added, self.seconds = nodes_added, seconds
        self.notes = [] if notes is None else notes

    def add(self, r: PassResult, seconds: float) -> None:
        self.rewrites += r.rewrites
        self.nodes_removed += r.nodes_removed
        self.nodes_added += r.nodes_added
        self.seconds += seconds
        room = PassResult.MAX_NOTES - len(self.notes)
        self.notes.extend(r.notes[:max(room, 0)])

    def to_dict(self) -> dict[str, Any]:
        return dict(self.as_dict(), notes=list(self.notes))


class PassReport(Record):
    """What a :class:`PassManager` run did to a graph."""

    __slots__ = ("level", "nodes_before", "nodes_after", "ops_before", "ops_after", "iterations", "seconds", "passes")
    level: str
    nodes_before: int
    nodes_after: int
    ops_before: dict[str, int]
    ops_after: dict[str, int]
    iterations: int
    seconds: float
    passes: dict[str, PassSummary]

    def __init__(self, level: str, nodes_before: int = 0, nodes_after: int = 0,
                 ops_before: dict[str, int] | None = None, ops_after: dict[str, int] | None = None,
                 iterations: int = 0, seconds: float = 0.0, passes: dict[str, PassSummary] | None = None) -> None:
        self.level, self.nodes_before, self.nodes_after, self.iterations = level, nodes_before, nodes_after, iterations
        self.ops_before = {} if ops_before is None else ops_before
        self.ops_after = {} if ops_after is None else ops_after
        self.seconds, self.passes = seconds, {} if passes is None else passes

    def rewrites(self, name: str) -> int:
        """Rewrites made by the pass called ``name`` (0 if it did not run)."""
        s = self.passes.get(name)
        return 0 if s is None else s.rewrites

    def to_dict(self) -> dict[str, Any]:
        return {"level": self.level, "nodes_before": self.nodes_before, "nodes_after": self.nodes_after,
                "ops_before": dict(self.ops_before), "ops_after": dict(self.ops_after),
                "iterations": self.iterations, "seconds": self.seconds,
                "passes": {k: v.to_dict() for k, v in self.passes.items()}}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "PassReport":
        passes = {k: PassSummary(**v) for k, v in d.get("passes", {}).items()}
        return cls(d.get("level", "none"), d.get("nodes_before", 0), d.get("nodes_after", 0),
                   dict(d.get("ops_before", {})), dict(d.get("ops_after", {})), d.get("iterations", 0),
                   d.get("seconds", 0.0), passes)

    def summary(self) -> str:
        """A few lines for people: node counts and each pass that changed something."""
        lines = [f"optimization level {self.level}: {self.nodes_before} -> {self.nodes_after} nodes "
                 f"({self.iterations} iteration(s), {self.seconds * 1e3:.0f} ms)"]
        for s in self.passes.values():
            if s.rewrites:
                lines.append(f"  {s.name:<34} {s.rewrites:>5} rewrite(s)  -{s.nodes_removed} +{s.nodes_added} nodes")
        return "\n".join(lines)
