"""STFT / DFT between ONNX Runtime and the NumPy backend.

- The NumPy STFT takes every signal form ONNX Runtime takes where the spec
  allows it: real ``[batch, length]``, ``[batch, length, 1]``, complex
  ``[batch, length, 2]`` (two-sided), with a window and/or frame_length.
- The ORT plugin's known-deviation rules for DFT/STFT cover only the
  conformance cases they were written for (integer ramps with exact-zero
  spectra): those still go to the backup, and a vocoder-style STFT on a real
  signal stays on ORT and gives raw ORT's bits.
"""
from __future__ import annotations

import warnings

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from nnrt_core import ScheduleConfig, Session
from nnrt_core.errors import NnrtError
from nnrt_core.frontends.onnx import load_onnx
from nnrt_onnxruntime.deviations import known_deviation


def _stft_model(shape: list, step: int, frame_length: int | None, window: np.ndarray | None,
                onesided: int | None, dtype: int = TensorProto.FLOAT) -> bytes:
    names = ["signal", "frame_step", "window" if window is not None else "", "frame_length" if frame_length else ""]
    while names[-1] == "":
        names.pop()
    inits = [numpy_helper.from_array(np.array(step, np.int64), "frame_step")]
    if frame_length:
        inits.append(numpy_helper.from_array(np.array(frame_length, np.int64), "frame_length"))
    if window is not None:
        inits.append(numpy_helper.from_array(window, "window"))
    attrs = {} if onesided is None else {"onesided": onesided}
    node = helper.make_node("STFT", names, ["spec"], name="stft", **attrs)
    graph = helper.make_graph([node], "stft", [helper.make_tensor_value_info("signal", dtype, shape)],
                              [helper.make_tensor_value_info("spec", dtype, None)], inits)
    graph.output[0].type.tensor_type.shape.dim.add()  # rank 4 (batch, frames, bins, 2), unknown dims
    for _ in range(3):
        graph.output[0].type.tensor_type.shape.dim.add()
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _ort(data: bytes, feeds: dict) -> np.ndarray:
    return ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


FORMS = [  # (signal shape, onesided, frame_length, window length, dtype)
    ((2, 1000), None, None, 256, np.float32),
    ((3, 777), 1, 128, None, np.float32),
    ((1, 1000, 1), None, 64, 64, np.float32),
    ((2, 600, 2), 0, None, 64, np.float32),
    ((2, 600), 0, 32, 32, np.float32),
    ((2, 900), None, None, 128, np.float64),
]


@pytest.mark.parametrize("form", FORMS, ids=[f"{f[0]}-onesided{f[1]}-len{f[2]}-win{f[3]}-{f[4].__name__}" for f in FORMS])
def test_numpy_stft_takes_the_signal_forms_onnxruntime_takes(form):
    shape, onesided, frame_length, win_len, dt = form
    rng = np.random.default_rng(len(shape) * 31 + (win_len or 0))
    window = None if win_len is None else np.hanning(win_len).astype(dt)
    tp = TensorProto.DOUBLE if dt == np.float64 else TensorProto.FLOAT
    data = _stft_model(list(shape), 16, frame_length, window, onesided, tp)
    x = rng.standard_normal(shape).astype(dt)
    want = _ort(data, {"signal": x})
    got = np.asarray(Session(data, ScheduleConfig(backends=["numpy"])).run({"signal": x})["spec"])
    assert got.shape == want.shape and got.dtype == want.dtype
    # power-of-two frames: ORT's FFT is within ~1e-6 of max|ref| (its other lengths differ by ~1e-4)
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()


def test_numpy_stft_refuses_a_one_sided_complex_signal_by_name():
    data = _stft_model([1, 100, 2], 10, 20, None, 1)
    with pytest.raises(NnrtError, match="one-sided STFT needs real input"):
        Session(data, ScheduleConfig(backends=["numpy"])).run({"signal": np.zeros((1, 100, 2), np.float32)})


def _vocoder_stft() -> bytes:
    return _stft_model(["batch", "samples"], 256, None, np.hanning(1024).astype(np.float32), 1)


def test_vocoder_stft_is_not_declined_and_gives_raw_onnxruntime_bits():
    data = _vocoder_stft()
    sess = Session(data, ScheduleConfig(backends=["onnxruntime"]))
    assert [p.backend for p in sess.placement_report] == ["onnxruntime"]
    t = np.arange(16000, dtype=np.float32) / 16000
    x = (np.sin(2 * np.pi * 220 * t) + 0.1 * np.random.default_rng(0).standard_normal(16000)).astype(np.float32)[None]
    np.testing.assert_array_equal(np.asarray(sess.run({"signal": x})["spec"]), _ort(data, {"signal": x}))


def _conformance(name: str):
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return next(c for c in collect_testcases() if c.name == name)


@pytest.mark.parametrize("name", ["test_stft", "test_stft_with_window", "test_dft", "test_dft_rfft_opset19",
                                  "test_dft_irfft"])
def test_fft_conformance_cases_still_go_to_the_backup_and_pass(name):
    case = _conformance(name)
    graph = load_onnx(case.model).graph
    assert all(known_deviation(n) for n in graph.nodes if n.op_type in ("STFT", "DFT"))
    sess = Session(case.model, ScheduleConfig(backends=["onnxruntime"]))
    assert {p.backend for p in sess.placement_report if p.op_type in ("STFT", "DFT")} == {"numpy"}
    inits = {t.name for t in case.model.graph.initializer}
    names = [i.name for i in case.model.graph.input if i.name not in inits]
    for inputs, outputs in case.data_sets:
        got = sess.run({n: np.asarray(numpy_helper.to_array(v) if hasattr(v, "dims") else v)
                        for n, v in zip(names, inputs)})
        np.testing.assert_allclose(np.asarray(got[case.model.graph.output[0].name]), outputs[0],
                                   rtol=case.rtol, atol=case.atol)


def test_stft_without_onesided_is_inferred_one_sided_as_the_spec_says():
    # onnx 1.23's shape inference reads an omitted onesided as 0 (n_fft bins); the spec's default is 1
    data = _stft_model([1, 4096], 256, None, np.hanning(1024).astype(np.float32), None)
    spec = load_onnx(data).graph.outputs[0]
    assert tuple(spec.shape) == (1, 13, 513, 2)
