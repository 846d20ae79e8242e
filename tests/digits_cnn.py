"""A small CNN trained on scikit-learn's digits in pure NumPy (test helper).

The model is trained at test time (a fixed seed, about a second on one core)
so that the quantization accuracy test measures a real trained network on
real data without committing a binary model file:

    conv 3x3 (1->8) -> relu -> maxpool 2 -> conv 3x3 (8->16) -> relu -> maxpool 2
    -> flatten -> gemm (64->10)

``python tests/digits_cnn.py OUT_DIR`` writes ``digits_cnn.onnx``,
``calibration.npz`` and ``test.npz`` there, for trying ``nnrt quantize`` by hand.
"""
from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto
from onnx import helper as h
from onnx import numpy_helper as nh

__all__ = ["DigitsData", "load_digits_split", "train_digits_cnn", "predict", "to_onnx_model", "accuracy"]


@dataclass
class DigitsData:
    x_train: np.ndarray  #: float32 [N, 1, 8, 8] in [0, 1]
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def load_digits_split(seed: int = 0, test_fraction: float = 0.2) -> DigitsData:
    """scikit-learn's digits (1797 8x8 images shipped inside the package),
    shuffled with ``seed`` and split into train / held-out test.

    The CSV is read from the installed package the way
    ``sklearn.datasets.load_digits`` does, without importing scikit-learn
    (which takes seconds)."""
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("scikit-learn is not installed (pip install -r requirements-dev.txt)")
    path = Path(spec.submodule_search_locations[0]) / "datasets" / "data" / "digits.csv.gz"
    raw = np.loadtxt(path, delimiter=",", dtype=np.float32)
    x = (raw[:, :-1] / 16.0).reshape(-1, 1, 8, 8)
    y = raw[:, -1].astype(np.int64)
    perm = np.random.default_rng(seed).permutation(len(x))
    n_test = int(round(len(x) * test_fraction))
    te, tr = perm[:n_test], perm[n_test:]
    return DigitsData(x[tr], y[tr], x[te], y[te])


# ------------------------------------------------------------- layers
def _im2col(x: np.ndarray) -> np.ndarray:
    """[B, C, H, W] -> [B, H*W, C*9] for a 3x3 kernel, stride 1, padding 1."""
    B, C, H, W = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.empty((B, C, 3, 3, H, W), x.dtype)
    for i in range(3):
        for j in range(3):
            cols[:, :, i, j] = xp[:, :, i:i + H, j:j + W]
    return cols.reshape(B, C * 9, H * W).transpose(0, 2, 1)


def _col2im(dcols: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    B, C, H, W = shape
    d = dcols.transpose(0, 2, 1).reshape(B, C, 3, 3, H, W)
    dxp = np.zeros((B, C, H + 2, W + 2), dcols.dtype)
    for i in range(3):
        for j in range(3):
            dxp[:, :, i:i + H, j:j + W] += d[:, :, i, j]
    return dxp[:, :, 1:-1, 1:-1]


def _conv(x, w, b):
    cols = _im2col(x)
    B, _, H, W = x.shape
    y = cols @ w.reshape(w.shape[0], -1).T + b
    return y.transpose(0, 2, 1).reshape(B, w.shape[0], H, W), cols


def _conv_back(dy, cols, x_shape, w):
    B, M, H, W = dy.shape
    d = dy.reshape(B, M, H * W).transpose(0, 2, 1)  # [B, HW, M]
    dw = np.einsum("bpm,bpk->mk", d, cols).reshape(w.shape)
    db = d.sum(axis=(0, 1))
    dx = _col2im(d @ w.reshape(M, -1), x_shape)
    return dx, dw, db


def _pool(x):
    B, C, H, W = x.shape
    win = x.reshape(B, C, H // 2, 2, W // 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(B, C, H // 2, W // 2, 4)
    arg = win.argmax(-1)
    return np.take_along_axis(win, arg[..., None], -1)[..., 0], arg


def _pool_back(dy, arg, x_shape):
    B, C, H, W = x_shape
    win = np.zeros((B, C, H // 2, W // 2, 4), dy.dtype)
    np.put_along_axis(win, arg[..., None], dy[..., None], -1)
    return win.reshape(B, C, H // 2, W // 2, 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(x_shape)


def _forward(p: dict[str, np.ndarray], x: np.ndarray, keep: bool = False):
    c1, cols1 = _conv(x, p["w1"], p["b1"])
    r1 = np.maximum(c1, 0)
    p1, a1 = _pool(r1)
    c2, cols2 = _conv(p1, p["w2"], p["b2"])
    r2 = np.maximum(c2, 0)
    p2, a2 = _pool(r2)
    f = p2.reshape(len(x), -1)
    logits = f @ p["w3"].T + p["b3"]
    if not keep:
        return logits
    return logits, (x, c1, cols1, r1, a1, p1, c2, cols2, r2, a2, p2, f)


def train_digits_cnn(data: DigitsData, *, epochs: int = 10, batch: int = 64, lr: float = 1e-2,
                     seed: int = 0) -> dict[str, np.ndarray]:
    """Adam on softmax cross-entropy with hand-written backprop; float32."""
    rng = np.random.default_rng(seed)

    def he(*shape):
        return (rng.standard_normal(shape) * np.sqrt(2.0 / np.prod(shape[1:]))).astype(np.float32)

    p = {"w1": he(8, 1, 3, 3), "b1": np.zeros(8, np.float32), "w2": he(16, 8, 3, 3),
         "b2": np.zeros(16, np.float32), "w3": he(10, 64), "b3": np.zeros(10, np.float32)}
    m = {k: np.zeros_like(v) for k, v in p.items()}
    v2 = {k: np.zeros_like(v) for k, v in p.items()}
    b1, b2, eps, t = 0.9, 0.999, 1e-8, 0
    n = len(data.x_train)
    for _ in range(epochs):
        perm = rng.permutation(n)
        for s in range(0, n, batch):
            idx = perm[s:s + batch]
            x, y = data.x_train[idx], data.y_train[idx]
            logits, (x, c1, cols1, r1, a1, p1, c2, cols2, r2, a2, p2, f) = _forward(p, x, keep=True)
            z = logits - logits.max(1, keepdims=True)
            prob = np.exp(z) / np.exp(z).sum(1, keepdims=True)
            dl = prob
            dl[np.arange(len(y)), y] -= 1
            dl /= len(y)
            g = {"w3": dl.T @ f, "b3": dl.sum(0)}
            dp2 = (dl @ p["w3"]).reshape(p2.shape)
            dc2 = _pool_back(dp2, a2, r2.shape) * (c2 > 0)
            dp1, g["w2"], g["b2"] = _conv_back(dc2, cols2, p1.shape, p["w2"])
            dc1 = _pool_back(dp1, a1, r1.shape) * (c1 > 0)
            _, g["w1"], g["b1"] = _conv_back(dc1, cols1, x.shape, p["w1"])
            t += 1
            for k in p:
                m[k] = b1 * m[k] + (1 - b1) * g[k]
                v2[k] = b2 * v2[k] + (1 - b2) * g[k] * g[k]
                mh = m[k] / (1 - b1 ** t)
                vh = v2[k] / (1 - b2 ** t)
                p[k] = (p[k] - lr * mh / (np.sqrt(vh) + eps)).astype(np.float32)
    return p


def predict(p: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    return _forward(p, x).argmax(1)


def accuracy(pred: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.asarray(pred) == y))


def to_onnx_model(p: dict[str, np.ndarray], batch: int | str = 1) -> onnx.ModelProto:
    """The trained network as an ONNX model (input ``image`` [batch, 1, 8, 8],
    output ``logits`` [batch, 10])."""
    nodes = [
        h.make_node("Conv", ["image", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        h.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        h.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        h.make_node("Conv", ["p1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        h.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        h.make_node("MaxPool", ["r2"], ["p2"], name="pool2", kernel_shape=[2, 2], strides=[2, 2]),
        h.make_node("Flatten", ["p2"], ["f"], name="flatten"),
        h.make_node("Gemm", ["f", "w3", "b3"], ["logits"], name="fc", transB=1),
    ]
    inits = [nh.from_array(p[k].astype(np.float32), k) for k in ("w1", "b1", "w2", "b2", "w3", "b3")]
    g = h.make_graph(nodes, "digits_cnn",
                     [h.make_tensor_value_info("image", TensorProto.FLOAT, [batch, 1, 8, 8])],
                     [h.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 10])], inits)
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8,
                         producer_name="nnrt-tests-digits-cnn")
    onnx.checker.check_model(model)
    return model


if __name__ == "__main__":  # pragma: no cover - manual use
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    out.mkdir(parents=True, exist_ok=True)
    data = load_digits_split()
    params = train_digits_cnn(data)
    print(f"float accuracy (numpy training code): {accuracy(predict(params, data.x_test), data.y_test):.4f}")
    onnx.save(to_onnx_model(params), out / "digits_cnn.onnx")
    np.savez(out / "calibration.npz", image=data.x_train[:200])
    np.savez(out / "test.npz", image=data.x_test, label=data.y_test)
    print(f"wrote {out / 'digits_cnn.onnx'}, calibration.npz, test.npz")
