"""The ``nnrt`` command line: ``devices``, ``run``, ``compile``, ``bench``, ``partition``, ``quantize``,
``batch``, ``serve``, ``check``."""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from nnrt_core.config import OPTIMIZATION_LEVELS, ScheduleConfig
from nnrt_core.errors import ConfigError, InputError, NnrtError
from nnrt_core.quantization.cli import add_quantize_parser
from nnrt_core.tools.batch_cli import add_batch_parser
from nnrt_core.tools.cli_config import add_config_flags, config_from_args
from nnrt_core.tools.serve_cli import add_serve_parser

if TYPE_CHECKING:  # imported by main() once the arguments parsed: ``nnrt --help`` never pays for them
    import numpy as np

    from nnrt_core.runtime.feeds import TensorInfo
    from nnrt_core.session import Session

__all__ = ["main", "build_parser"]


# ------------------------------------------------------------------ inputs
def make_inputs(infos: Sequence[TensorInfo], given: Sequence[str], seed: int) -> dict[str, np.ndarray]:
    """Feeds from ``NAME=FILE.npy`` arguments; random data for the rest
    (symbolic dims become 1)."""
    feeds: dict[str, np.ndarray] = {}
    by_name = {i.name: i for i in infos}
    for item in given:
        name, sep, path = item.partition("=")
        if not sep:
            if len(infos) != 1:
                raise InputError(f"--input {item!r}: the model has {len(infos)} inputs, use NAME=FILE.npy")
            name, path = infos[0].name, item
        if name not in by_name:
            raise InputError(f"--input names unknown input {name!r}; inputs: {list(by_name)}")
        try:
            feeds[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise InputError(f"--input {name}: cannot read {path!r} as a .npy file: {e}") from e
    missing = [info for info in infos if info.name not in feeds]
    feeds.update(random_feeds(missing, seed, floats="normal", int_high=10, hint="give it with --input"))
    return feeds


def plan_for_inputs(sess: Session, feeds: dict[str, Any]) -> None:
    """Plan ``sess`` for the shapes of ``feeds`` now (models with free input
    dimensions), so that placement reports and timings describe that plan."""
    if sess.specializations is not None:
        names = sess.specializations.names
        sess.reshape({n: np.shape(feeds[n]) for n in names if n in feeds})


# ---------------------------------------------------------------- commands
def cmd_devices(args: argparse.Namespace) -> int:
    reg = default_registry()
    data = {
        "backends": [r.to_dict() for r in sorted(reg.backends.values(), key=lambda r: (-r.priority, r.name))]
        + [r.to_dict() for r in reg.conflicts],  # a name two plugins offer: the one not kept, with the reason
        "schedulers": [{"name": s.name, "plugin": s.plugin, "description": s.description}
                       for s in reg.schedulers.values()],
        "plugins": [p.as_dict() for p in reg.plugin_records],
    }
    if args.json:
        print(json.dumps(data, indent=2, default=str))
        return 0
    print(f"{'backend':<14}{'version':<10}{'type':<6}{'priority':>9}  status")
    for b in data["backends"]:
        status = "available" if b["available"] else f"unavailable: {b['reason']}"
        print(f"{b['name']:<14}{b['version']:<10}{b['device_type']:<6}{b['priority']:>9}  {status}")
        for d in b["devices"]:
            props = ", ".join(f"{k}={v}" for k, v in d.get("properties", {}).items())
            print(f"    {d.get('id', '?'):<10} {d.get('name', '')}  [{', '.join(d.get('precisions', []))}]  {props}")
    print("schedulers: " + ", ".join(s["name"] for s in data["schedulers"]))
    broken = [p for p in data["plugins"] if p["status"] != "loaded"]
    for p in broken:
        print(f"plugin {p['name']} ({p['group']}): {p['status']}: {p['reason']}")
    return 0


def _partition_rows(sess: Session) -> list[dict[str, Any]]:
    rows = []
    op_of = {r.node: r.op_type for r in sess.placement_report}
    for p in sess.partitions:
        ops = Counter(op_of[n] for n in p.nodes)
        rows.append({**p.to_dict(), "node_count": len(p.nodes), "op_counts": dict(ops)})
    return rows


def _print_partitions(sess: Session) -> None:
    from nnrt_core.tools.visualize import format_partition_table

    print(format_partition_table(sess))  # partition, backend, nodes, estimated cost, op types, boundary
    for e in sess.events:
        print(f"  ! {e.kind}: {e.message}")


def _print_passes(report: Any) -> None:
    """The graph before and after the optimization passes: per-pass changes
    and op counts."""
    print(report.summary())
    for s in report.passes.values():
        for note in s.notes[:3]:
            print(f"    {s.name}: {note}")
    ops = sorted(set(report.ops_before) | set(report.ops_after),
                 key=lambda k: (-report.ops_before.get(k, 0), k))
    width = max([len(k) for k in ops] + [7])
    print(f"  {'op type':<{width}}  {'before':>6}  {'after':>6}")
    for k in ops:
        before, after = report.ops_before.get(k, 0), report.ops_after.get(k, 0)
        mark = "" if before == after else "  *"
        print(f"  {k:<{width}}  {before:>6}  {after:>6}{mark}")
    print()


def cmd_partition(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    if getattr(args, "optimization_level", None):
        cfg = cfg.replace(optimization_level=args.optimization_level)
    sess = Session(args.model, cfg)
    if args.input:  # plan for the shapes of the given inputs, as a run with them would
        plan_for_inputs(sess, make_inputs(sess.inputs, args.input, 0))
    data = {
        "model": str(args.model),
        "config": sess.config.to_dict(),
        "partitions": _partition_rows(sess),
        "placement": [p.to_dict() for p in sess.placement_report],
        "events": [e.to_dict() for e in sess.events],
        "considered_plans": sess.considered_plans,
    }
    if getattr(args, "passes", False):
        data["passes"] = sess.pass_report.to_dict()
    for flag, detail in (("svg", False), ("svg_nodes", True)):
        if getattr(args, flag, None):
            from nnrt_core.tools.visualize import write_placement_svg

            path = write_placement_svg(sess, getattr(args, flag), title=Path(str(args.model)).name, detail=detail)
            data[flag] = str(path)
    if args.json:
        print(json.dumps(data, indent=2, default=str))
    else:
        if "passes" in data:
            _print_passes(sess.pass_report)
        _print_partitions(sess)
        _print_considered(sess.considered_plans)
        if data.get("svg"):
            print(f"partition graph coloured by backend written to {data['svg']}")
        if data.get("svg_nodes"):
            print(f"every node coloured by backend written to {data['svg_nodes']}")
    return 0


def _print_considered(plans: list[dict[str, Any]]) -> None:
    """The candidate placements a cost-based scheduler weighed (chosen first)."""
    if not plans:
        return
    print(f"\nplans considered by the scheduler ({len(plans)}):")
    print(f"  {'':3}{'plan':<33}{'est. ms':>10}{'partitions':>12}{'transfer ms':>13}  note")
    for p in plans:
        mark = "->" if p.get("chosen") else ""
        est = p.get("estimated_ms")
        est_s = f"{est:10.3f}" if isinstance(est, (int, float)) and est != float("inf") else f"{'-':>10}"
        tr = p.get("transfer_ms") or 0.0
        note = p.get("problem") or ("measured end to end" if p.get("end_to_end") else "")
        print(f"  {mark:<3}{str(p.get('label', '?'))[:32]:<33}{est_s}{p.get('partitions', 0):>12}{tr:>13.3f}  {note}")


def cmd_check(args: argparse.Namespace) -> int:
    from nnrt_core.tools.accuracy import check_accuracy

    cfg = config_from_args(args)
    feeds = None
    if args.input:
        probe = Session(args.model, ScheduleConfig(backends=[args.reference], backup=None,
                                                   optimization_level="none"))
        feeds = make_inputs(probe.inputs, args.input, args.seed)
    report = check_accuracy(args.model, cfg, feeds=feeds, reference=args.reference, seed=args.seed)
    failed = args.max_rel is not None and report.max_rel > args.max_rel
    if args.json:
        print(json.dumps({"model": str(args.model), **report.to_dict(), "max_rel_allowed": args.max_rel,
                          "ok": not failed}, indent=2, default=str))
    else:
        print(report.format())
        if args.max_rel is not None:
            print(("FAIL" if failed else "ok") + f": max rel {report.max_rel:.3g} (allowed {args.max_rel:g})")
    return 1 if failed else 0


def cmd_compile(args: argparse.Namespace) -> int:
    out_dir = Path(args.output).parent
    if not out_dir.is_dir():  # fail before the build, in one line
        raise ConfigError(f"cannot write {str(args.output)!r}: directory {str(out_dir)!r} does not exist")
    sess = Session(args.model, config_from_args(args))
    try:
        path = sess.save(args.output)
    except OSError as e:  # read-only or full file system...
        raise ConfigError(f"cannot write {str(args.output)!r}: {e.strerror or e}") from e
    data = {
        "model": str(args.model), "output": str(path), "bytes": path.stat().st_size,
        "build_ms": sess.build_seconds * 1e3,
        "partitions": _partition_rows(sess),
        "events": [e.to_dict() for e in sess.events],
    }
    if args.json:
        print(json.dumps(data, indent=2, default=str))
        return 0
    print(f"compiled {args.model} -> {path} ({data['bytes'] / 1e6:.2f} MB, build {data['build_ms']:.0f} ms)")
    _print_partitions(sess)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    sess = Session(args.model, config_from_args(args))
    feeds = make_inputs(sess.inputs, args.input, args.seed)
    plan_for_inputs(sess, feeds)  # free input dims: plan for these shapes before timing
    times = []
    outputs: dict[str, Any] = {}
    for _ in range(max(1, args.repeat)):
        t0 = time.perf_counter()
        outputs = sess.run(feeds)
        times.append(time.perf_counter() - t0)
    trace = sess.profile(feeds) if args.trace else None
    trace_path = trace.save(args.trace) if trace is not None else None
    if args.save:
        Path(args.save).mkdir(parents=True, exist_ok=True)
        for name, value in outputs.items():
            safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
            np.save(Path(args.save) / f"{safe}.npy", np.asarray(value), allow_pickle=False)
    summary = {
        name: {"shape": list(np.shape(v)), "dtype": str(np.asarray(v).dtype),
               **({"min": float(np.min(v)), "max": float(np.max(v)), "mean": float(np.mean(v))}
                  if np.asarray(v).dtype.kind in "fiu" and np.size(v) else {})}
        for name, v in outputs.items()
    }
    placement = Counter(sess.placement.values())
    data = {
        "model": str(args.model),
        "outputs": summary,
        "latency_ms": {"median": float(np.median(times) * 1e3), "min": float(np.min(times) * 1e3),
                       "runs": len(times)},
        "build_ms": sess.build_seconds * 1e3,
        "placement": dict(placement),
        "partitions": [{"index": p.index, "backend": p.backend, "nodes": len(p.nodes)} for p in sess.partitions],
        "events": [e.to_dict() for e in sess.events],
    }
    if trace is not None:
        data["trace"] = str(trace_path)
        data["projection"] = trace.projection.to_dict() if trace.projection is not None else None
    if args.json:
        print(json.dumps(data, indent=2, default=str))
        return 0
    for name, s in summary.items():
        stats = " ".join(f"{k}={s[k]:.4g}" for k in ("min", "max", "mean") if k in s)
        print(f"output {name}: shape={tuple(s['shape'])} dtype={s['dtype']} {stats}")
    print(f"latency: median {data['latency_ms']['median']:.2f} ms over {len(times)} run(s); "
          f"build {data['build_ms']:.0f} ms")
    print("placement: " + ", ".join(f"{b}={n} nodes" for b, n in placement.most_common()))
    _print_partitions(sess)
    if trace is not None:
        print(f"trace of one run written to {trace_path} (open it in ui.perfetto.dev or chrome://tracing)")
        if trace.projection is not None:
            print(trace.projection.format())
    return 0


def _int_list(text: str, flag: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        values = []
    if not values or any(v < 1 for v in values):
        raise InputError(f"{flag} expects comma-separated positive integers, got {text!r}")
    return values


def cmd_bench(args: argparse.Namespace) -> int:
    from nnrt_core.tools.bench import bench_session

    in_flight = _int_list(args.in_flight, "--in-flight")
    if args.runs < 1 or args.warmup < 0:
        raise InputError(f"--runs must be >= 1 and --warmup >= 0, got {args.runs} and {args.warmup}")
    sess = Session(args.model, config_from_args(args))
    feeds = make_inputs(sess.inputs, args.input, args.seed)
    plan_for_inputs(sess, feeds)  # free input dims: plan for these shapes before timing
    progress = args.progress if args.progress is not None else sys.stderr.isatty()
    report = bench_session(sess, feeds, runs=args.runs, warmup=args.warmup, in_flight=in_flight,
                           progress=progress, model=str(args.model))
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(report.format())
    return 0


# ------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nnrt", description="nnrt neural-network inference runtime")
    parser.add_argument("-v", "--verbose", action="store_true", help="log fallbacks and plugin loading")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("devices", help="list backends, devices and schedulers")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_devices)

    p = sub.add_parser("run", help="run a model on random or .npy inputs")
    p.add_argument("model")
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeat", type=int, default=1, help="runs to time (median is reported)")
    p.add_argument("--save", metavar="DIR", help="write each output as DIR/NAME.npy")
    p.add_argument("--trace", metavar="FILE", help="profile one more run, write a Chrome/Perfetto trace JSON and "
                   "print its projected latency (host partitions measured, emulated ones simulated)")
    p.add_argument("--json", action="store_true")
    add_config_flags(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("compile", help="compile a model into an offline session file that runs without it")
    p.add_argument("model")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="the offline model file to write")
    p.add_argument("--json", action="store_true")
    add_config_flags(p)
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser("bench", help="latency percentiles and throughput with N runs in flight")
    p.add_argument("model")
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--runs", type=int, default=20, help="timed runs for latency, and requests per throughput test")
    p.add_argument("--warmup", type=int, default=2, help="untimed runs first")
    p.add_argument("--in-flight", default="1,2,4", metavar="N,N,...", help="requests in flight per throughput test")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar on stderr (default: when stderr is a terminal)")
    p.add_argument("--json", action="store_true")
    add_config_flags(p)
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("partition", help="show where every node of a model would run")
    p.add_argument("model")
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                   help="plan for the shapes of these inputs (models with free input dimensions)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--svg", metavar="FILE",
                   help="also write the partition graph as an SVG that fits a screen: a box per partition "
                        "coloured by backend, boundary tensors as edges, nodes in each box's tooltip")
    p.add_argument("--svg-nodes", metavar="FILE",
                   help="also write every node, coloured by backend, as an SVG (one row per dependency level; "
                        "needs the source model, not a compiled file)")
    p.add_argument("--passes", action="store_true",
                   help="show what the optimization passes changed (op counts before/after)")
    p.add_argument("--optimization-level", choices=OPTIMIZATION_LEVELS,
                   help="graph optimization level (default: the config's, basic)")
    add_config_flags(p)
    p.set_defaults(func=cmd_partition)

    add_quantize_parser(sub)  # nnrt quantize MODEL --calibration DATA -o OUT
    add_batch_parser(sub, add_config_flags, config_from_args)  # nnrt batch MODEL --input PATH --output DIR (Ray)
    add_serve_parser(sub, add_config_flags, config_from_args)  # nnrt serve --model-repository DIR (plugins/serve)

    p = sub.add_parser("check", help="compare each partition's outputs with the reference backend alone")
    p.add_argument("model")
    p.add_argument("--reference", default="numpy", help="reference backend (default: numpy)")
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-rel", type=float, help="exit with status 1 when any max relative difference exceeds this")
    p.add_argument("--json", action="store_true")
    add_config_flags(p)
    p.set_defaults(func=cmd_check)
    return parser


def _import_runtime() -> None:
    """numpy, the registry and the session, for the commands (not for ``--help``)."""
    global np, Session, default_registry, random_feeds
    import numpy as np

    from nnrt_core.registry import default_registry
    from nnrt_core.runtime.feeds import random_feeds
    from nnrt_core.session import Session


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _import_runtime()
    import logging

    logging.basicConfig(level=logging.INFO if args.verbose else logging.ERROR,
                        format="nnrt: %(levelname)s: %(message)s")
    try:
        return args.func(args)
    except NnrtError as e:
        print(f"nnrt: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # a path the user gave cannot be read or written
        print(f"nnrt: error: {e.strerror or e}" + (f": {e.filename!r}" if e.filename else ""), file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
