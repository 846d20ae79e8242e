"""A minimal progress bar on stderr (no dependency), off when not a terminal."""
from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Progress"]


class Progress:
    """``with Progress(total, "calibrating") as bar: bar.update()``.

    ``enabled=None`` shows the bar only when ``stream`` is a terminal; the
    line is redrawn at most ten times a second and finished with a newline."""

    def __init__(self, total: int, desc: str = "", *, enabled: bool | None = None,
                 stream: TextIO | None = None, width: int = 30) -> None:
        self.total = max(int(total), 0)
        self.desc = desc
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = enabled
        self.width = width
        self.n = 0
        self._t0 = time.perf_counter()
        self._last = 0.0
        self._drawn = False
        self._width_drawn = 0

    def __enter__(self) -> "Progress":
        self._draw(force=True)
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def set_description(self, desc: str) -> None:
        self.desc = desc
        self._draw(force=True)

    def update(self, n: int = 1) -> None:
        self.n = min(self.n + n, self.total) if self.total else self.n + n
        self._draw(force=self.n >= self.total)

    def render(self) -> str:
        """The bar as text: ``desc |#####-----| 12/40 [1.2s, 10.0/s]``."""
        elapsed = time.perf_counter() - self._t0
        frac = self.n / self.total if self.total else 1.0
        filled = int(round(frac * self.width))
        rate = self.n / elapsed if elapsed > 0 else 0.0
        bar = "#" * filled + "-" * (self.width - filled)
        return f"{self.desc} |{bar}| {self.n}/{self.total} [{elapsed:.1f}s, {rate:.1f}/s]"

    def _draw(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if not force and now - self._last < 0.1:
            return
        self._last = now
        text = self.render()
        pad = max(self._width_drawn - len(text), 0)  # wipe what a longer previous line left
        self._width_drawn = len(text)
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self.enabled and self._drawn:
            self._draw(force=True)
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False
