"""nnrt on Ray: throughput scaling of an actor pool, the overhead against a
plain loop over ``Session.run``, and actor start-up warm (the shipped offline
file) against cold (a session build in the actor).

    python benchmarks/bench_ray.py [--models squeezenet,resnet50] [--rows squeezenet=96,resnet50=32]
                                   [--batch-size 8] [--backends onnxruntime] [--real-weights] [--json]

Models: the onnx wheel's ``light`` SqueezeNet and ResNet50 (input [1, 3, 224,
224], so each actor runs its batch one row at a time).  ``--real-weights``
replaces their ConstantOfShape weight fills by stored He-initialized weights
(examples/light_weights.py), as a real model file holds them.  Every session has
``num_threads=1`` (one intra-op thread per actor) on a local Ray instance with
``--cpus`` CPUs (default: every core).

* plain: one session in this process, the same batches, ``Session.run`` per row;
* NnrtPredictor: the same batches through the predictor in this process (its own
  cost: column checks, row runs, output columns), interleaved with plain;
* ray N: ``Dataset.map_batches(NnrtPredictor, ActorPoolStrategy(size=N))``
  over a materialized dataset, each actor warmed up by one run (``warmup=True``, as the plain
  loop's session is by the earlier repeats), its output collected with
  ``take_all()`` (no further operator: a ``select_columns`` there ran one
  more Ray task per block on the same two cores); its time is the window from
  the first batch's start to the last batch's end inside the actors (actor
  start-up excluded, reported apart), median of ``--repeats`` jobs.  Split
  into "in call" (the summed time inside the predictor's ``__call__``: our
  predictor and the runs; its CPU time is also set against the plain loop's,
  which tells our own extra work from cores shared with Ray's processes) and
  "between calls" (the rest of the window, per
  batch: Ray's own per-batch cost, dispatch, block conversion, object store);
* efficiency(N) = throughput(N) / (N x throughput(1)); overhead = time(ray 1) / time(plain);
* start-up: seconds from ``NnrtPredictor(...)`` to a ready session in a fresh
  worker process (after imports, plugin discovery and the backends' one-time
  runtime set-up, which both kinds pay alike), median of ``--starts``
  each, interleaved: warm = the compiled file fetched from the object store and
  loaded, cold = the model and config fetched, the session built there.

Byte-code caches: a user's installed packages have ``.pyc`` files; this
machine may run with ``PYTHONDONTWRITEBYTECODE=1``, which would make every
fresh worker compile nnrt's kernel modules from source inside the timed
start (about 10 ms, paid by warm and cold alike).  The workers therefore run
with that variable removed and ``PYTHONPYCACHEPREFIX`` set to a private
folder (``--keep-env`` turns this off), after one untimed start of each kind.

Machine load changes every figure: the script prints the load average before
and after.  Targets (issue #15): efficiency(2) >= 0.8 on 2 cores, overhead <= 1.15,
warm <= 0.2 x cold.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import ray

from bench_cold_start import use_bytecode_cache  # the same byte-code cache as its children
from nnrt_core import ScheduleConfig, Session
from nnrt_ray import NnrtPredictor, ship

ROOT = Path(__file__).resolve().parent.parent
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
MODELS = {"squeezenet": "light_squeezenet.onnx", "resnet50": "light_resnet50.onnx"}
DEFAULT_ROWS = {"squeezenet": 96, "resnet50": 32}  #: whole batches, an even number of them


def user_bytecode_env(keep: bool) -> None:
    """Give the Ray workers started after this call a user's byte-code cache,
    as ``bench_cold_start.py`` gives its children; ``keep``: leave the environment."""
    if not keep:
        use_bytecode_cache(os.environ)


def timed_starts(remote_start, warm, cold, cfg: ScheduleConfig, n: int) -> dict[str, list]:
    """``n`` warm and cold actor starts, interleaved, after one untimed start of each kind."""
    ray.get([remote_start.remote(warm, cfg), remote_start.remote(cold, cfg)])
    starts: dict[str, list] = {"warm": [], "cold": []}
    for _ in range(n):
        starts["warm"].append(ray.get(remote_start.remote(warm, cfg)))
        starts["cold"].append(ray.get(remote_start.remote(cold, cfg)))
    return starts


class TimedPredictor(NnrtPredictor):
    """NnrtPredictor that stamps each output row with its batch's start and end (wall clock)."""

    def __call__(self, batch):
        t0, c0 = time.time(), time.thread_time()
        out = super().__call__(batch)
        n = len(out["row_id"])
        out["t_start"], out["t_end"] = np.full(n, t0), np.full(n, time.time())
        out["cpu"] = np.full(n, time.thread_time() - c0)
        out["pid"] = np.full(n, os.getpid())
        return out


class NoopPredictor(TimedPredictor):
    """TimedPredictor whose session returns one precomputed result (the
    models here have a fixed batch of 1): the same Ray pipeline with no model
    work, i.e. Ray's own cost per batch plus the predictor's own work."""

    def __init__(self, session, **kwargs) -> None:
        super().__init__(session, **kwargs)
        real = self.session
        self.session = _Canned(real.run({s.name: np.zeros((s.batch or 1, *s.row_shape), s.dtype)
                                         for s in self.specs}), real)


def _startup(shipped, config: ScheduleConfig) -> tuple[float, float]:
    """In a fresh worker process (``max_calls=1``): imports, plugin discovery
    and the backends' one-time runtime set-up (a one-node session on the same
    config) first, the same for both kinds; then the timed predictor start-up:
    (wall seconds, CPU seconds of the worker process, which a loaded machine
    changes less)."""
    from nnrt_core import GraphBuilder

    b = GraphBuilder("warmup")
    b.output(b.relu(b.input("x", "float32", [1, 4])), "y")
    Session(b.build(), config).run({"x": np.ones((1, 4), np.float32)})
    c0 = time.process_time()
    wall = NnrtPredictor(shipped).startup_seconds
    return wall, time.process_time() - c0


def load_model(name: str, real_weights: bool) -> bytes:
    m = onnx.load(str(LIGHT / MODELS[name]))
    if real_weights:
        sys.path.insert(0, str(ROOT / "examples"))
        from light_weights import he_initialized

        m = he_initialized(m)
    return m.SerializeToString()


def plain_loop(sess: Session, name: str, x: np.ndarray, batch_size: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this thread) of the runs over every batch."""
    t0, c0 = time.perf_counter(), time.thread_time()
    for a in range(0, len(x), batch_size):
        b = x[a:a + batch_size]
        for i in range(len(b)):
            sess.run({name: b[i:i + 1]})
    return time.perf_counter() - t0, time.thread_time() - c0


def predictor_loop(sess: Session, name: str, x: np.ndarray, batch_size: int) -> float:
    """The same batches through ``NnrtPredictor`` in this process (its own cost, without Ray)."""
    pred = NnrtPredictor(sess, warmup=True)
    t0 = time.perf_counter()
    for a in range(0, len(x), batch_size):
        b = x[a:a + batch_size]
        pred({"row_id": np.array([f"r{i}" for i in range(a, a + len(b))]), name: b})
    return time.perf_counter() - t0


def predictor_own_ms(sess: Session, name: str, x: np.ndarray, batch_size: int, calls: int = 200) -> float:
    """Median milliseconds per batch of ``NnrtPredictor.__call__`` with the
    session's runs replaced by their precomputed outputs: the predictor's own
    work (column checks, row slices, output checks and columns), no model."""
    pred = NnrtPredictor(sess)
    b = x[:batch_size]
    batch = {"row_id": np.array([f"r{i}" for i in range(len(b))]), name: b}
    done = sess.run({name: b[:1]})
    pred.session = _Canned(done, sess)
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        pred(batch)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


class _Canned:
    """A session whose ``run`` returns one precomputed result (``inputs`` etc. from the real one)."""

    def __init__(self, result: dict, real: Session) -> None:
        self.result, self.inputs, self.outputs = result, real.inputs, real.outputs

    def run(self, feeds, *args, **kwargs) -> dict:
        return self.result


def ray_window(ds, shipped, workers: int, batch_size: int, predictor: type = None
               ) -> tuple[float, float, int, float, float, int, float, float]:
    """(window seconds, wall seconds with start-up, rows, skew, seconds in
    calls summed over actors, batches, rows per second summed over actors
    each in its own window, CPU seconds in calls summed over actors) of one
    job; skew: how much later than the first actor the last one started its
    first batch."""
    t0 = time.perf_counter()
    with_timing = ds.map_batches(
        predictor or TimedPredictor, batch_size=batch_size, batch_format="numpy", zero_copy_batch=True,
        fn_constructor_kwargs={"session": shipped, "warmup": True},
        compute=ray.data.ActorPoolStrategy(size=workers),
        num_cpus=1, resources=shipped.resources or None)
    rows = with_timing.take_all()
    wall = time.perf_counter() - t0
    first = {}
    for r in rows:
        first[r["pid"]] = min(first.get(r["pid"], r["t_start"]), r["t_start"])
    window = max(r["t_end"] for r in rows) - min(r["t_start"] for r in rows)
    calls = {(r["pid"], r["t_start"], r["t_end"]): r["cpu"] for r in rows}
    busy = sum(b - a for _, a, b in calls)
    own = sum(sum(1 for r in rows if r["pid"] == pid)
              / (max(r["t_end"] for r in rows if r["pid"] == pid) - start) for pid, start in first.items())
    return (window, wall, len(rows), max(first.values()) - min(first.values()), busy, len(calls), own,
            sum(calls.values()))


def bench_model(name: str, args, cfg: ScheduleConfig) -> dict:
    load0 = os.getloadavg()
    model = load_model(name, args.real_weights)
    rows = args.rows.get(name, DEFAULT_ROWS[name])
    t0 = time.perf_counter()
    sess = Session(model, cfg)
    build = time.perf_counter() - t0
    inp = sess.inputs[0]
    x = np.random.RandomState(0).rand(rows, *inp.shape[1:]).astype(np.float32)
    ds = ray.data.from_items([{"row_id": f"r{i}", inp.name: x[i]} for i in range(rows)],
                             override_num_blocks=max(4, rows // args.batch_size)).materialize()
    warm, cold = ship(model, cfg), ship(model, cfg, warm=False)
    remote_start = ray.remote(num_cpus=1, max_calls=1)(_startup)
    starts = timed_starts(remote_start, warm, cold, cfg, args.starts)
    cpu = {k: statistics.median(c for _, c in v) for k, v in starts.items()}
    starts = {k: [w for w, _ in v] for k, v in starts.items()}
    plain, in_process = [], []
    for _ in range(args.repeats):  # interleaved
        plain.append(plain_loop(sess, inp.name, x, args.batch_size))
        in_process.append(predictor_loop(sess, inp.name, x, args.batch_size))
    res = {"model": name, "rows": rows, "batch_size": args.batch_size, "driver_build_s": build,
           "file_mb": warm.file_bytes / 1e6, "plain_s": statistics.median(w for w, _ in plain),
           "plain_cpu_s": statistics.median(c for _, c in plain),
           "predictor_s": statistics.median(in_process),
           "startup_warm_s": statistics.median(starts["warm"]), "startup_cold_s": statistics.median(starts["cold"]),
           "startup_warm_cpu_s": cpu["warm"], "startup_cold_cpu_s": cpu["cold"], "load_before": load0}
    res["warm_over_cold"] = res["startup_warm_s"] / res["startup_cold_s"]
    res["warm_over_cold_cpu"] = cpu["warm"] / cpu["cold"]
    for n in args.workers:
        runs = [ray_window(ds, warm, n, args.batch_size) for _ in range(args.repeats)]
        assert all(r[2] == rows for r in runs), "a job lost or duplicated rows"
        res[f"ray{n}_s"] = statistics.median(r[0] for r in runs)
        res[f"ray{n}_wall_s"] = statistics.median(r[1] for r in runs)
        res[f"ray{n}_rows_per_s"] = rows / res[f"ray{n}_s"]
        res[f"ray{n}_start_skew_s"] = statistics.median(r[3] for r in runs)
        res[f"ray{n}_own_rows_per_s"] = statistics.median(r[6] for r in runs)
        res[f"ray{n}_in_call_s"] = statistics.median(r[4] / n for r in runs)  # per actor
        res[f"ray{n}_in_call_cpu_s"] = statistics.median(r[7] / n for r in runs)
        res[f"ray{n}_between_calls_ms"] = statistics.median(
            (r[0] * n - r[4]) / max(r[5] - n, 1) * 1e3 for r in runs)  # per batch after each actor's first
    if args.noop:
        for n in args.workers:  # the same pipeline without model work: Ray's own cost per batch
            runs = [ray_window(ds, warm, n, args.batch_size, NoopPredictor) for _ in range(args.repeats)]
            res[f"noop{n}_ms_per_batch"] = statistics.median(r[0] * n / r[5] for r in runs) * 1e3
            res[f"noop{n}_between_calls_ms"] = statistics.median(
                (r[0] * n - r[4]) / max(r[5] - n, 1) * 1e3 for r in runs)
    res["overhead_predictor_vs_plain"] = res["predictor_s"] / res["plain_s"]
    res["predictor_own_ms_per_batch"] = predictor_own_ms(sess, inp.name, x, args.batch_size)
    res["load_after"] = os.getloadavg()
    one = res.get("ray1_rows_per_s")
    if one:
        res["overhead_ray1_vs_plain"] = res["ray1_s"] / res["plain_s"]
        for n in args.workers:
            res[f"efficiency{n}"] = res[f"ray{n}_rows_per_s"] / (n * one)
            res[f"efficiency{n}_own_windows"] = res[f"ray{n}_own_rows_per_s"] / (n * res["ray1_own_rows_per_s"])
    return res


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="squeezenet,resnet50")
    p.add_argument("--rows", default="", help="rows per model, e.g. squeezenet=96,resnet50=32")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--workers", default="1,2", help="actor counts to time")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--starts", type=int, default=3, help="actors per start-up median")
    p.add_argument("--backends", default="onnxruntime", help="backends of every session (backup: numpy)")
    p.add_argument("--cpus", type=int, default=os.cpu_count())
    p.add_argument("--real-weights", action="store_true")
    p.add_argument("--no-noop", dest="noop", action="store_false",
                   help="skip the no-op pipeline (the predictor with canned results: Ray's own cost per batch)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--keep-env", action="store_true", help="run the Ray workers with this environment as is")
    args = p.parse_args(argv)
    args.rows = {k: int(v) for k, v in (i.split("=") for i in args.rows.split(",") if i)}
    args.workers = [int(w) for w in args.workers.split(",") if w]  # "": start-up only
    cfg = ScheduleConfig(backends=args.backends.split(","), backup="numpy", num_threads=1)
    load0 = os.getloadavg()
    user_bytecode_env(args.keep_env)
    ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    try:
        results = [bench_model(m, args, cfg) for m in args.models.split(",")]
    finally:
        ray.shutdown()
    report = {"load_before": load0, "load_after": os.getloadavg(), "cpus": args.cpus,
              "real_weights": args.real_weights, "results": results}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"load average before {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, after "
          f"{report['load_after'][0]:.2f} {report['load_after'][1]:.2f} {report['load_after'][2]:.2f}; "
          f"{args.cpus} CPUs; weights: {'He-initialized' if args.real_weights else 'ConstantOfShape fills'}")
    for r in results:
        print(f"\n{r['model']}: {r['rows']} rows, batch {r['batch_size']}, file {r['file_mb']:.1f} MB; load average "
              f"{r['load_before'][0]:.2f} before, {r['load_after'][0]:.2f} after")
        print(f"  plain loop        {r['plain_s']:8.3f} s  {r['rows'] / r['plain_s']:8.2f} rows/s")
        print(f"  NnrtPredictor     {r['predictor_s']:8.3f} s  {r['rows'] / r['predictor_s']:8.2f} rows/s"
              f"  (in this process, no Ray: {r['overhead_predictor_vs_plain']:.3f}x the plain loop; its own work "
              f"{r['predictor_own_ms_per_batch']:.3f} ms per batch)")
        for n in args.workers:
            print(f"  ray {n} actor(s)    {r[f'ray{n}_s']:8.3f} s  {r[f'ray{n}_rows_per_s']:8.2f} rows/s"
                  f"  efficiency {r.get(f'efficiency{n}', float('nan')):.2f}  (job wall with start-up "
                  f"{r[f'ray{n}_wall_s']:.1f} s; last actor's first batch {r[f'ray{n}_start_skew_s']:.2f} s "
                  f"after the first's; efficiency with each actor's rows over its own window, the start skew "
                  f"left out: {r.get(f'efficiency{n}_own_windows', float('nan')):.2f})")
            print(f"      in calls {r[f'ray{n}_in_call_s']:.3f} s per actor ({r[f'ray{n}_in_call_s'] / r['plain_s']:.3f}x "
                  f"the plain loop; CPU {r[f'ray{n}_in_call_cpu_s'] / r['plain_cpu_s']:.3f}x the plain loop's), "
                  f"between calls {r[f'ray{n}_between_calls_ms']:.1f} ms per batch (Ray's own)")
        if "overhead_ray1_vs_plain" in r:
            print(f"  overhead ray 1 / plain: {r['overhead_ray1_vs_plain']:.3f}x")
        _print_noop(r, args.workers)
        print(f"  actor start-up: warm {r['startup_warm_s'] * 1e3:.0f} ms, cold {r['startup_cold_s'] * 1e3:.0f} ms "
              f"-> warm/cold {r['warm_over_cold']:.3f} (driver build {r['driver_build_s'] * 1e3:.0f} ms)")
        print(f"      CPU time: warm {r['startup_warm_cpu_s'] * 1e3:.0f} ms, cold {r['startup_cold_cpu_s'] * 1e3:.0f} ms "
              f"-> {r['warm_over_cold_cpu']:.3f}")
    return 0


def _print_noop(r: dict, workers: list[int]) -> None:
    """The no-op pipeline's cost per batch and the overhead it alone puts on the plain loop."""
    batches = -(-r["rows"] // r["batch_size"])
    for n in workers:
        if f"noop{n}_ms_per_batch" not in r:
            continue
        ms = r[f"noop{n}_ms_per_batch"]
        print(f"  no-op pipeline, {n} actor(s): {ms:.1f} ms per batch and actor, between calls "
              f"{r[f'noop{n}_between_calls_ms']:.1f} ms (Ray's own cost; no model)", end="")
        if n == 1:
            print(f"; plain loop + that per batch = {(r['plain_s'] + batches * ms / 1e3) / r['plain_s']:.3f}x "
                  "the plain loop", end="")
        elif "noop1_ms_per_batch" in r and batches >= 8 * n:  # how Ray's own pipeline scales, no model at all
            # (fewer batches per actor time its start-up more than its throughput)
            print(f"; efficiency({n}) of the no-op pipeline {r['noop1_ms_per_batch'] / ms:.2f}", end="")
        print()


if __name__ == "__main__":
    sys.exit(main())
