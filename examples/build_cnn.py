"""Build a small CNN in Python (no ONNX file), ask each device which of its
operations it supports, run it across backends and export it to ONNX.

    python examples/build_cnn.py [OUT.onnx]     (default: a temporary folder)

The network: two conv -> batch-norm -> relu -> max-pool blocks (the first
followed by a local response normalization, which the emulated NPU does not
implement), then flatten -> gemm -> softmax.  It runs with
``backends=["npu_emu", "onnxruntime"], backup="numpy"``, prints where every
node ran, checks the result against the NumPy reference backend and writes the
model as an ONNX file that onnx's checker accepts.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx

from nnrt_core import GraphBuilder, ScheduleConfig, Session, available_operations, default_registry
from nnrt_core.builder import Var
from nnrt_core.frontends import to_onnx

CLASSES = 10


def conv_block(b: GraphBuilder, x: Var, channels: int, rng: np.random.Generator) -> Var:
    """conv 3x3 (same padding) -> batch-norm -> relu -> 2x2 max-pool."""
    in_channels = x.shape[1]
    w = rng.standard_normal((channels, in_channels, 3, 3)).astype(np.float32) * np.float32(0.3)
    y = b.conv(x, w, np.zeros(channels, np.float32), pads=[1, 1, 1, 1])
    y = b.batch_norm(y, scale=rng.uniform(0.5, 1.5, channels).astype(np.float32),
                     bias=rng.standard_normal(channels).astype(np.float32) * np.float32(0.1),
                     mean=rng.standard_normal(channels).astype(np.float32) * np.float32(0.1),
                     var=rng.uniform(0.5, 1.5, channels).astype(np.float32))
    y = b.relu(y)
    return b.max_pool(y, [2, 2], strides=[2, 2])


def build_cnn(seed: int = 0):
    """The model as an nnrt IR ``Model``."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder("small_cnn")
    x = b.input("image", np.float32, [1, 3, 32, 32])
    y = conv_block(b, x, 8, rng)
    y = b.LRN(y, size=3)  # any ONNX operator by name: not in the NPU's op set
    y = conv_block(b, y, 16, rng)
    y = b.flatten(y)                                        # [1, 16 * 8 * 8]
    w = rng.standard_normal((y.shape[1], CLASSES)).astype(np.float32) * np.float32(0.05)
    logits = b.gemm(y, w, np.zeros(CLASSES, np.float32))
    b.output(b.softmax(logits), "probabilities")
    return b.build()


def main(argv: list[str]) -> int:
    model = build_cnn()
    graph = model.graph
    print(f"built {graph.name!r}: {len(graph.nodes)} nodes, {len(graph.initializers)} constants, "
          f"opset {model.opset_imports['']}")

    registry = default_registry()
    accelerators = [name for name in ("npu_emu", "onnxruntime")
                    if name in registry.backends and registry.backends[name].available]
    for device in accelerators:
        answers = available_operations(model, device)
        refused = [a for a in answers if not a.supported]
        print(f"{device}: supports {len(answers) - len(refused)}/{len(answers)} operations")
        for a in refused:
            print(f"  - {a.node} ({a.op_type}): {a.reason}")

    config = ScheduleConfig(backends=accelerators or ["numpy"], backup="numpy")
    session = Session(model, config)
    print(f"\nplacement with backends={list(config.backends)}, backup={config.backup!r}:")
    print(f"  {'node':<24}{'op':<20}{'backend':<13}{'part':>4}  reason")
    for p in session.placement_report:
        print(f"  {p.node:<24}{p.op_type:<20}{p.backend:<13}{p.partition:>4}  {p.reason}")
    for e in session.events:
        print(f"  ! {e.kind}: {e.message}")

    image = np.random.default_rng(1).random((1, 3, 32, 32), dtype=np.float32)
    out = session.run({"image": image})["probabilities"]
    reference = Session(model, ScheduleConfig(backends=["numpy"])).run({"image": image})["probabilities"]
    diff = float(np.max(np.abs(out.astype(np.float64) - reference)))
    print(f"\nclass {int(out.argmax())} (p={float(out.max()):.3f}); max |diff| vs numpy backend: {diff:.2e}")
    if diff > 1e-2:  # the fp16 NPU is close to, not equal to, the fp32 reference
        print("error: heterogeneous result differs from the reference", file=sys.stderr)
        return 1

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(argv[0]) if argv else Path(tmp) / "small_cnn.onnx"
        proto = to_onnx(model, ir_version=model.ir_version)
        onnx.checker.check_model(proto, full_check=True)
        onnx.save(proto, path)
        print(f"exported {path} ({path.stat().st_size} bytes, IR {proto.ir_version}); onnx.checker: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
