"""The model fuzzer (tools/nnrt_fuzz): a short seeded run through Session
build + run under numpy, onnxruntime and npu_emu+onnxruntime must crash no
process, raise nothing but NnrtError and leak no internal Python error; the
runner itself catches crashes and deadlines and names the case."""
from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import onnx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))

import nnrt_core  # noqa: E402
from nnrt_core.errors import ExecutionError, ModelLoadError  # noqa: E402
from nnrt_core.frontends.onnx import validate_model  # noqa: E402
from nnrt_fuzz import classify, load_corpus, make_case, run_fuzz  # noqa: E402
from nnrt_fuzz import runner  # noqa: E402

pytest.importorskip("onnxruntime")

#: the short run of the test suite (the long one: benchmarks/fuzz_models.py)
SEED, CASES = 2024, 200


def test_short_seeded_fuzz_run_is_clean():
    t0 = time.perf_counter()
    report = run_fuzz(CASES, SEED, timeout=10.0, batch=100)
    assert len(report.outcomes) == CASES * len(runner.CONFIGS)
    bad = report.of_kind("crash", "other", "internal")
    assert not bad, "\n".join(f"{o.kind} case {o.index} [{o.config}] {o.seed_name} {o.mutation}: {o.message}"
                              for o in bad)
    counts = report.counts()
    assert counts["ok"] > CASES // 4 and counts["clean"] > CASES // 4  # the mutations reach both sides
    print(f"fuzz seed {SEED}: {dict(counts)} in {time.perf_counter() - t0:.1f} s")


def test_every_seed_model_passes_the_validator():
    """No false rejection: onnx's node cases and its real models (small and light) all validate."""
    light = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    models = [s.model for s in load_corpus()] + [onnx.load(str(p), load_external_data=False)
                                                  for p in sorted(light.glob("*.onnx"))]
    for m in models:
        if m.functions:
            m = onnx.inliner.inline_local_functions(m)
        validate_model(m, types=True)
        validate_model(onnx.shape_inference.infer_shapes(m, data_prop=True), types=True)


def test_cases_are_reproducible_from_seed_and_index():
    corpus = load_corpus()
    a, b = make_case(corpus, 7, 123), make_case(corpus, 7, 123)
    assert a.model == b.model and a.mutation == b.mutation and a.seed_name == b.seed_name
    assert make_case(corpus, 8, 123).model != a.model or make_case(corpus, 7, 124).model != a.model


def test_classify():
    assert classify(None) == ("ok", "")
    assert classify(ModelLoadError("node 'x' (Conv): attribute 'group' is 0"))[0] == "clean"
    assert classify(ExecutionError("node 'x' (Col2Im) failed: IndexError: list index out of range"))[0] == "internal"
    assert classify(ExecutionError("node 'x' failed: AttributeError: 'NoneType' object has no attribute 'copy'"))[0] \
        == "internal"
    assert classify(ValueError("boom"))[0] == "other"
    assert classify(MemoryError())[0] == "memory"
    assert classify(runner.Deadline("late"))[0] == "deadline"


def test_runner_reports_a_crash_and_goes_on(monkeypatch):
    real = runner.run_case

    def crashing(case, config, timeout):
        if case.index == 1:
            os.kill(os.getpid(), signal.SIGSEGV)
        return real(case, config, timeout)

    monkeypatch.setattr(runner, "run_case", crashing)  # children are forked: they see the patch
    report = run_fuzz(3, SEED, configs=["numpy"], timeout=10.0)
    kinds = {o.index: o.kind for o in report.outcomes}
    assert kinds[1] == "crash" and kinds[0] != "crash" and kinds[2] != "crash"
    crash = report.of_kind("crash")[0]
    assert "SIGSEGV" in crash.message and crash.seed_name and crash.mutation


def test_runner_counts_a_case_over_its_deadline(monkeypatch):
    def slow_session(*args, **kwargs):
        time.sleep(30)

    monkeypatch.setattr(nnrt_core, "Session", slow_session)
    t0 = time.perf_counter()
    report = run_fuzz(2, SEED, configs=["numpy"], timeout=0.5)
    assert [o.kind for o in report.outcomes] == ["deadline", "deadline"]
    assert time.perf_counter() - t0 < 20
