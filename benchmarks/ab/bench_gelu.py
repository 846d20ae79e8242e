"""The NumPy backend's float32 GELU: the tanh form (``fast_erf.gelu_float32``)
against the previous rational-erf form (27 passes, kept here as the reference),
one thread, alternating call by call.

    python benchmarks/ab/bench_gelu.py [--runs 300]

Per size: median CPU µs of the calling thread of each, the ratio new / old,
and both maximum errors against float64 on a dense grid of [-12, 12]
(absolute, and over max(|x|, 1)).  The 1-minute load average is printed.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
from scipy.special import erf

from nnrt_numpy.fast_erf import ALPHA, BETA, gelu_float32

# the previous form: 0.5 * erf(u / sqrt 2) = u * P'(s) / Q'(s), s = u^2, u = clamp(x, +-4 sqrt 2)
_GA = tuple(np.float32(a / (2.0 * np.sqrt(2.0) * 2.0 ** k)) for k, a in enumerate(ALPHA))
_GB = tuple(np.float32(b / 2.0 ** k) for k, b in enumerate(BETA))
_LIM = np.float32(4.0 * np.sqrt(2.0))
_H, _Z, _O = np.float32(0.5), np.float32(0.0), np.float32(1.0)


def gelu_rational(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """The previous ``_gelu_flat``: 27 whole-array passes."""
    u = np.clip(x, -_LIM, _LIM)
    s = np.multiply(u, u)
    p = np.multiply(s, _GA[-1])
    for c in _GA[-2:0:-1]:
        np.add(p, c, out=p)
        np.multiply(p, s, out=p)
    np.add(p, _GA[0], out=p)
    np.multiply(p, u, out=p)
    q = np.multiply(s, _GB[-1], out=u)
    for c in _GB[-2:0:-1]:
        np.add(q, c, out=q)
        np.multiply(q, s, out=q)
    np.add(q, _GB[0], out=q)
    np.divide(p, q, out=p)
    np.add(p, _H, out=p)
    np.clip(p, _Z, _O, out=p)
    return np.multiply(p, x, out=out)


def errors(fn) -> tuple[float, float]:
    x = np.linspace(-12, 12, 2_000_001).astype(np.float32)
    x64 = x.astype(np.float64)
    exact = x64 * 0.5 * (1 + erf(x64 / np.sqrt(2)))
    err = np.abs(fn(x, np.empty_like(x)).astype(np.float64) - exact)
    return float(err.max()), float((err / np.maximum(np.abs(x64), 1)).max())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=300)
    args = ap.parse_args()
    new = lambda x, out: gelu_float32(x, out=out)  # noqa: E731
    print(f"load {os.getloadavg()[0]:.2f}")
    for label, fn in (("rational (previous)", gelu_rational), ("tanh form (now)", new)):
        a, r = errors(fn)
        print(f"{label:<22} max abs error {a:.2e}, max error / max(|x|, 1) {r:.2e}")
    print(f"{'values':>9} {'previous us':>12} {'now us':>8} {'now/prev':>9}")
    rng = np.random.default_rng(0)
    for n in (20_000, 92_160, 368_640, 1_474_560):  # PP-OCRv6 rec tiny's GELUs at batch 1 and 8
        x = (rng.standard_normal(n) * 2).astype(np.float32)
        out = np.empty_like(x)
        t: dict[str, list] = {"p": [], "n": []}
        runs = max(20, args.runs * 92_160 // n)
        for _ in range(runs):
            for key, fn in (("p", gelu_rational), ("n", new)):
                c0 = time.thread_time()
                fn(x, out)
                t[key].append(time.thread_time() - c0)
        p, m = (statistics.median(t[k]) * 1e6 for k in ("p", "n"))
        print(f"{n:9d} {p:12.1f} {m:8.1f} {m / p:9.2f}", flush=True)
    print(f"load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
