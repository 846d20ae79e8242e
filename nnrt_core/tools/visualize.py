"""Seeing a placement: the partition table and the placement pictures.

``partition_rows`` / ``format_partition_table`` give, per partition, its
backend, node count, op types, boundary tensors and estimated cost (the
``estimated_ms`` that ``Session.partitions`` carries).  ``placement_svg``
draws the partition-level graph fitted to one screen
(:mod:`nnrt_core.tools.partition_svg`): a box per partition coloured by
backend, boundary tensors as labelled edges, a legend, the nodes in each
box's tooltip.  ``detail=True`` draws every node instead
(:mod:`nnrt_core.tools.node_svg`).
"""
from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nnrt_core.tools.node_svg import node_svg
from nnrt_core.tools.partition_svg import partition_svg
from nnrt_core.tools.svg_style import BACKEND_COLORS

if TYPE_CHECKING:
    from nnrt_core.session import Session

__all__ = ["partition_rows", "format_partition_table", "placement_svg", "write_placement_svg", "BACKEND_COLORS"]


def partition_rows(sess: "Session") -> list[dict[str, Any]]:
    """One dict per partition: index, backend, node_count, op_counts, inputs,
    outputs (boundary tensors), estimated_ms and estimate_source (or None)."""
    op_of = {r.node: r.op_type for r in sess.placement_report}
    rows = []
    for p in sess.partitions:
        rows.append({
            "index": p.index, "backend": p.backend, "node_count": len(p.nodes),
            "op_counts": dict(Counter(op_of.get(n, "?") for n in p.nodes)),
            "inputs": list(p.inputs), "outputs": list(p.outputs),
            "estimated_ms": p.details.get("estimated_ms"), "estimate_source": p.details.get("estimate_source"),
        })
    return rows


def _names(names: list[str], limit: int = 3) -> str:
    if not names:
        return "-"
    shown = ", ".join(names[:limit])
    return shown + (f" +{len(names) - limit}" if len(names) > limit else "")


def format_partition_table(sess: "Session") -> str:
    """The partition table as text (what ``nnrt partition`` prints)."""
    rows = partition_rows(sess)
    lines = [f"{'#':>3}  {'backend':<12}{'nodes':>6}  {'est. ms':>9}  {'source':<10}  {'op types':<36}  "
             f"boundary in -> out"]
    total = 0.0
    known = True
    for r in rows:
        ops = ", ".join(f"{k}x{v}" for k, v in sorted(r["op_counts"].items(), key=lambda kv: (-kv[1], kv[0])))
        if len(ops) > 36:
            ops = ops[:33] + "..."
        est = r["estimated_ms"]
        if est is None:
            known = False
        else:
            total += est
        lines.append(f"{r['index']:>3}  {r['backend']:<12}{r['node_count']:>6}  "
                     f"{'-' if est is None else f'{est:.3f}':>9}  {r['estimate_source'] or '-':<10}  {ops:<36}  "
                     f"{_names(r['inputs'])} -> {_names(r['outputs'])}")
    summary = f"{len(rows)} partition(s), {sum(r['node_count'] for r in rows)} node(s)"
    if known and rows:
        summary += f", estimated {total:.3f} ms per run (partitions only, without transfers)"
    lines.append(summary)
    return "\n".join(lines)


def placement_svg(sess: "Session", *, title: str | None = None, detail: bool = False) -> str:
    """The placement as SVG text: the partition-level graph fitted to one
    screen, or with ``detail=True`` every node (needs the session's graph)."""
    return node_svg(sess, title=title) if detail else partition_svg(sess, title=title)


def write_placement_svg(sess: "Session", path: str | os.PathLike, *, title: str | None = None,
                        detail: bool = False) -> Path:
    """Write :func:`placement_svg` to ``path``; returns the path."""
    p = Path(path)
    p.write_text(placement_svg(sess, title=title, detail=detail), encoding="utf-8")
    return p
