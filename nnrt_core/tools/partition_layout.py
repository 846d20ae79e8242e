"""A layered, wrapping layout for a small DAG of equal boxes (no graphviz).

Boxes go into layers by topological depth, left to right; a layer taller than
``rows`` boxes spills into further columns, and the columns wrap into bands
(like lines of text) so that the drawing is as close to the target aspect
(a screen) as the graph allows.  The search tries every useful rows / columns
combination and keeps the one that needs the least scaling to fit.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["BoxGeometry", "Layout", "layered_layout", "depths"]


@dataclass(frozen=True)
class BoxGeometry:
    """Box size and the gaps around boxes, in SVG user units."""

    width: float = 172.0
    height: float = 60.0
    gap_x: float = 110.0  #: room for edge labels between columns
    gap_y: float = 22.0
    band_gap: float = 44.0  #: between wrapped bands


@dataclass
class Layout:
    """Top-left corner of every box, its band, and the drawing's size."""

    positions: dict[str, tuple[float, float]]
    band_of: dict[str, int]
    column_of: dict[str, int]
    width: float
    height: float
    bands: int
    band_tops: list[float] = field(default_factory=list)


def depths(order: list[str], preds: dict[str, list[str]]) -> dict[str, int]:
    """Longest-path depth of every key; ``order`` is topological (execution
    order), so every predecessor's depth is known when a key is reached."""
    depth: dict[str, int] = {}
    for k in order:
        depth[k] = 1 + max((depth[p] for p in preds.get(k, ()) if p in depth), default=-1)
    return depth


def _ordered_layers(order: list[str], preds: dict[str, list[str]]) -> list[list[str]]:
    """Keys grouped by depth, each layer sorted by the mean row of its
    predecessors (barycentre) to keep edges short."""
    depth = depths(order, preds)
    layers: list[list[str]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for k in order:
        layers[depth[k]].append(k)
    row: dict[str, float] = {}
    for layer in layers:
        rank = {k: i for i, k in enumerate(layer)}
        layer.sort(key=lambda k: (sum(row[p] for p in preds.get(k, ()) if p in row) /
                                  max(1, sum(1 for p in preds.get(k, ()) if p in row)), rank[k]))
        row.update({k: float(i) for i, k in enumerate(layer)})
    return layers


def _columns(layers: list[list[str]], rows: int) -> list[list[str]]:
    return [layer[i:i + rows] for layer in layers for i in range(0, len(layer), rows)]


def _size(columns: list[list[str]], per_band: int, g: BoxGeometry) -> tuple[float, float, int]:
    bands = [columns[i:i + per_band] for i in range(0, len(columns), per_band)]
    width = min(per_band, len(columns)) * (g.width + g.gap_x) - g.gap_x
    tall = [max(len(c) for c in band) for band in bands]
    height = sum(n * (g.height + g.gap_y) - g.gap_y for n in tall) + (len(bands) - 1) * g.band_gap
    return width, height, len(bands)


def _best_shape(layers: list[list[str]], max_w: float, max_h: float, g: BoxGeometry) -> tuple[int, int]:
    """(rows per column, columns per band) needing the least scaling to fit
    ``max_w`` x ``max_h``; among shapes that fit, the one with fewest bands."""
    tallest = max((len(layer) for layer in layers), default=1)
    candidates = sorted({tallest, *range(1, min(tallest, 12) + 1),
                         *(math.ceil(tallest / k) for k in range(1, min(tallest, 12) + 1))})
    best: tuple[tuple[float, int, float], int, int] | None = None
    for rows in candidates:
        columns = _columns(layers, rows)
        for per_band in sorted({math.ceil(len(columns) / b) for b in range(1, len(columns) + 1)}):
            w, h, bands = _size(columns, per_band, g)
            score = (min(1.0, max_w / w, max_h / h), -bands, -w * h)
            if best is None or score > best[0]:
                best = (score, rows, per_band)
    return (best[1], best[2]) if best else (1, 1)


def layered_layout(order: list[str], preds: dict[str, list[str]], *, max_width: float, max_height: float,
                   geometry: BoxGeometry = BoxGeometry()) -> Layout:
    """Place the boxes named in ``order`` (topological) with edges ``preds``."""
    g = geometry
    layers = _ordered_layers(order, preds)
    rows, per_band = _best_shape(layers, max_width, max_height, g)
    columns = _columns(layers, rows)
    positions: dict[str, tuple[float, float]] = {}
    band_of: dict[str, int] = {}
    column_of: dict[str, int] = {}
    top, band_tops = 0.0, []
    for b, start in enumerate(range(0, len(columns), per_band)):
        band = columns[start:start + per_band]
        band_tops.append(top)
        tall = max(len(c) for c in band)
        for ci, column in enumerate(band):
            offset = (tall - len(column)) * (g.height + g.gap_y) / 2  # centre short columns
            for ri, k in enumerate(column):
                positions[k] = (ci * (g.width + g.gap_x), top + offset + ri * (g.height + g.gap_y))
                band_of[k], column_of[k] = b, start + ci
        top += tall * (g.height + g.gap_y) - g.gap_y + g.band_gap
    width, height, bands = _size(columns, per_band, g) if columns else (0.0, 0.0, 0)
    return Layout(positions, band_of, column_of, width, height, bands, band_tops)
