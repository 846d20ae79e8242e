"""The legend strip above the partition picture: totals, backend colours, fallback events, key."""
from __future__ import annotations

from xml.sax.saxutils import escape

from nnrt_core.tools.partition_graph import PartitionGraph
from nnrt_core.tools.svg_style import clip

__all__ = ["legend_svg", "LINE_H"]

LINE_H = 20
CHAR_W = 6.2  #: rough width of one 11 px character


def _headline(graph: PartitionGraph, title: str) -> str:
    parts = [b for b in graph.boxes.values() if b.is_partition]
    backends = {b.backend for b in parts}
    text = (f"{title}: {graph.node_count} node(s) in {len(parts)} partition(s) "
            f"on {len(backends)} backend(s)")
    estimates = [b.estimated_ms for b in parts]
    if parts and all(e is not None for e in estimates):
        text += f", estimated {sum(estimates):.3f} ms per run (partitions only)"  # type: ignore[arg-type]
    return text


def _swatches(graph: PartitionGraph, colors: dict[str, str], left: float, y: float, width: float) -> tuple[list[str], float]:
    """One swatch per backend, wrapping; returns the lines and the next free y."""
    out, x = [], left
    for backend, color in colors.items():
        boxes = [b for b in graph.boxes.values() if b.backend == backend]
        text = f"{backend}: {sum(len(b.nodes) for b in boxes)} node(s), {len(boxes)} partition(s)"
        item_w = 24 + len(text) * CHAR_W + 18
        if x > left and x + item_w > left + width:
            x, y = left, y + LINE_H
        out.append(f'<g class="legend-backend" data-backend="{escape(backend)}"><rect x="{x:.1f}" y="{y - 11:.1f}" '
                   f'width="16" height="14" fill="{color}" stroke="#333" stroke-width="0.6"/>'
                   f'<text x="{x + 22:.1f}" y="{y:.1f}">{escape(text)}</text></g>')
        x += item_w
    return out, y + LINE_H


def legend_svg(graph: PartitionGraph, colors: dict[str, str], title: str, margin: float, *,
               width: float) -> tuple[list[str], float]:
    """SVG lines of the legend drawn from (margin, margin) and its height."""
    y = margin + 14
    out = [f'<text x="{margin}" y="{y}" font-size="14" font-weight="bold">{escape(clip(_headline(graph, title), 160))}'
           f'</text>']
    swatches, y = _swatches(graph, colors, margin, y + LINE_H + 2, width)
    out += swatches
    if graph.event_counts:
        counts = ", ".join(f"{n} {kind}" for kind, n in sorted(graph.event_counts.items()))
        first = clip(graph.event_messages[0], int(width / CHAR_W) - len(counts) - 40)
        out.append(f'<g class="legend-events"><title>{escape(chr(10).join(graph.event_messages))}</title>'
                   f'<rect x="{margin}" y="{y - 11}" width="16" height="14" fill="white" stroke="#d62728" '
                   f'stroke-width="2.5"/><text x="{margin + 22}" y="{y}">fallback events: {escape(counts)} '
                   f'(outlined in red) — {escape(first)}</text></g>')
    else:
        out.append(f'<text x="{margin}" y="{y}" class="legend-events">fallback events: none</text>')
    y += LINE_H
    out.append(f'<text x="{margin}" y="{y}" fill="#444" font-size="10">arrows: boundary tensors (name · size, '
               f'? = dynamic shape; dashed when unknown, thicker when larger); ●→ #N: an edge to or from a box in '
               f'another row; hover a box for its nodes</text>')
    return out, y + 22 - margin
