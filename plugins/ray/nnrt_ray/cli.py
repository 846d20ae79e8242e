"""The body of ``nnrt batch`` (the core's CLI finds it through the
``nnrt.commands`` entry point ``batch``, so the core never imports Ray)."""
from __future__ import annotations

import argparse
import json
import sys

from nnrt_core import ScheduleConfig
from nnrt_ray.job import run_batch

__all__ = ["run_command"]


def run_command(args: argparse.Namespace, config: ScheduleConfig) -> int:
    """Run the job ``args`` describes with ``config``; print its summary."""
    if config.num_threads is None:  # one intra-op thread per actor: Ray scales out with actors
        config = config.replace(num_threads=1)
    report = run_batch(args.model, args.input, args.output, config=config, workers=args.workers,
                       batch_size=args.batch_size, address=args.address, on_error=args.on_error, fmt=args.format,
                       id_column=args.id_column, progress=args.progress)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, default=str))
        return 0
    print(f"\nnnrt batch: {report.rows} rows -> {report.output} ({report.format}) in {report.seconds:.1f} s "
          f"with {report.workers} worker(s); session {'compiled once, loaded warm' if report.shipped == 'file' else 'built in every worker'}"
          + (f"; device resources per worker {report.resources}" if report.resources else ""))
    if report.bad_rows:
        print(f"nnrt batch: {len(report.bad_rows)} bad row(s) skipped (listed in {report.output}/_errors.jsonl):",
              file=sys.stderr)
        for r in report.bad_rows[:10]:
            print(f"  row {r['row_id']!r}, column {r['column']!r}: {r['error']}", file=sys.stderr)
    if report.nonfinite_rows:
        print(f"nnrt batch: {len(report.nonfinite_rows)} row(s) gave NaN or infinite outputs (column "
              f"'_nonfinite', listed in {report.output}/_nonfinite.jsonl): "
              + ", ".join(repr(i) for i in report.nonfinite_rows[:10]), file=sys.stderr)
    return 0
