"""Shared pieces of the placement pictures: backend colours, text fitting, byte sizes."""
from __future__ import annotations

from typing import Iterable
from xml.sax.saxutils import escape

__all__ = ["BACKEND_COLORS", "backend_colors", "text_color", "clip", "format_bytes", "svg_open"]

#: fill colours for backends, in order of first appearance
BACKEND_COLORS = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
                  "#9c755f", "#bab0ac")


def backend_colors(backends: Iterable[str]) -> dict[str, str]:
    """backend -> fill colour, assigned in order of first appearance."""
    colors: dict[str, str] = {}
    for b in backends:
        colors.setdefault(b, BACKEND_COLORS[len(colors) % len(BACKEND_COLORS)])
    return colors


def text_color(fill: str) -> str:
    """Black or white, whichever reads better on ``fill`` (``#rrggbb``)."""
    r, g, b = (int(fill[i:i + 2], 16) for i in (1, 3, 5))
    return "#1a1a1a" if 0.299 * r + 0.587 * g + 0.114 * b > 150 else "white"


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[:max(limit - 1, 0)] + "…"


def format_bytes(n: int | None) -> str:
    """``1.5 KB`` / ``784 KB``-style size; ``?`` when unknown (dynamic shapes)."""
    if n is None:
        return "?"
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{int(size)} {unit}" if unit == "B" or size >= 10 else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"  # pragma: no cover  (the loop always returns)


def svg_open(width: float, height: float, view_w: float, view_h: float, title: str) -> list[str]:
    """The opening lines of an SVG drawn in a ``view_w`` x ``view_h`` user
    space and shown at ``width`` x ``height`` pixels, with a white background."""
    return [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
            f'viewBox="0 0 {view_w:.0f} {view_h:.0f}" font-family="sans-serif" font-size="11">',
            f'<title>{escape(title)}</title>',
            f'<rect width="{view_w:.0f}" height="{view_h:.0f}" fill="white"/>']
