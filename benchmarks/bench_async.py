"""Throughput of N requests in flight (``Session.stream``) vs one at a time.

    python benchmarks/bench_async.py [--models squeezenet,shufflenet | --all]
                                     [--backends numpy,onnxruntime] [--in-flight 2,3,4]
                                     [--rounds R] [--seconds S] [--json]

Both sides run in the same process, interleaved round by round (the median
of the rounds is reported), on the onnx wheel's `light` models:

* one at a time with every thread given to the request (NumPy: BLAS threads =
  cores; ONNX Runtime: ``num_threads`` = cores, i.e. intra-op threads), and one
  at a time with one thread (often faster on a busy machine);
* N requests in flight through ``Session.stream`` with its default
  ``concurrency="auto"`` (it measures all-N-executing against one at a time
  and keeps the faster).  Each executing request gets its share of the cores
  (``nnrt_core.runtime.thread_budget``): NumPy splits no convolution beyond it;
  ONNX Runtime runs it on a session with that many intra-op threads (the
  default session when the stream runs one at a time).  With ``--fixed``:
  all N execute, one thread each (NumPy: BLAS threads = 1 through
  threadpoolctl; ONNX Runtime: ``num_threads=1``), the first measurements.

The ratio is printed against the faster of the two one-at-a-time settings
("vs best 1") and against the all-threads one ("vs all-thr 1").
"""
from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import onnx

from nnrt_core import ScheduleConfig, Session
from nnrt_core.tools.bench import measure_throughput

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
ALL_MODELS = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
              "shufflenet", "squeezenet", "vgg19", "zfnet512"]
CORES = os.cpu_count() or 1

try:
    from threadpoolctl import threadpool_limits
except ImportError:  # pragma: no cover - optional
    threadpool_limits = None


@contextlib.contextmanager
def blas_threads(n: int | None) -> Iterator[None]:
    """Limit BLAS threads to ``n`` (no-op for None or without threadpoolctl)."""
    if n is None or threadpool_limits is None:
        yield
        return
    with threadpool_limits(limits=n, user_api="blas"):
        yield


def feeds_for(sess: Session) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {i.name: rng.standard_normal([d if isinstance(d, int) else 1 for d in i.shape]).astype(i.dtype)
            for i in sess.inputs}


def configs(model: str, backend: str, in_flight: list[int],
            fixed: bool = False) -> list[tuple[str, Callable[[int], float]]]:
    """(label, measure(requests) -> inferences/s) for every setting compared."""
    path = str(LIGHT / f"light_{model}.onnx")
    out: list[tuple[str, Callable[[int], float]]] = []
    if backend == "numpy":
        sess = Session(path, ScheduleConfig(backends=["numpy"]))
        feeds = feeds_for(sess)
        sess.run(feeds)

        def make(n: int, threads: int | None) -> Callable[[int], float]:
            def measure(requests: int) -> float:
                with blas_threads(threads):
                    return measure_throughput(sess, feeds, n, requests, concurrency=n if fixed else "auto")
            return measure

        out.append((f"1 ({CORES} thr)", make(1, CORES)))
        out.append(("1 (1 thr)", make(1, 1)))
        out += [(f"{n} in flight", make(n, 1 if fixed else None)) for n in in_flight]
    else:
        wide = Session(path, ScheduleConfig(backends=["onnxruntime"], num_threads=CORES))
        narrow = Session(path, ScheduleConfig(backends=["onnxruntime"], num_threads=1))
        feeds = feeds_for(wide)
        wide.run(feeds)
        narrow.run(feeds)
        out.append((f"1 ({CORES} thr)", lambda r: measure_throughput(wide, feeds, 1, r)))
        out.append(("1 (1 thr)", lambda r: measure_throughput(narrow, feeds, 1, r)))
        # in flight: the default session, whose threads follow each run's budget
        # (a 1-thread ORT session per request when they run side by side, the
        # all-threads one when the stream runs one at a time); --fixed: 1 thread
        adaptive = narrow if fixed else Session(path, ScheduleConfig(backends=["onnxruntime"]))
        adaptive.run(feeds)
        for n in in_flight:
            out.append((f"{n} in flight", lambda r, n=n: measure_throughput(
                adaptive, feeds, n, r, concurrency=n if fixed else "auto")))
    return out


def bench_one(model: str, backend: str, in_flight: list[int], rounds: int, seconds: float,
              fixed: bool = False) -> dict[str, Any]:
    cfgs = configs(model, backend, in_flight, fixed)
    t0 = time.perf_counter()
    rate = cfgs[1][1](2)  # a quick estimate to size the measurements
    requests = max(2 * max(in_flight), int(round(seconds * rate)))
    samples: dict[str, list[float]] = {label: [] for label, _ in cfgs}
    for r in range(rounds):
        order = cfgs if r % 2 == 0 else cfgs[::-1]  # interleaved, alternating direction
        for label, measure in order:
            samples[label].append(measure(requests))
    ips = {label: statistics.median(v) for label, v in samples.items()}
    serial = {k: v for k, v in ips.items() if k.startswith("1 (")}
    best_serial = max(serial.values())
    all_threads = ips[f"1 ({CORES} thr)"]
    flight = {k: v for k, v in ips.items() if "in flight" in k}
    return {"model": model, "backend": backend, "requests": requests, "rounds": rounds,
            "inferences_per_s": ips, "best_in_flight": max(flight, key=flight.get),
            "vs_best_serial": {k: v / best_serial for k, v in flight.items()},
            "vs_all_threads_serial": {k: v / all_threads for k, v in flight.items()},
            "seconds": time.perf_counter() - t0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="squeezenet,shufflenet")
    ap.add_argument("--all", action="store_true", help="every light model")
    ap.add_argument("--backends", default="numpy,onnxruntime")
    ap.add_argument("--in-flight", default="2,3,4")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=1.5, help="target seconds per measurement")
    ap.add_argument("--fixed", action="store_true",
                    help="all N requests execute at once with one thread each (no auto concurrency)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    logging.getLogger("nnrt").setLevel(logging.ERROR)  # "numpy ignores num_threads" for the ORT sessions' backup
    models = ALL_MODELS if args.all else [m.strip() for m in args.models.split(",") if m.strip()]
    in_flight = [int(x) for x in args.in_flight.split(",")]
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    print(f"# {CORES} cores; load average {os.getloadavg()[0]:.1f}; threadpoolctl "
          f"{'available' if threadpool_limits else 'missing (BLAS threads not controlled)'}", file=sys.stderr)
    results = []
    header = f"{'model':<14}{'backend':<13}" + "".join(f"{c:>14}" for c in
                                                        [f"1 ({CORES} thr)", "1 (1 thr)"] +
                                                        [f"{n} in flight" for n in in_flight])
    if not args.json:
        print("inferences/s (median of rounds); ratios of the best in-flight setting")
        print(header + f"{'vs best 1':>11}{'vs all-thr 1':>14}")
    for model in models:
        for backend in backends:
            res = bench_one(model, backend, in_flight, args.rounds, args.seconds, args.fixed)
            results.append(res)
            if not args.json:
                ips = res["inferences_per_s"]
                best = res["best_in_flight"]
                print(f"{model:<14}{backend:<13}" + "".join(f"{v:>14.2f}" for v in ips.values())
                      + f"{res['vs_best_serial'][best]:>10.2f}x{res['vs_all_threads_serial'][best]:>13.2f}x",
                      flush=True)
    if args.json:
        print(json.dumps({"cores": CORES, "load_average": os.getloadavg(), "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
