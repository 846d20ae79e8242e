"""What every pass shares: levels, the context a pass runs in, its result."""
from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Callable, ClassVar, Sequence

from nnrt_core.errors import ConfigError
from nnrt_core.ir import Graph, Node
from nnrt_core.record import Record

if TYPE_CHECKING:  # pragma: no cover
    from nnrt_core.backend.base import Backend

__all__ = ["LEVELS", "level_rank", "PassContext", "PassResult", "Pass"]

#: optimization levels, weakest first (the names ONNX Runtime uses)
LEVELS = ("none", "basic", "extended", "all")

#: ``supports(fused_node, replaced_nodes)``: may the selected backends run ``fused_node``
#: wherever they would have run ``replaced_nodes``?
SupportCheck = Callable[[Node, Sequence[Node]], bool]


def level_rank(level: str) -> int:
    """Position of ``level`` in :data:`LEVELS` (``ConfigError`` if unknown)."""
    try:
        return LEVELS.index(level)
    except ValueError:
        raise ConfigError(f"optimization level must be one of {', '.join(LEVELS)}; got {level!r}") from None


class PassContext(Record):
    """What passes may use besides the graph.

    evaluator
        backend that evaluates constant sub-graphs (the NumPy backend); constant
        folding is skipped without one.
    supports
        asked before a pass introduces an op the original model did not have
        (fused contrib ops); ``None`` allows it.
    protected
        node names passes must leave in place (nodes pinned by the config).
    """

    __slots__ = ("evaluator", "supports", "protected")
    evaluator: "Backend | None"
    supports: SupportCheck | None
    protected: frozenset[str]

    def __init__(self, evaluator: "Backend | None" = None, supports: SupportCheck | None = None,
                 protected: frozenset[str] = frozenset()) -> None:
        self.evaluator, self.supports, self.protected = evaluator, supports, protected

    def may_rewrite(self, *nodes: Node) -> bool:
        if not self.protected:  # the common case: nothing pinned (asked for every node by every pass)
            return True
        return not any(n.name in self.protected for n in nodes)

    def backend_supports(self, fused: Node, replaced: Sequence[Node]) -> bool:
        return self.supports is None or self.supports(fused, replaced)

    def backend_supports_chain(self, fused: Node, chain: Sequence[Node]) -> bool:
        """As :meth:`backend_supports`, with the replaced nodes (a connected chain in graph order) probed
        together where the check can (``supports.chain``), one by one otherwise."""
        if self.supports is None:
            return True
        together = getattr(self.supports, "chain", None)
        return bool(together(fused, chain)) if callable(together) else self.supports(fused, chain)


class PassResult(Record):
    """What one run of a pass changed.

    ``rewrites`` counts pattern applications (a Conv+BN pair folded, a node
    removed...); ``nodes_removed``/``nodes_added`` the net effect on the node
    list; ``notes`` the first few rewrites in words.
    """

    __slots__ = ("name", "rewrites", "nodes_removed", "nodes_added", "notes")
    name: str
    rewrites: int
    nodes_removed: int
    nodes_added: int
    notes: list[str]

    MAX_NOTES: ClassVar[int] = 20

    def __init__(self, name: str, rewrites: int = 0, nodes_removed: int = 0, nodes_added: int = 0,
                 notes: list[str] | None = None) -> None:
        self.name, self.rewrites, self.nodes_removed, self.nodes_added = name, rewrites, nodes_removed, nodes_added
        self.notes = [] if notes is None else notes

    @property
    def changed(self) -> bool:
        return self.rewrites > 0

    def record(self, note: str, *, removed: int = 0, added: int = 0) -> None:
        """Count one rewrite."""
        self.rewrites += 1
        self.nodes_removed += removed
        self.nodes_added += added
        if len(self.notes) < self.MAX_NOTES:
            self.notes.append(note)


class Pass(abc.ABC):
    """A graph rewrite.  ``level`` is the lowest optimization level that runs
    it; ``run`` rewrites ``graph`` in place and says what it changed.

    Passes work on the top-level graph; they read sub-graphs only to respect
    the outer values those sub-graphs use.
    """

    name: ClassVar[str]
    level: ClassVar[str]
    description: ClassVar[str] = ""
    #: run only once the other passes reached a fixed point; if it changes the
    #: graph they run again (a few rounds at most)
    after_fixed_point: ClassVar[bool] = False
    #: the pass can change a graph only if, for each of these sets, some node
    #: of the graph has an op type in it; the pass manager skips it otherwise
    #: (a pass with side effects beyond its matches leaves this empty)
    requires_ops: ClassVar[tuple[frozenset[str], ...]] = ()
    #: a second run right after a run that changed the graph changes nothing
    #: (the pass manager does not run it again for its own changes)
    idempotent: ClassVar[bool] = False
    #: every rewrite deletes a node none of whose outputs is read, or an
    #: initializer nothing reads (nothing else changes)
    removes_only_unread: ClassVar[bool] = False
    #: whether a match can depend on how many readers a value has (sole-reader
    #: conditions...); False: deleting unread nodes cannot give the pass new
    #: matches, so the manager does not re-run it after such a pass
    counts_readers: ClassVar[bool] = True

    @abc.abstractmethod
    def run(self, graph: Graph, ctx: PassContext | None = None) -> PassResult: ...

    def result(self) -> PassResult:
        return PassResult(self.name)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} level={self.level}>"
