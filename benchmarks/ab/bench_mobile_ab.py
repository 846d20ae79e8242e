"""A/B of ``bench_mobile.py`` between this source tree and another (e.g. main's), in alternating processes.

    python benchmarks/ab/bench_mobile_ab.py --base TREE [--rounds 2] [--interleave cpu] [bench_mobile.py options...]

Make TREE with ``mkdir -p /tmp/base && git -C /work/main archive main | tar -x -C /tmp/base``.
Each round runs ``bench_mobile.py --json`` (the script of *this* tree, so both sides time the
same way) once with ``PYTHONPATH`` pointing at the base tree, then at this tree; per row the
median over rounds of nnrt ms, ORT ms and the ratio nnrt / ORT of each side is printed, with
B/A of nnrt's own time, the geometric means and the 1-minute load average around every run.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent  # benchmarks/: the shared benchmark modules
PLUGINS = ["plugins/numpy", "plugins/npu_emu", "plugins/onnxruntime", "schedulers", "plugins/ray"]


def pythonpath(tree: Path) -> str:
    return os.pathsep.join([str(tree)] + [str(tree / p) for p in PLUGINS])


def run_once(tree: Path, extra: list[str]) -> dict:
    env = dict(os.environ, PYTHONPATH=pythonpath(tree))
    out = subprocess.run([sys.executable, str(HERE / "bench_mobile.py"), "--json", *extra], env=env, check=True,
                         capture_output=True, text=True, cwd=str(tree)).stdout
    return json.loads(out[out.index("{"):])


def key(row: dict) -> str:
    return row["shape"] if "shape" in row else f"{row['model']} b{row['batch']}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="the other source tree (A)")
    ap.add_argument("--rounds", type=int, default=2)
    args, extra = ap.parse_known_args()
    trees = {"A": Path(args.base).resolve(), "B": HERE.parent}
    rows: dict[str, dict[str, list]] = {}
    order: list[str] = []
    for r in range(args.rounds):
        for side, tree in trees.items():
            res = run_once(tree, extra)
            print(f"round {r + 1} {side} ({tree}): load {res['load_average'][0]:.2f} -> {res['load_average'][1]:.2f}",
                  flush=True)
            for sect in ("micro", "models"):
                for row in res.get(sect, []):
                    k = key(row)
                    if k not in rows:
                        rows[k] = {"A": [], "B": []}
                        order.append(k)
                    rows[k][side].append(row)
    print(f"\n{'row':<28} {'A nnrt':>8} {'A ORT':>8} {'A ratio':>7} {'B nnrt':>8} {'B ORT':>8} {'B ratio':>7} "
          f"{'B/A nnrt':>8}")
    geo: dict[str, list] = {"A": [], "B": [], "speed": []}
    for k in order:
        med = {s: {f: statistics.median(x[f] for x in rows[k][s]) for f in ("nnrt_ms", "ort_ms", "ratio")}
               for s in ("A", "B") if rows[k][s]}
        if len(med) < 2:
            continue
        a, b = med["A"], med["B"]
        geo["A"].append(a["ratio"])
        geo["B"].append(b["ratio"])
        geo["speed"].append(b["nnrt_ms"] / a["nnrt_ms"])
        print(f"{k:<28} {a['nnrt_ms']:8.2f} {a['ort_ms']:8.2f} {a['ratio']:7.2f} {b['nnrt_ms']:8.2f} "
              f"{b['ort_ms']:8.2f} {b['ratio']:7.2f} {b['nnrt_ms'] / a['nnrt_ms']:8.3f}")
    g = {s: statistics.geometric_mean(v) for s, v in geo.items() if v}
    if g:
        print(f"geometric means: ratio A {g['A']:.2f}, ratio B {g['B']:.2f}, nnrt B/A {g['speed']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
