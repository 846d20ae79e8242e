"""Run fuzz cases through ``Session`` build + run in child processes and
classify what happened: ok, a clean ``NnrtError``, an ``NnrtError`` whose
message is an internal Python error, another exception, a crash (the child
died), over deadline, over the memory limit."""
from __future__ import annotations

import faulthandler
import multiprocessing as mp
import os
import re
import resource
import signal
import tempfile
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import numpy as np

from nnrt_core.compiler.isolate import start_forked
from nnrt_fuzz.corpus import load_corpus
from nnrt_fuzz.mutate import Case, make_case

__all__ = ["CONFIGS", "OUTCOMES", "FuzzReport", "Outcome", "classify", "run_fuzz"]

#: configuration name -> ScheduleConfig keywords
CONFIGS: dict[str, dict] = {
    "numpy": {"backends": ["numpy"]},
    "onnxruntime": {"backends": ["onnxruntime"], "backup": "numpy"},
    # the emulated chip in its own precision (under fp32 it would decline every float node)
    "npu_emu+onnxruntime": {"backends": ["npu_emu", "onnxruntime"], "backup": "numpy", "precision": "fp16"},
}
OUTCOMES = ("ok", "clean", "internal", "other", "crash", "deadline", "memory")

#: Python errors that mean a bug in nnrt when they show up in an NnrtError's message
INTERNAL = re.compile(r"\b(ZeroDivisionError|IndexError|OverflowError|KeyError|TypeError|AttributeError|"
                      r"RecursionError|UnboundLocalError|NameError|AssertionError|StopIteration|"
                      r"UnicodeDecodeError|UnicodeEncodeError)\b|object has no attribute")
#: feeds are synthesized up to this many elements
MAX_FEED_ELEMENTS = 1 << 22


class Deadline(BaseException):
    """Raised in the child by the per-case timer (a BaseException: nnrt does not wrap it)."""


@dataclass(frozen=True)
class Outcome:
    """What one (case, configuration) did."""

    index: int
    config: str
    kind: str
    message: str
    seed_name: str = ""
    mutation: str = ""


@dataclass
class FuzzReport:
    """Outcomes of a run and their counts by kind."""

    seed: int
    outcomes: list[Outcome] = field(default_factory=list)

    def counts(self, config: str | None = None) -> Counter:
        return Counter(o.kind for o in self.outcomes if config is None or o.config == config)

    def of_kind(self, *kinds: str) -> list[Outcome]:
        return [o for o in self.outcomes if o.kind in kinds]


def _chain(e: BaseException) -> Iterable[BaseException]:
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


def classify(e: BaseException | None) -> tuple[str, str]:
    """(outcome kind, first line of the message) of an exception (``None``: ok)."""
    from nnrt_core.errors import MemoryBudgetError, NnrtError

    if e is None:
        return "ok", ""
    msg = f"{type(e).__name__}: {e}".splitlines()[0][:500]
    if any(isinstance(x, Deadline) for x in _chain(e)):
        return "deadline", msg
    if isinstance(e, MemoryBudgetError):  # refused before allocating: the budget did its job
        return "clean", msg
    if isinstance(e, MemoryError) or (isinstance(e, NnrtError) and "MemoryError" in msg):
        return "memory", msg
    if isinstance(e, NnrtError):
        return ("internal" if INTERNAL.search(str(e)) else "clean"), msg
    return "other", msg


def _dims(shape: Sequence, like: np.ndarray | None) -> tuple[int, ...] | None:
    dims = []
    for k, d in enumerate(shape):
        if isinstance(d, int):
            dims.append(d)
        elif like is not None and like.ndim == len(shape):
            dims.append(like.shape[k])
        else:
            dims.append(1)
    return tuple(dims) if int(np.prod(dims)) <= MAX_FEED_ELEMENTS else None


def feeds_for(sess, case: Case) -> dict[str, np.ndarray] | None:
    """The seed's feeds where they fit the session's inputs, else synthesized
    ones (``None`` when a declared input is too large to synthesize)."""
    feeds = {}
    for info in sess.inputs:
        given = case.feeds.get(info.name)
        dtype = info.dtype if isinstance(info.dtype, np.dtype) else None
        if given is not None and (dtype is None or given.dtype == dtype):
            feeds[info.name] = given
            continue
        shape = _dims(info.shape or (), given) if info.shape is not None else (given.shape if given is not None
                                                                                else ())
        if shape is None or dtype is None:
            return None
        feeds[info.name] = np.ones(shape, dtype) if dtype != object else np.full(shape, "a", object)
    return feeds


def run_case(case: Case, config: str, timeout: float) -> tuple[str, str]:
    """Build a Session of ``case`` under ``config`` and run it once; its outcome."""
    from nnrt_core import ScheduleConfig, Session

    def on_alarm(signum, frame):
        raise Deadline(f"over the {timeout} s deadline")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        sess = Session(case.model, ScheduleConfig(**CONFIGS[config]))
        feeds = feeds_for(sess, case)
        if feeds is not None:
            sess.run(feeds)
        result = classify(None)
    except BaseException as e:  # noqa: BLE001 - classifying everything is the point
        if isinstance(e, KeyboardInterrupt):
            raise
        result = classify(e)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    return result


def _child(conn, seed: int, units: list[tuple[int, str]], timeout: float, memory: int, log: str) -> None:
    faulthandler.disable()  # a fault is the parent's to report (with the case), not a traceback on our stderr
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 2)
    if memory:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    warnings.simplefilter("ignore")
    np.seterr(all="ignore")
    try:
        import onnxruntime

        onnxruntime.set_default_logger_severity(4)
    except ImportError:
        pass
    corpus = load_corpus()
    case = None
    for index, config in units:
        if case is None or case.index != index:
            case = make_case(corpus, seed, index)
            conn.send(("case", index, case.seed_name, case.mutation))
        conn.send(("start", index, config))
        kind, msg = run_case(case, config, timeout)
        conn.send(("done", index, config, kind, msg))
        if kind == "deadline":
            return  # the timer may have interrupted anything: a fresh child goes on


def _tail(path: str) -> str:
    try:
        with open(path, "rb") as f:
            lines = [x for x in f.read()[-4000:].decode("utf-8", "replace").splitlines() if x.strip()]
    except OSError:
        return ""
    return " | ".join(lines[-3:])[:400]


def _run_batch(seed: int, units: list[tuple[int, str]], timeout: float, memory: int,
               report: FuzzReport, described: dict[int, tuple[str, str]]) -> None:
    """Run ``units`` in child processes (a fresh one after each crash or deadline)."""
    ctx = mp.get_context("fork")
    pos = 0
    while pos < len(units):
        log = tempfile.mktemp(prefix="nnrt-fuzz-", suffix=".log")
        parent, child = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_child, args=(child, seed, units[pos:], timeout, memory, log), daemon=True)
        start_forked(p)  # the child's collector must not finalize the parent's ONNX Runtime sessions
        child.close()
        started = None
        while True:
            if not parent.poll(timeout * 3 + 30):
                p.kill()
                kind, msg = "deadline", f"child stalled for {timeout * 3 + 30:.0f} s (killed)"
                break
            try:
                msg_ = parent.recv()
            except EOFError:
                p.join()
                code = p.exitcode
                kind = "crash"
                sig = -code if code is not None and code < 0 else None
                msg = (f"child killed by signal {signal.Signals(sig).name}" if sig else f"child exited {code}")
                msg += f"; stderr: {_tail(log)}"
                break
            if msg_[0] == "case":
                described[msg_[1]] = (msg_[2], msg_[3])
            elif msg_[0] == "start":
                started = (msg_[1], msg_[2])
            else:
                i, cfg, k, m = msg_[1:]
                report.outcomes.append(Outcome(i, cfg, k, m, *described.get(i, ("", ""))))
                started = None
                pos += 1
        p.join(5)
        if started is not None:
            report.outcomes.append(Outcome(*started, kind, msg, *described.get(started[0], ("", ""))))
            pos += 1
        elif kind == "crash" and p.exitcode != 0 and pos < len(units):  # died between cases
            report.outcomes.append(Outcome(*units[pos], kind, msg, *described.get(units[pos][0], ("", ""))))
            pos += 1
        try:
            os.unlink(log)
        except OSError:
            pass


def run_fuzz(cases: int, seed: int = 0, *, start: int = 0, configs: Sequence[str] = tuple(CONFIGS),
             timeout: float = 10.0, batch: int = 100, memory: int = 4 << 30,
             progress: Callable[[FuzzReport, float], None] | None = None) -> FuzzReport:
    """Run cases ``start .. start+cases`` of the run seeded ``seed`` under
    ``configs``, ``batch`` cases per child process; each (case, config) gets
    ``timeout`` seconds and the child ``memory`` bytes of address space."""
    load_corpus()  # once, in the parent: children are forked with it
    os.environ.setdefault("NNRT_CACHE_DIR", tempfile.mkdtemp(prefix="nnrt-fuzz-cache-"))  # probes stay private
    report = FuzzReport(seed)
    described: dict[int, tuple[str, str]] = {}
    t0 = time.perf_counter()
    for b in range(start, start + cases, batch):
        units = [(i, c) for i in range(b, min(b + batch, start + cases)) for c in configs]
        _run_batch(seed, units, timeout, memory, report, described)
        if progress is not None:
            progress(report, time.perf_counter() - t0)
    return report
