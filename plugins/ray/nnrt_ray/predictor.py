"""``NnrtPredictor``: the callable class for ``Dataset.map_batches``.  Each
actor holds one :class:`Session`; a batch (a dict of numpy columns, Ray's
native batch format) is mapped to the model's inputs by column name and the
model's outputs come back as new columns::

    shipped = ship("model.onnx", ScheduleConfig(num_threads=1))
    ds.map_batches(NnrtPredictor, fn_constructor_kwargs={"session": shipped},
                   compute=ray.data.ActorPoolStrategy(size=2), batch_size=32,
                   num_cpus=1, resources=shipped.resources)
"""
from __future__ import annotations

import logging
import time
from typing import Any, Mapping, Sequence

import numpy as np

from nnrt_core import Session
from nnrt_core.errors import ExecutionError, InputError, NnrtError
from nnrt_core.plugin_api import TensorInfo
from nnrt_core.plugin_api import looks_like_session_file
from nnrt_ray.rows import BadRow, RowSpec, check_columns, chunks, empty_column, gather_rows, row_specs

__all__ = ["NnrtPredictor", "ON_ERROR", "nonfinite_rows"]

log = logging.getLogger("nnrt.ray")

#: what a bad row (wrong shape or dtype, or a run that fails on it) does
ON_ERROR = ("fail", "skip")


class NnrtPredictor:
    """One nnrt session in one Ray actor.

    ``session``: a :class:`~nnrt_ray.shipping.ShippedSession`, a
    :class:`Session`, or anything ``Session()`` loads (a ``.nnrt`` file's
    path or bytes).  ``input_map``: ``{model input: column}`` where the names
    differ.  ``id_column``: the column naming each row in error reports (kept
    in the output).  ``passthrough``: other columns copied to the output.
    ``on_error``: ``"fail"`` raises :class:`InputError` for the first bad row;
    ``"skip"`` drops bad rows from the output and reports them to
    ``error_sink.add.remote(records)`` (an :class:`~nnrt_ray.errors.ErrorSink`)
    and the log.  ``warmup``: run the session once on zeros before the first
    batch (inputs with static row shapes), so that one-time costs of a first
    run (buffers, kernel set-up) are paid at start-up, not by the first batch.
    ``nonfinite_column``: a bool column of that name is added, true for the
    rows whose outputs hold a NaN or an infinity."""

    def __init__(self, session: Any, *, input_map: Mapping[str, str] | None = None, id_column: str | None = "row_id",
                 passthrough: Sequence[str] = (), on_error: str = "fail", error_sink: Any = None,
                 warmup: bool = False, nonfinite_column: str | None = None) -> None:
        t0 = time.perf_counter()
        if on_error not in ON_ERROR:
            raise InputError(f"on_error must be one of {ON_ERROR}, got {on_error!r}")
        #: how the session was made: "given", "file" (the shipped file, warm), "model" (built here)...
        self.loaded_as = "given"
        if isinstance(session, Session):
            self.session = session
        elif hasattr(session, "load_reporting"):
            self.session, self.loaded_as = session.load_reporting()
        else:
            self.session = Session(session)
            self.loaded_as = "file" if looks_like_session_file(session) else "model"
        self.specs: list[RowSpec] = row_specs(self.session.inputs, input_map)
        self.outputs: list[TensorInfo] = self.session.outputs
        self.id_column, self.passthrough = id_column, tuple(passthrough)
        self.on_error, self.error_sink = on_error, error_sink
        self.nonfinite_column = nonfinite_column
        if warmup and all(None not in s.row_shape for s in self.specs):
            self.session.run({s.name: np.zeros((s.batch or 1, *s.row_shape), s.dtype) for s in self.specs})
        #: seconds this actor took to get its session ready (load or build)
        self.startup_seconds = time.perf_counter() - t0

    # ----------------------------------------------------------------- call
    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        keep = [c for c in (self.id_column, *self.passthrough) if c is not None]
        check_columns(self.specs, list(batch), keep)
        n = len(next(iter(batch.values()))) if batch else 0
        ids = [str(i) for i in batch[self.id_column]] if self.id_column in batch else \
            [f"#{i} of this batch" for i in range(n)]
        feeds, good, bad = gather_rows(self.specs, batch, ids)
        if bad and self.on_error == "fail":
            raise InputError(bad[0].message() + (f" (and {len(bad) - 1} more bad row(s) in this batch)"
                                                 if len(bad) > 1 else ""))
        results, ok, failed = self._run(feeds, [ids[i] for i in good])
        bad += failed
        if bad:
            self._report(bad)
        rows = [good[i] for i in ok]
        out = {c: batch[c][rows] if len(rows) != n else batch[c] for c in keep if c in batch}
        for info in self.outputs:
            out[info.name] = results[info.name] if rows else empty_column(info)
        if self.nonfinite_column is not None:
            out[self.nonfinite_column] = nonfinite_rows([out[o.name] for o in self.outputs], len(rows))
        return out

    def _report(self, bad: list[BadRow]) -> None:
        for b in bad:
            log.warning("skipped %s", b.message())
        if self.error_sink is not None:
            import ray

            ray.get(self.error_sink.add.remote([b.to_dict() for b in bad]))

    # ------------------------------------------------------------------ run
    def _run(self, feeds: dict[str, np.ndarray], ids: list[str]
             ) -> tuple[dict[str, np.ndarray], list[int], list[BadRow]]:
        """Run the good rows in runs of the model's batch size; returns the
        output columns, the rows they hold and rows whose run failed (skip mode)."""
        n = len(ids)
        batch = self.specs[0].batch if self.specs else None
        if any(s.batch != batch for s in self.specs):
            raise InputError(f"model inputs disagree on the batch size: {[(s.name, s.batch) for s in self.specs]}")
        parts: dict[str, list[np.ndarray]] = {o.name: [] for o in self.outputs}
        ok: list[int] = []
        failed: list[BadRow] = []
        for a, b in chunks(n, batch):
            try:
                got = self._run_rows({k: v[a:b] for k, v in feeds.items()}, b - a, batch)
            except NnrtError as e:
                if self.on_error == "fail":
                    cls = InputError if isinstance(e, InputError) else ExecutionError
                    raise cls(f"rows {ids[a]!r}..{ids[b - 1]!r}: {e}") from e
                if batch is None and b - a > 1:  # find the bad row(s): one run per row
                    self._rows_one_by_one(feeds, ids, a, b, parts, ok, failed)
                    continue
                failed += [BadRow(ids[i], "-", f"the run failed: {e}") for i in range(a, b)]
                continue
            for k, v in got.items():
                parts[k].append(v)
            ok += range(a, b)
        if not ok:
            return {}, ok, failed
        return {k: v[0] if len(v) == 1 else np.concatenate(v) for k, v in parts.items()}, ok, failed

    def _rows_one_by_one(self, feeds: dict[str, np.ndarray], ids: list[str], a: int, b: int,
                         parts: dict[str, list[np.ndarray]], ok: list[int], failed: list[BadRow]) -> None:
        for i in range(a, b):
            try:
                got = self._run_rows({k: v[i:i + 1] for k, v in feeds.items()}, 1, None)
            except NnrtError as e:
                failed.append(BadRow(ids[i], "-", f"the run failed: {e}"))
                continue
            for k, v in got.items():
                parts[k].append(v)
            ok.append(i)

    def _run_rows(self, feeds: dict[str, np.ndarray], m: int, batch: int | None) -> dict[str, np.ndarray]:
        """Outputs of ``m`` rows; a fixed batch size larger than ``m`` is
        padded by repeating the last row, and the padding's outputs dropped."""
        if batch is not None and m < batch:
            feeds = {k: np.concatenate([v, np.repeat(v[-1:], batch - m, axis=0)]) for k, v in feeds.items()}
        out = self.session.run(feeds)
        want = m if batch is None else batch
        for name, v in out.items():
            if np.ndim(v) == 0 or np.shape(v)[0] != want:
                raise ExecutionError(f"output {name!r} has shape {np.shape(v)}, not a leading batch axis of "
                                     f"{want} rows; batch inference needs outputs with the inputs' batch axis")
        return {k: np.asarray(v)[:m] for k, v in out.items()}


def nonfinite_rows(columns: Sequence[np.ndarray], n: int) -> np.ndarray:
    """A bool per row: true where any of the output ``columns`` (``n`` rows
    each) holds a NaN or an infinity in that row."""
    flag = np.zeros(n, bool)
    for v in columns:
        v = np.asarray(v)
        if n and v.dtype.kind in "fc":
            flag |= ~np.isfinite(v.reshape(n, -1)).all(axis=1)
    return flag
