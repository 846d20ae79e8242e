"""Per-node facts a backend derives at its capability check and may reuse
when it compiles the same nodes in the same placement (``shared_facts``).

``place_and_compile`` opens the scope around the capability checks, the
placement and the compiles; nothing changes the graph in between.  A backend
records ``remember(tag, node, value)`` and asks ``recall(tag, node)``; the
value comes back only for that very node object (the scope keeps the node
alive, so its ``id`` cannot be reused), never outside the scope (passes may
change nodes before placement; a compile called directly recomputes)."""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Iterator

from nnrt_core.ir import Node

__all__ = ["shared_facts", "remember", "recall"]

_scope: ContextVar["dict[tuple[str, int], tuple[Node, Any]] | None"] = ContextVar("nnrt_node_facts", default=None)


@contextmanager
def shared_facts() -> Iterator[None]:
    """Let the backends' per-node facts recorded inside be recalled inside."""
    token = _scope.set({})
    try:
        yield
    finally:
        _scope.reset(token)


def remember(tag: str, node: Node, value: Any) -> None:
    """Record ``value`` for ``node`` under ``tag`` (a no-op outside a scope)."""
    facts = _scope.get()
    if facts is not None:
        facts[(tag, id(node))] = (node, value)


def recall(tag: str, node: Node) -> Any:
    """What was remembered for this very ``node`` under ``tag``, else ``None``."""
    facts = _scope.get()
    if facts is None:
        return None
    hit = facts.get((tag, id(node)))
    return hit[1] if hit is not None and hit[0] is node else None
