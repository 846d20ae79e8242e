"""Long fuzz run over mutated models (see docs/security.md):

    python benchmarks/fuzz_models.py --cases 10000 [--seed 0] [--start 0] [--jobs 1]
        [--configs numpy,onnxruntime,npu_emu+onnxruntime] [--timeout 10] [--batch 100] [--json out.json]

Cases ``start .. start+cases`` of the run seeded ``seed`` (the same cases for
the same seed and onnx wheel) are built and run by ``Session`` under every
configuration in forked child batches (``tools/nnrt_fuzz``).  Prints the
counts per outcome and configuration (ok, clean NnrtError, internal message,
other exception, crash, over deadline, over memory), then every case that is
not ok or clean with its seed, index, seed model and mutation; replay one with
``--start INDEX --cases 1``.  ``--jobs N`` runs N slices of the range in
parallel (the machine's cores are shared: 1 by default).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))

from nnrt_fuzz import CONFIGS, OUTCOMES, FuzzReport, run_fuzz  # noqa: E402

#: outcomes worth a line each in the listing (the others are only counted)
LISTED = ("internal", "other", "crash", "deadline", "memory")


def _slice(args: tuple) -> list[tuple]:
    seed, start, cases, configs, timeout, batch = args

    def progress(r: FuzzReport, t: float) -> None:
        print(f"  [{start}..] {len({o.index for o in r.outcomes})} cases, {t:.0f} s: {dict(r.counts())}",
              file=sys.stderr, flush=True)

    r = run_fuzz(cases, seed, start=start, configs=configs, timeout=timeout, batch=batch, progress=progress)
    return [(o.index, o.config, o.kind, o.message, o.seed_name, o.mutation) for o in r.outcomes]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per (case, config)")
    ap.add_argument("--batch", type=int, default=100, help="cases per child process")
    ap.add_argument("--json", help="write every non-ok, non-clean outcome here")
    a = ap.parse_args()
    configs = [c for c in a.configs.split(",") if c]
    step = -(-a.cases // a.jobs)
    slices = [(a.seed, a.start + k, min(step, a.start + a.cases - (a.start + k)), configs, a.timeout, a.batch)
              for k in range(0, a.cases, step)]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(a.jobs) as pool:
        rows = [row for part in pool.map(_slice, slices) for row in part]
    wall = time.perf_counter() - t0
    print(f"seed {a.seed}, cases {a.start}..{a.start + a.cases - 1}, {len(configs)} configs, "
          f"{len(rows)} runs in {wall:.0f} s ({wall / max(len(rows), 1) * 1000:.1f} ms per run)")
    print(f"{'config':<22}" + "".join(f"{k:>10}" for k in OUTCOMES))
    for c in configs + ["total"]:
        n = Counter(r[2] for r in rows if c == "total" or r[1] == c)
        print(f"{c:<22}" + "".join(f"{n.get(k, 0):>10}" for k in OUTCOMES))
    listed = sorted((r for r in rows if r[2] in LISTED), key=lambda r: (LISTED.index(r[2]), r[0], r[1]))
    for i, cfg, kind, msg, seed_name, mutation in listed:
        print(f"{kind:<9} case {i} [{cfg}] {seed_name}: {mutation}\n          -> {msg[:300]}")
    if a.json:
        Path(a.json).write_text(json.dumps([dict(zip(("index", "config", "kind", "message", "seed_model",
                                                       "mutation"), r)) for r in listed], indent=1))


if __name__ == "__main__":
    main()
