"""Seeing a placement: the partition table and an SVG of the graph.

``partition_rows`` / ``format_partition_table`` give, per partition, its
backend, node count, op types, boundary tensors and estimated cost (the
``estimated_ms`` that ``Session.partitions`` carries).  ``placement_svg``
draws the graph with its own layered layout (no graphviz): one row per
dependency level, nodes coloured by backend, partition-crossing edges dashed,
a legend, and a tooltip per node (name, op, backend, partition, reason).
"""
from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any
from xml.sax.saxutils import escape, quoteattr

if TYPE_CHECKING:
    from nnrt_core.session import Session

__all__ = ["partition_rows", "format_partition_table", "placement_svg", "write_placement_svg", "BACKEND_COLORS"]

#: fill colours for backends, in order of first appearance
BACKEND_COLORS = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
                  "#9c755f", "#bab0ac")
NODE_W, NODE_H, GAP_X, GAP_Y, MARGIN = 118, 26, 14, 30, 20


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


def _layers(sess: "Session") -> tuple[dict[str, int], dict[str, list[str]]]:
    """node -> level (longest path from the inputs) and node -> producer nodes."""
    graph = sess.graph
    producer_of: dict[str, str] = {}
    for n in graph.nodes:
        for v in n.outputs:
            producer_of[v.name] = n.name
    level: dict[str, int] = {}
    preds: dict[str, list[str]] = {}
    for n in graph.nodes:  # topological order
        ps = list(dict.fromkeys(producer_of[v.name] for v in n.all_inputs() if v.name in producer_of
                                and producer_of[v.name] != n.name))
        preds[n.name] = ps
        level[n.name] = 1 + max((level[p] for p in ps), default=-1)
    return level, preds


def placement_svg(sess: "Session", *, title: str | None = None) -> str:
    """An SVG of the session's graph, nodes coloured by backend."""
    report = {r.node: r for r in sess.placement_report}
    level, preds = _layers(sess)
    rows: dict[int, list[str]] = {}
    for n in sess.graph.nodes:
        rows.setdefault(level[n.name], []).append(n.name)
    x_of: dict[str, float] = {}
    width_slots = max((len(r) for r in rows.values()), default=1)
    for lv in sorted(rows):  # barycentre ordering against the row above, to shorten edges
        names = rows[lv]
        names.sort(key=lambda n: sum(x_of.get(p, 0.0) for p in preds[n]) / len(preds[n]) if preds[n] else 0.0)
        offset = (width_slots - len(names)) / 2
        for i, n in enumerate(names):
            x_of[n] = offset + i
    colors: dict[str, str] = {}
    for p in sess.partitions:
        colors.setdefault(p.backend, BACKEND_COLORS[len(colors) % len(BACKEND_COLORS)])
    legend_h = 22 * (len(colors) + 1)
    top = MARGIN + legend_h + 10
    width = int(max(MARGIN * 2 + width_slots * (NODE_W + GAP_X), 420))
    height = int(top + (max(rows, default=0) + 1) * (NODE_H + GAP_Y) + MARGIN)

    def pos(n: str) -> tuple[float, float]:
        return MARGIN + x_of[n] * (NODE_W + GAP_X), top + level[n] * (NODE_H + GAP_Y)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
           f'<title>{escape(title or sess.graph.name or "model")}</title>',
           '<rect width="100%" height="100%" fill="white"/>']
    for n in sess.graph.nodes:  # edges first, under the nodes
        x1, y1 = pos(n.name)
        for p in preds[n.name]:
            x0, y0 = pos(p)
            cross = report[p].partition != report[n.name].partition
            style = 'stroke="#d62728" stroke-width="1.6" stroke-dasharray="5,3"' if cross else \
                'stroke="#999" stroke-width="1"'
            out.append(f'<line x1="{x0 + NODE_W / 2:.1f}" y1="{y0 + NODE_H:.1f}" x2="{x1 + NODE_W / 2:.1f}" '
                       f'y2="{y1:.1f}" {style}/>')
    for n in sess.graph.nodes:
        r = report[n.name]
        x, y = pos(n.name)
        tip = f"{n.name} ({r.op_type}) on {r.backend}, partition {r.partition}: {r.reason}"
        label = r.op_type if len(r.op_type) <= 16 else r.op_type[:15] + "…"
        out.append(f'<g class="node" data-node={quoteattr(n.name)} data-backend={quoteattr(r.backend)} '
                   f'data-partition="{r.partition}"><title>{escape(tip)}</title>'
                   f'<rect x="{x:.1f}" y="{y:.1f}" width="{NODE_W}" height="{NODE_H}" rx="5" '
                   f'fill="{colors.get(r.backend, "#ccc")}" stroke="#333" stroke-width="0.6"/>'
                   f'<text x="{x + NODE_W / 2:.1f}" y="{y + NODE_H / 2 + 4:.1f}" text-anchor="middle" '
                   f'fill="white">{escape(label)}</text></g>')
    counts = Counter(r.backend for r in sess.placement_report)
    parts = Counter(p.backend for p in sess.partitions)
    for i, (backend, color) in enumerate(colors.items()):
        y = MARGIN + 22 * i
        out.append(f'<rect x="{MARGIN}" y="{y}" width="16" height="14" fill="{color}" stroke="#333" '
                   f'stroke-width="0.6"/><text x="{MARGIN + 22}" y="{y + 11}">{escape(backend)}: '
                   f'{counts[backend]} node(s), {parts[backend]} partition(s)</text>')
    y = MARGIN + 22 * len(colors)
    out.append(f'<line x1="{MARGIN}" y1="{y + 7}" x2="{MARGIN + 16}" y2="{y + 7}" stroke="#d62728" '
               f'stroke-width="1.6" stroke-dasharray="5,3"/><text x="{MARGIN + 22}" y="{y + 11}">'
               f'tensor crossing a partition boundary</text>')
    out.append("</svg>")
    return "\n".join(out)


def write_placement_svg(sess: "Session", path: str | os.PathLike, *, title: str | None = None) -> Path:
    """Write :func:`placement_svg` to ``path``; returns the path."""
    p = Path(path)
    p.write_text(placement_svg(sess, title=title), encoding="utf-8")
    return p
