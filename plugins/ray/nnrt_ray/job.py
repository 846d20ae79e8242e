"""``run_batch``: the whole batch job of ``nnrt batch`` — read the input as a
Ray Dataset, map it through an actor pool of :class:`NnrtPredictor` (one
session each, loaded warm from the shipped offline file), write the outputs
with their row ids (Parquet or ``.npz``) and report bad rows."""
from __future__ import annotations

import json
import re
import sys
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import ray

from nnrt_core import ScheduleConfig
from nnrt_core import errors as nnrt_errors
from nnrt_core.errors import ConfigError, NnrtError
from nnrt_ray.cluster import check_resources, connect
from nnrt_ray.errors import start_error_sink
from nnrt_ray.predictor import ON_ERROR, NnrtPredictor
from nnrt_ray.rows import BadRow, row_specs
from nnrt_ray.shipping import ShippedSession, ship
from nnrt_ray.sources import ROW_ID, open_input

__all__ = ["BatchReport", "run_batch", "map_dataset", "FORMATS", "NONFINITE"]

FORMATS = ("parquet", "npz")
#: the output column flagging rows whose outputs are not all finite
NONFINITE = "_nonfinite"


@dataclass
class BatchReport:
    """What a batch job did."""

    rows: int
    bad_rows: list[dict[str, Any]]
    output: str
    format: str
    workers: int
    seconds: float
    build_seconds: float
    shipped: str  #: "file" (compiled once, loaded warm) or "model" (built in each actor)
    resources: dict[str, float] = field(default_factory=dict)
    #: ids of the written rows whose outputs hold a NaN or an infinity (flagged in the NONFINITE column)
    nonfinite_rows: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def map_dataset(ds: "ray.data.Dataset", shipped: ShippedSession, *, workers: int, batch_size: int,
                on_error: str = "fail", error_sink: Any = None, max_restarts: int = 3,
                max_task_retries: int = 3, **predictor_kwargs: Any) -> "ray.data.Dataset":
    """``ds`` mapped through ``workers`` :class:`NnrtPredictor` actors (one
    CPU and the session's device resources each); a dead actor is restarted
    (``max_restarts``) and its batches retried (``max_task_retries``)."""
    with warnings.catch_warnings():  # Ray 2.60 deprecates max_restarts here (no named parameter yet)
        warnings.filterwarnings("ignore", message=".*ray_remote_args.*deprecated")
        return ds.map_batches(
            NnrtPredictor, batch_size=batch_size, batch_format="numpy", zero_copy_batch=True,
            fn_constructor_kwargs={"session": shipped, "on_error": on_error, "error_sink": error_sink,
                                   "id_column": ROW_ID, **predictor_kwargs},
            compute=ray.data.ActorPoolStrategy(size=workers), num_cpus=1, resources=shipped.resources or None,
            max_restarts=max_restarts, max_task_retries=max_task_retries)


def _prepare_output(out: Path, fmt: str) -> None:
    if fmt not in FORMATS:
        raise ConfigError(f"--format must be one of {FORMATS}, got {fmt!r}")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"--output {str(out)!r} exists and is not an empty folder; give a new folder "
                          "(the job writes its part files, _errors.jsonl and _summary.json there)")
    out.mkdir(parents=True, exist_ok=True)


def _write_npz(ds: "ray.data.Dataset", out: Path, progress: Callable[[int], None]) -> tuple[int, list[str]]:
    """Rows written and the ids of the rows flagged non-finite."""
    rows, flagged = 0, []
    for k, batch in enumerate(ds.iter_batches(batch_size=None, batch_format="numpy")):
        n = len(batch[ROW_ID])
        if n:
            np.savez(out / f"part-{k:05d}.npz", **{c: _plain(v) for c, v in batch.items()})
            if NONFINITE in batch:
                flagged += [str(i) for i in np.asarray(batch[ROW_ID])[np.asarray(batch[NONFINITE], bool)]]
        rows += n
        progress(rows)
    return rows, flagged


def _plain(v: np.ndarray) -> np.ndarray:
    """A column as an array ``np.load`` reads without pickle (row ids: str, ragged outputs: stacked)."""
    v = np.asarray(v)
    if v.dtype == object and len(v) and isinstance(v[0], str):
        return v.astype(str)
    if v.dtype == object and len(v):
        return np.stack(list(v))
    return v


def _write_parquet(ds: "ray.data.Dataset", out: Path) -> tuple[int, list[str]]:
    """Rows written and the ids of the rows flagged non-finite (read back: two small columns)."""
    import pyarrow.parquet as pq

    ds.write_parquet(str(out))
    rows, flagged = 0, []
    for f in sorted(out.glob("*.parquet")):
        pf = pq.ParquetFile(f)
        rows += pf.metadata.num_rows
        if NONFINITE in pf.schema_arrow.names:
            t = pf.read(columns=[ROW_ID, NONFINITE])
            flagged += [i for i, bad in zip(t[ROW_ID].to_pylist(), t[NONFINITE].to_pylist()) if bad]
    return rows, flagged


_REMOTE_ERROR = re.compile(r"nnrt_core\.errors\.(\w+): (.*)")


def _unwrap(e: BaseException) -> NnrtError | None:
    """The nnrt error behind a Ray task failure, if any: Ray Data hands the
    driver a ``UserCodeException`` whose text holds the worker's traceback."""
    for m in _REMOTE_ERROR.finditer(str(e)):
        cls = getattr(nnrt_errors, m.group(1), None)
        if isinstance(cls, type) and issubclass(cls, NnrtError):
            return cls(m.group(2).strip())
    return None


def run_batch(model: Any, input_path: str | Path, output: str | Path, *, config: ScheduleConfig | None = None,
              workers: int | None = None, batch_size: int = 32, address: str | None = None,
              on_error: str = "fail", fmt: str = "parquet", id_column: str | None = None,
              progress: bool | None = None, max_restarts: int = 3, max_task_retries: int = 3) -> BatchReport:
    """Run ``model`` over every row of ``input_path`` on Ray and write the outputs to ``output``."""
    if on_error not in ON_ERROR:
        raise ConfigError(f"--on-error must be one of {ON_ERROR}, got {on_error!r}")
    if batch_size < 1 or (workers is not None and workers < 1):
        raise ConfigError(f"--batch-size and --workers must be >= 1, got {batch_size} and {workers}")
    out = Path(output)
    _prepare_output(out, fmt)
    started = connect(address)
    try:
        t0 = time.perf_counter()
        config = config if config is not None else ScheduleConfig(num_threads=1)
        shipped = ship(model, config)
        workers = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        check_resources(shipped.resources, workers)
        skipped: list[BadRow] = []  # array files the model cannot take, found before Ray reads them
        ds = open_input(input_path, row_specs(shipped.inputs), id_column, block_rows=batch_size,
                        skipped=skipped if on_error == "skip" else None)
        ray.data.DataContext.get_current().enable_progress_bars = bool(sys.stderr.isatty() if progress is None
                                                                        else progress)
        sink = start_error_sink() if on_error == "skip" else None
        mapped = map_dataset(ds, shipped, workers=workers, batch_size=batch_size, on_error=on_error,
                             error_sink=sink, max_restarts=max_restarts, max_task_retries=max_task_retries,
                             nonfinite_column=NONFINITE)
        show = progress if progress is not None else sys.stderr.isatty()
        try:
            rows, flagged = _write_npz(mapped, out, _progress_printer(show)) if fmt == "npz" \
                else _write_parquet(mapped, out)
        except Exception as e:
            cause = _unwrap(e)
            if cause is None:
                raise
            raise cause from e
        bad = [b.to_dict() for b in skipped] + (ray.get(sink.get.remote()) if sink is not None else [])
        report = BatchReport(rows, bad, str(out), fmt, workers, time.perf_counter() - t0, shipped.build_seconds,
                             shipped.mode, dict(shipped.resources), sorted(flagged))
        _write_reports(out, report)
        return report
    finally:
        if started:
            ray.shutdown()


def _progress_printer(show: bool) -> Callable[[int], None]:
    def show_rows(rows: int) -> None:
        print(f"\rnnrt batch: {rows} rows written", end="", file=sys.stderr, flush=True)
    return show_rows if show else (lambda rows: None)


def _write_reports(out: Path, report: BatchReport) -> None:
    with open(out / "_errors.jsonl", "w") as f:
        for r in report.bad_rows:
            f.write(json.dumps(r) + "\n")
    with open(out / "_nonfinite.jsonl", "w") as f:
        for row_id in report.nonfinite_rows:
            f.write(json.dumps({"row_id": row_id}) + "\n")
    summary = {k: v for k, v in report.to_dict().items() if k not in ("bad_rows", "nonfinite_rows")}
    (out / "_summary.json").write_text(json.dumps({**summary, "bad_rows": len(report.bad_rows),
                                                   "nonfinite_rows": len(report.nonfinite_rows)}, indent=2))


