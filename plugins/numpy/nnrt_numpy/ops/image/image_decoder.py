"""ImageDecoder (opset 20): decode an encoded image (uint8 bytes) into an
``(H, W, 3)`` RGB/BGR or ``(H, W, 1)`` grayscale uint8 tensor.

Needs Pillow; without it the node is reported unsupported."""
from __future__ import annotations

import io
from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register

try:  # optional dependency
    from PIL import Image as _Image
except ImportError:  # pragma: no cover - depends on the environment
    _Image = None


@register
class ImageDecoder(Kernel):
    op_type = "ImageDecoder"
    since_version = 20

    @classmethod
    def _check(cls, node: NodeInfo) -> str | None:
        if _Image is None:
            return "ImageDecoder needs the Pillow package, which is not installed"
        return None

    def _setup(self, node: NodeInfo) -> None:
        if _Image is None:
            raise self.fail("ImageDecoder needs the Pillow package, which is not installed")
        fmt = node.attr("pixel_format", "RGB")
        self.fmt = fmt.decode() if isinstance(fmt, bytes) else fmt
        if self.fmt not in ("RGB", "BGR", "Grayscale"):
            raise self.fail(f"pixel_format must be RGB, BGR or Grayscale, got {self.fmt!r}")

    def __call__(self, encoded) -> Sequence[Any]:
        data = np.asarray(encoded)
        if data.dtype != np.uint8 or data.ndim != 1:
            raise self.fail(f"encoded_stream must be a 1-D uint8 tensor, got {data.dtype} {data.shape}")
        try:
            img = _Image.open(io.BytesIO(data.tobytes()))
            img = img.convert("L" if self.fmt == "Grayscale" else "RGB")
        except Exception as e:  # Pillow raises many types for corrupt data
            raise self.fail(f"cannot decode image: {e}") from None
        arr = np.asarray(img, dtype=np.uint8)
        if self.fmt == "Grayscale":
            return (arr[..., None],)
        if self.fmt == "BGR":
            arr = arr[..., ::-1]
        return (np.ascontiguousarray(arr),)
