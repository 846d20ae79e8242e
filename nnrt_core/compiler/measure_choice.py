"""Choosing among measured candidate plans (:mod:`nnrt_core.compiler.measure`):
the fastest eligible plan (a split only under ``SPLIT_MARGIN`` times the best
whole-model plan's median), ``precision="auto"``'s error check against the
fastest fp32 plan on real engines (:func:`output_error`), the plan built
unmeasured when no plan ran on the measurement inputs, and the report: every
candidate in ``considered_plans``, a ``plan_measured`` event saying why.  The
events of a candidate that is not chosen are held back from the session's
events (and its log): they are in its ``considered_plans`` entry (``warnings``)."""
from __future__ import annotations

import statistics
from typing import Sequence

import numpy as np

from nnrt_core.compiler.measure_inputs import FREE_DIM_SIZES
from nnrt_core.compiler.model import CompiledModel, EventLog, HeldEventLog
from nnrt_core.config import ScheduleConfig
from nnrt_core.errors import ConfigError
from nnrt_core.logs import INFO
from nnrt_core.placement import PlanCandidate

__all__ = ["SPLIT_MARGIN", "Built", "chosen", "output_error"]

#: a split plan wins only when its median is below this fraction of the best whole-model plan's
SPLIT_MARGIN = 0.97

#: per candidate: (the candidate, its built model or None, why it is out or None)
Built = Sequence[tuple[PlanCandidate, "CompiledModel | None", "str | None"]]


def chosen(built: Built, results: list[dict], config: ScheduleConfig, events: EventLog) -> CompiledModel:
    """The winner of the measured ``built`` plans (``results``: per plan its
    runs, problem and outputs), its events merged after ``events`` and the
    report set (see the module docstring)."""
    medians = [statistics.median(r["runs"]) if r["runs"] else None for r in results]
    errors = _errors(built, results, medians)
    eligible = [m is not None for m in medians]
    for i, err in enumerate(errors):
        if err is not None and not err <= config.precision_tolerance:
            eligible[i] = False  # a plan that changes the answer this much is never chosen, whatever its label
            results[i]["problem"] = (f"error {err:.3g} of max|fp32 output| is over precision_tolerance "
                                     f"{config.precision_tolerance:g}")
    whole = [m for (c, _, _), m, ok in zip(built, medians, eligible) if ok and not c.split]
    best_whole = min(whole) if whole else None

    def rank(i: int) -> float:
        m = medians[i]
        if m is None or not eligible[i]:
            return float("inf")
        split = built[i][0].split
        return m / SPLIT_MARGIN if split and best_whole is not None else m  # a split must beat the margin

    order = sorted(range(len(built)), key=rank)
    win = order[0]
    unmeasured = None
    if not eligible[win]:
        problems = "; ".join(f"{c.label}: {r['problem']}" for (c, _, _), r in zip(built, results))
        unmeasured = _unmeasured_choice(built, results)
        if unmeasured is None:
            raise ConfigError(f"scheduler 'measured': no candidate plan could be built and run ({problems})")
        win = unmeasured
        order = [win] + [i for i in order if i != win]
    cand, model, _ = built[win]
    assert model is not None
    considered = [_considered(built[i], results[i], medians[i], errors[i], i == win, config) for i in order]
    if unmeasured is None:
        why = _why(cand, medians[win], built, medians, [r["problem"] for r in results],
                   [len(r["runs"]) for r in results])
        timing = next((r["timing"] for r in results if "timing" in r), None)
        if timing:
            why += f"; timed in {timing}"
    elif config.measure_feeds is not None:  # the user's feeds: every plan failed on real inputs
        why = (f"no candidate plan ran on the measure_feeds: {problems}; built {cand.label!r} without measuring "
               "(the priority order)")
    else:  # the synthetic inputs, not every plan, are the likely culprit: the static choice, said so
        why = (f"no candidate plan ran on the measurement inputs (free dimensions taken as "
               f"{', '.join(map(str, FREE_DIM_SIZES))}; integers 0): {problems}; built {cand.label!r} without "
               "measuring (the priority order); give measure_feeds (real inputs) or input_shapes to measure")
    if isinstance(model.events, HeldEventLog):
        model.events.release()  # the chosen plan's events are the session's: logged now
    merged = EventLog(events)
    merged.extend(model.events)
    merged.add("plan_measured", ",".join(cand.backends), why, level=INFO)
    model.events, model.considered_plans = merged, considered
    return model


def _considered(entry: tuple[PlanCandidate, CompiledModel | None, str | None], result: dict, median: float | None,
                error: float | None, won: bool, config: ScheduleConfig) -> dict:
    """One ``considered_plans`` entry; a plan not chosen keeps its own warnings (``warnings``)."""
    c, m, _ = entry
    held = m.events.warnings() if not won and m is not None and isinstance(m.events, HeldEventLog) else []
    return {"label": c.label, "backends": list(c.backends), "split": c.split, "source": "measured",
            "estimated_ms": None if median is None else median * 1e3,
            "runs": len(result["runs"]), "partitions": len(m.steps) if m is not None else 0,
            "chosen": won, "end_to_end": True, "problem": result["problem"],
            "precision": c.precision or config.precision, "max_rel_err": error, "warnings": held}


def _unmeasured_choice(built: Built, results: list[dict]) -> int | None:
    """When every plan that was built failed only at its runs on the
    measurement inputs (silero VAD: a sample rate of 0 and 64 or 1024 samples
    take a branch it cannot run), the plan the priority order makes, in fp32:
    the priority split, or the whole-model plan it was placed as, else the
    first fp32 plan built.  ``None`` when no plan was built."""
    ran = [i for i, (_, m, _) in enumerate(built) if m is not None]
    if not ran or not all(str(results[i]["problem"] or "").startswith("run failed") for i in ran):
        return None
    fp32 = [i for i in ran if built[i][0].precision in (None, "fp32")]  # never a lower precision unmeasured
    labels = {built[i][0].label: i for i in fp32}
    for cand, _, problem in built:
        if cand.split and cand.precision in (None, "fp32"):
            if cand.label in labels:
                return labels[cand.label]
            same = next((lab for lab in labels if problem and f"placed exactly as {lab!r}" in problem), None)
            if same is not None:
                return labels[same]
    return fp32[0] if fp32 else None


def _errors(built: Built, results: list[dict], medians: list[float | None]) -> list[float | None]:
    """Per plan: its worst output's ``max|out - ref| / max|ref|`` against the
    fastest fp32 plan's outputs on the same feeds (None: no outputs to compare)."""
    fp32 = [i for i, (c, m, _) in enumerate(built)
            if c.precision in (None, "fp32") and medians[i] is not None and "outputs" in results[i]]
    if not fp32:
        return [None] * len(built)
    # the reference: an fp32 plan on real engines first (an emulated chip may store fp32 requests in fp16)
    ref = results[min(fp32, key=lambda i: (_emulated(built[i][1]), medians[i]))]["outputs"]
    out: list[float | None] = []
    for res in results:
        got = res.get("outputs")
        if got is None or res["problem"] is not None:
            out.append(None)
            continue
        worst = 0.0
        for a, b in zip(got, ref):
            worst = max(worst, output_error(np.asarray(a), np.asarray(b)))
        out.append(worst)
    return out


def output_error(got: np.ndarray, ref: np.ndarray) -> float:
    """``max|got - ref| / max|ref|`` over the reference's finite values; the
    non-finite ones (an attention mask's -inf, a NaN) must come out the same.
    ``inf`` when the error cannot be measured (another shape, a NaN or inf
    where the reference is finite), so such a plan is never chosen."""
    if got.shape != ref.shape:
        return float("inf")
    if got.dtype.kind not in "biuf" or not got.size:
        return 0.0 if np.array_equal(got, ref) else float("inf")
    a64, b64 = got.astype(np.float64), ref.astype(np.float64)
    finite = np.isfinite(b64)
    if not np.array_equal(a64[~finite], b64[~finite], equal_nan=True):
        return float("inf")
    if not finite.any():
        return 0.0
    ref_finite = b64[finite]
    scale = float(np.max(np.abs(ref_finite))) or 1.0
    err = float(np.max(np.abs(a64[finite] - ref_finite))) / scale
    return err if np.isfinite(err) else float("inf")


def _emulated(model: CompiledModel | None) -> bool:
    return model is not None and any(getattr(st.backend, "emulated", False) for st in model.steps)


def _why(cand: PlanCandidate, median: float, built: Built,
         medians: list[float | None], problems: list[str | None], runs: list[int]) -> str:
    figures = ", ".join(f"{c.label} {m * 1e3:.3g} ms ({n} runs)" if m is not None else f"{c.label} ({problem})"
                        for (c, _, _), m, n, problem in zip(built, medians, runs, problems))
    text = f"measured plans on the session's input shapes (median per run): {figures}; chose {cand.label!r}"
    if not cand.split and any(c.split and m is not None and m < median for (c, _, _), m in zip(built, medians)):
        text += f" (a split plan is kept only when under {SPLIT_MARGIN:g}x the best whole-model plan)"
    return text
