"""A seeded model fuzzer for nnrt: mutates real ONNX models (bytes, protobuf
fields, schema-valid attribute values) and runs every case through
``Session`` build + run under several configurations in child processes, so
a native crash is caught and reported with its seed and case.

``corpus`` (seed models and their feeds), ``mutate`` (the mutations),
``runner`` (child-process batches, outcome classification).  See
docs/security.md; the long runner is ``benchmarks/fuzz_models.py``.
"""
from __future__ import annotations

from nnrt_fuzz.corpus import SeedModel, load_corpus
from nnrt_fuzz.mutate import Case, make_case
from nnrt_fuzz.runner import CONFIGS, OUTCOMES, FuzzReport, Outcome, classify, run_fuzz

__all__ = ["CONFIGS", "OUTCOMES", "Case", "FuzzReport", "Outcome", "SeedModel", "classify", "load_corpus",
           "make_case", "run_fuzz"]
