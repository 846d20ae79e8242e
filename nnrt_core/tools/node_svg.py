"""The per-node placement picture (``nnrt partition --svg-nodes``): every node, coloured by backend.

One row per dependency level, partition-crossing edges dashed, a tooltip per
node (name, op, backend, partition, reason).  It grows with the model (one
row per level); the partition-level picture (:mod:`nnrt_core.tools.partition_svg`)
is the one that fits a screen.
"""
from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING
from xml.sax.saxutils import escape, quoteattr

from nnrt_core.errors import SessionFileError
from nnrt_core.tools.svg_style import backend_colors, svg_open

if TYPE_CHECKING:
    from nnrt_core.ir import Graph
    from nnrt_core.session import Session

__all__ = ["node_svg"]

NODE_W, NODE_H, GAP_X, GAP_Y, MARGIN = 118, 26, 14, 30, 20


def _layers(graph: "Graph") -> tuple[dict[str, int], dict[str, list[str]]]:
    """node -> level (longest path from the inputs) and node -> producer nodes."""
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


def _columns(graph: "Graph", level: dict[str, int], preds: dict[str, list[str]]) -> tuple[dict[str, float], int]:
    """node -> slot in its row (barycentre ordering against the row above), and the widest row."""
    rows: dict[int, list[str]] = {}
    for n in graph.nodes:
        rows.setdefault(level[n.name], []).append(n.name)
    x_of: dict[str, float] = {}
    width_slots = max((len(r) for r in rows.values()), default=1)
    for lv in sorted(rows):
        names = rows[lv]
        names.sort(key=lambda n: sum(x_of.get(p, 0.0) for p in preds[n]) / len(preds[n]) if preds[n] else 0.0)
        offset = (width_slots - len(names)) / 2
        for i, n in enumerate(names):
            x_of[n] = offset + i
    return x_of, width_slots


def _legend(sess: "Session", colors: dict[str, str]) -> list[str]:
    counts = Counter(r.backend for r in sess.placement_report)
    parts = Counter(p.backend for p in sess.partitions)
    out = []
    for i, (backend, color) in enumerate(colors.items()):
        y = MARGIN + 22 * i
        out.append(f'<rect x="{MARGIN}" y="{y}" width="16" height="14" fill="{color}" stroke="#333" '
                   f'stroke-width="0.6"/><text x="{MARGIN + 22}" y="{y + 11}">{escape(backend)}: '
                   f'{counts[backend]} node(s), {parts[backend]} partition(s)</text>')
    y = MARGIN + 22 * len(colors)
    out.append(f'<line x1="{MARGIN}" y1="{y + 7}" x2="{MARGIN + 16}" y2="{y + 7}" stroke="#d62728" '
               f'stroke-width="1.6" stroke-dasharray="5,3"/><text x="{MARGIN + 22}" y="{y + 11}">'
               f'tensor crossing a partition boundary</text>')
    return out


def node_svg(sess: "Session", *, title: str | None = None) -> str:
    """An SVG of every node of the session's graph, coloured by backend;
    :class:`SessionFileError` for a session loaded from a compiled file
    (it has no graph to draw; the partition picture needs none)."""
    graph = sess.graph
    if not graph.nodes and sess.placement_report:
        raise SessionFileError("a session loaded from a compiled file has no graph to draw node by node; "
                               "the partition picture (--svg) draws it from its partitions")
    report = {r.node: r for r in sess.placement_report}
    level, preds = _layers(graph)
    x_of, width_slots = _columns(graph, level, preds)
    colors = backend_colors(p.backend for p in sess.partitions)
    top = MARGIN + 22 * (len(colors) + 1) + 10
    width = int(max(MARGIN * 2 + width_slots * (NODE_W + GAP_X), 420))
    height = int(top + (max(level.values(), default=0) + 1) * (NODE_H + GAP_Y) + MARGIN)

    def pos(n: str) -> tuple[float, float]:
        return MARGIN + x_of[n] * (NODE_W + GAP_X), top + level[n] * (NODE_H + GAP_Y)

    out = svg_open(width, height, width, height, title or graph.name or "model")
    for n in graph.nodes:  # edges first, under the nodes
        x1, y1 = pos(n.name)
        for p in preds[n.name]:
            x0, y0 = pos(p)
            cross = report[p].partition != report[n.name].partition
            style = 'stroke="#d62728" stroke-width="1.6" stroke-dasharray="5,3"' if cross else \
                'stroke="#999" stroke-width="1"'
            out.append(f'<line x1="{x0 + NODE_W / 2:.1f}" y1="{y0 + NODE_H:.1f}" x2="{x1 + NODE_W / 2:.1f}" '
                       f'y2="{y1:.1f}" {style}/>')
    for n in graph.nodes:
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
    out += _legend(sess, colors)
    out.append("</svg>")
    return "\n".join(out)
