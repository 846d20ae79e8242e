"""The partition-level placement picture: one box per partition, boundary tensors as edges.

Boxes are coloured by backend and show the partition's node count, estimated
cost and most frequent op types; the tooltip (``<title>``) lists its nodes.
Edges carry the boundary tensors' names and sizes (``?`` when dynamic).  The
layout (:mod:`nnrt_core.tools.partition_layout`) wraps into bands so the
picture fits one screen; an edge into another band is drawn as a short
connector on both ends naming the box at the other end.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING
from xml.sax.saxutils import escape, quoteattr

from nnrt_core.tools.partition_graph import BoundaryEdge, PartitionBox, PartitionGraph, partition_graph
from nnrt_core.tools.partition_layout import BoxGeometry, Layout, layered_layout
from nnrt_core.tools.svg_legend import legend_svg
from nnrt_core.tools.svg_style import backend_colors, clip, format_bytes, svg_open, text_color

if TYPE_CHECKING:
    from nnrt_core.session import Session

__all__ = ["partition_svg", "edge_label", "SCREEN", "TOOLTIP_NODES"]

#: the size the picture is fitted to (pixels, at 100 %)
SCREEN = (1920, 1080)
#: node names listed in a partition's tooltip before "… and N more"
TOOLTIP_NODES = 40
MARGIN = 16
GEOMETRY = BoxGeometry()
IO_FILL = "#eeeeee"
_ARROW = ('<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerUnits="userSpaceOnUse" '
          'markerWidth="8" markerHeight="8" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>')


def _tooltip(box: PartitionBox, graph: PartitionGraph) -> str:
    if not box.is_partition:
        return f"model {box.label} ({len(box.nodes)}): " + ", ".join(box.nodes)
    est = "" if box.estimated_ms is None else f", estimated {box.estimated_ms:.3f} ms"
    lines = [f"partition {box.label} on {box.backend}: {len(box.nodes)} node(s){est}",
             "ops: " + ", ".join(f"{op}×{n}" for op, n in box.op_counts)]
    ins = [t for e in graph.edges if e.target == box.key for t, _ in e.tensors]
    outs = [t for e in graph.edges if e.source == box.key for t, _ in e.tensors]
    lines.append(f"in: {', '.join(ins) or '-'}; out: {', '.join(outs) or '-'}")
    lines += [f"! {m}" for m in box.events]
    lines.append("nodes:")
    lines += [f"  {n}" for n in box.nodes[:TOOLTIP_NODES]]
    if len(box.nodes) > TOOLTIP_NODES:
        lines.append(f"  … and {len(box.nodes) - TOOLTIP_NODES} more")
    return "\n".join(lines)


def _box_lines(box: PartitionBox, sizes: dict[str, str]) -> list[str]:
    if not box.is_partition:
        names = [f"{n} · {sizes.get(n, '?')}" for n in box.nodes[:2]]
        more = [f"+{len(box.nodes) - 2} more"] if len(box.nodes) > 2 else []
        return [f"{box.label} ({len(box.nodes)})", *names, *more][:3]
    est = "" if box.estimated_ms is None else f" · {box.estimated_ms:.3f} ms"
    ops = " · ".join(f"{op} {n}" for op, n in box.op_counts[:4])
    if len(box.op_counts) > 4:
        ops += f" · +{len(box.op_counts) - 4}"
    return [f"{box.label} {box.backend}", f"{len(box.nodes)} node{'s' if len(box.nodes) != 1 else ''}{est}", ops]


def _box_svg(box: PartitionBox, x: float, y: float, fill: str, graph: PartitionGraph, sizes: dict[str, str]) -> str:
    g = GEOMETRY
    ink = text_color(fill)
    kind = "partition" if box.is_partition else "io"
    attrs = f'class="{kind}" data-key={quoteattr(box.key)} data-nodes="{len(box.nodes)}"'
    if box.is_partition:
        attrs += f' data-partition="{box.key[1:]}" data-backend={quoteattr(box.backend or "")}'
    stroke = 'stroke="#d62728" stroke-width="2.5"' if box.events else 'stroke="#333" stroke-width="0.8"'
    out = [f'<g {attrs}><title>{escape(_tooltip(box, graph))}</title>',
           f'<rect x="{x:.1f}" y="{y:.1f}" width="{g.width:.0f}" height="{g.height:.0f}" rx="6" fill="{fill}" '
           f'{stroke}/>']
    for i, line in enumerate(_box_lines(box, sizes)):
        weight = ' font-weight="bold" font-size="12"' if i == 0 else ' font-size="10"'
        out.append(f'<text x="{x + 8:.1f}" y="{y + 17 + i * 16:.1f}" fill="{ink}"{weight}>'
                   f'{escape(clip(line, 25 if i == 0 else 30))}</text>')
    if box.events:
        out.append(f'<circle cx="{x + g.width - 10:.1f}" cy="{y + 10:.1f}" r="7" fill="#d62728"/>'
                   f'<text x="{x + g.width - 10:.1f}" y="{y + 14:.1f}" fill="white" font-weight="bold" '
                   f'text-anchor="middle">!</text>')
    out.append("</g>")
    return "".join(out)


def edge_label(edge: BoundaryEdge, limit: int) -> str:
    """``name · size`` (or ``N tensors · size``) in at most ``limit`` characters."""
    size = format_bytes(edge.total_bytes)
    name = edge.tensors[0][0] if len(edge.tensors) == 1 else f"{len(edge.tensors)} tensors"
    if len(name) + len(size) + 3 > limit and len(edge.tensors) > 1:
        name = f"{len(edge.tensors)}×"
    return f"{clip(name, max(limit - len(size) - 3, 4))} · {size}"


def _attach_order(edge: BoundaryEdge, other: str, layout: Layout) -> tuple[int, float, int]:
    """Sort key of an edge on a box side: by the row of the box at its other
    end, edges that skip columns (routed above the row) first."""
    far = getattr(edge, other)
    span = abs(layout.column_of[edge.target] - layout.column_of[edge.source])
    return layout.band_of[far], layout.positions[far][1], -span


def _skip_path(x0: float, y0: float, x1: float, y1: float, above: float) -> str:
    """A path that leaves right, runs along ``above`` (the gap over the
    boxes it skips) and comes down into the target's left side."""
    return (f"M{x0:.1f},{y0:.1f} C{x0 + 12:.1f},{y0:.1f} {x0 + 8:.1f},{above:.1f} {x0 + 24:.1f},{above:.1f} "
            f"H{x1 - 24:.1f} C{x1 - 8:.1f},{above:.1f} {x1 - 12:.1f},{y1:.1f} {x1:.1f},{y1:.1f}")


def _skip_height(edge: BoundaryEdge, layout: Layout, origin_y: float) -> float:
    """The y of the gap just above every box from the edge's source to its target column."""
    lo, hi = layout.column_of[edge.source], layout.column_of[edge.target]
    top = min(y for k, (_, y) in layout.positions.items() if lo <= layout.column_of[k] <= hi
              and layout.band_of[k] == layout.band_of[edge.source])
    return origin_y + top - GEOMETRY.gap_y * 0.45


def _attachments(graph: PartitionGraph, layout: Layout) -> dict[tuple[int, str], float]:
    """(edge number, 'out' | 'in') -> y offset on the box side, spread so
    that edges leave and enter a box at distinct heights in the order of the
    boxes at their other ends."""
    offsets: dict[tuple[int, str], float] = {}
    for side, own, other in (("out", "source", "target"), ("in", "target", "source")):
        by_box: dict[str, list[int]] = {}
        for i, e in enumerate(graph.edges):
            by_box.setdefault(getattr(e, own), []).append(i)
        for ids in by_box.values():
            ids.sort(key=lambda i: _attach_order(graph.edges[i], other, layout))
            for slot, i in enumerate(ids):
                offsets[(i, side)] = GEOMETRY.height * (slot + 1) / (len(ids) + 1)
    return offsets


def _edge_svg(i: int, edge: BoundaryEdge, graph: PartitionGraph, layout: Layout,
              offsets: dict[tuple[int, str], float], origin: tuple[float, float]) -> tuple[str, str]:
    """The edge's group (tooltip and line) and its label, drawn later over all lines."""
    g = GEOMETRY
    (sx, sy), (tx, ty) = layout.positions[edge.source], layout.positions[edge.target]
    x0, y0 = origin[0] + sx + g.width, origin[1] + sy + offsets[(i, "out")]
    x1, y1 = origin[0] + tx, origin[1] + ty + offsets[(i, "in")]
    total = edge.total_bytes
    width = 1.2 if total is None else 1.2 + min(2.3, math.log10(total + 1) / 3)
    style = f'fill="none" stroke="#666" stroke-width="{width:.1f}"' + (' stroke-dasharray="4,3"' if total is None else "")
    names = ",".join(t for t, _ in edge.tensors)
    tip = "\n".join(f"{t}: {format_bytes(b)}" for t, b in edge.tensors)
    src, dst = graph.boxes[edge.source].label, graph.boxes[edge.target].label
    out = [f'<g class="edge" data-source={quoteattr(edge.source)} data-target={quoteattr(edge.target)} '
           f'data-tensors={quoteattr(names)}><title>{escape(f"{src} -> {dst}" + chr(10) + tip)}</title>']
    chars = int((g.gap_x - 14) / 5.2)
    if layout.band_of[edge.source] != layout.band_of[edge.target]:  # connectors instead of a line across bands
        out.append(f'<path d="M{x0:.1f},{y0:.1f} h16" {style}/><text x="{x0 + 19:.1f}" y="{y0 + 3:.1f}" '
                   f'font-size="9" fill="#444">→ {escape(dst)}</text><circle cx="{x1 - 24:.1f}" cy="{y1:.1f}" '
                   f'r="2.5" fill="#666"/><path d="M{x1 - 24:.1f},{y1:.1f} H{x1:.1f}" {style} marker-end="url(#arrow)"/>')
        label, anchor, at = f"{src}: {edge_label(edge, chars - len(src) - 2)}", "end", (x1 - 4, y1 - 4)
    elif layout.column_of[edge.target] - layout.column_of[edge.source] > 1:  # over the boxes it skips
        above = _skip_height(edge, layout, origin[1])
        out.append(f'<path d="{_skip_path(x0, y0, x1, y1, above)}" {style} marker-end="url(#arrow)"/>')
        label, anchor, at = edge_label(edge, chars), "end", (x1 - 30, above - 3)
    else:
        dx = min(g.gap_x * 0.7, (x1 - x0) / 2)
        out.append(f'<path d="M{x0:.1f},{y0:.1f} C{x0 + dx:.1f},{y0:.1f} {x1 - dx:.1f},{y1:.1f} {x1:.1f},{y1:.1f}" '
                   f'{style} marker-end="url(#arrow)"/>')
        label, anchor, at = edge_label(edge, chars), "middle", ((x0 + x1) / 2, (y0 + y1) / 2 - 3)
    out.append("</g>")
    text = (f'<text class="edge-label" x="{at[0]:.1f}" y="{at[1]:.1f}" font-size="9" text-anchor="{anchor}" '
            f'fill="#222" stroke="white" stroke-width="3" paint-order="stroke">{escape(label)}</text>')
    return "".join(out), text


def partition_svg(sess: "Session", *, title: str | None = None,
                  screen: tuple[int, int] = SCREEN) -> str:
    """The partition-level picture of ``sess`` as SVG text, fitted to ``screen``."""
    graph = partition_graph(sess)
    colors = backend_colors(b.backend for b in graph.boxes.values() if b.backend)
    name = title or sess.graph.name or "model"
    legend, legend_h = legend_svg(graph, colors, name, MARGIN, width=max(screen[0] - 2 * MARGIN, 600))
    order = list(graph.boxes)
    layout = layered_layout(order, graph.predecessors(), max_width=screen[0] - 2 * MARGIN - GEOMETRY.gap_x - 40,
                            max_height=screen[1] - 2 * MARGIN - legend_h, geometry=GEOMETRY)
    pad_left, pad_right = (GEOMETRY.gap_x, 40) if layout.bands > 1 else (0, 0)  # room for the connectors
    view_w = max(layout.width + pad_left + pad_right, 600) + 2 * MARGIN
    view_h = layout.height + legend_h + 2 * MARGIN
    scale = min(1.0, screen[0] / view_w, screen[1] / view_h)
    origin = (MARGIN + pad_left, MARGIN + legend_h)
    sizes = {t: format_bytes(b) for e in graph.edges for t, b in e.tensors}
    out = svg_open(view_w * scale, view_h * scale, view_w, view_h, name) + [_ARROW, *legend]
    for top in layout.band_tops[1:]:  # where the picture wraps
        y = origin[1] + top - GEOMETRY.band_gap / 2
        out.append(f'<line x1="{MARGIN}" y1="{y:.1f}" x2="{view_w - MARGIN:.1f}" y2="{y:.1f}" stroke="#bbb" '
                   f'stroke-dasharray="2,4"/>')
    offsets = _attachments(graph, layout)
    edges = [_edge_svg(i, e, graph, layout, offsets, origin) for i, e in enumerate(graph.edges)]
    out += [shape for shape, _ in edges] + [label for _, label in edges]
    for key, box in graph.boxes.items():
        x, y = layout.positions[key]
        fill = colors[box.backend] if box.backend else IO_FILL
        out.append(_box_svg(box, origin[0] + x, origin[1] + y, fill, graph, sizes))
    out.append("</svg>")
    return "\n".join(out)
