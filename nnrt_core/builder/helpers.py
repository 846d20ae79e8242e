"""Typed helpers for the common operators (mixed into ``GraphBuilder``).

Each helper spells the operator's attributes as keyword arguments and hands
them to ``GraphBuilder.op``, so it is validated like any other node.  Inputs
may be builder values or data (arrays, numbers, lists), which become
constants.  Attributes left at ``None`` are not written (the operator's
default applies).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from nnrt_core.builder.dtypes import as_dtype
from nnrt_core.builder.schema import BuilderError, find_schema
from nnrt_core.builder.var import Operand, Var

__all__ = ["TypedOps"]


def _ints(values: Sequence[int] | np.ndarray | None) -> np.ndarray | None:
    return None if values is None else np.asarray(values, dtype=np.int64).reshape(-1)


def _flag(value: bool | None) -> int | None:
    return None if value is None else int(bool(value))


class TypedOps:
    """Helpers named after the operators (``conv``, ``matmul``, ``relu``...)."""

    # provided by GraphBuilder
    op: Callable[..., Any]
    opset: int

    def _axes_are_input(self, op_type: str) -> bool:
        """True when ``op_type`` at this opset takes ``axes`` as an input."""
        return "axes" not in find_schema(op_type, "", self.opset).attribute_kinds()

    # ------------------------------------------------------------ binary
    def add(self, a: Operand, b: Operand, *, name: str | None = None) -> Var:
        """``a + b`` with numpy broadcasting."""
        return self.op("Add", [a, b], name=name)

    def sub(self, a: Operand, b: Operand, *, name: str | None = None) -> Var:
        """``a - b`` with numpy broadcasting."""
        return self.op("Sub", [a, b], name=name)

    def mul(self, a: Operand, b: Operand, *, name: str | None = None) -> Var:
        """``a * b`` with numpy broadcasting."""
        return self.op("Mul", [a, b], name=name)

    def div(self, a: Operand, b: Operand, *, name: str | None = None) -> Var:
        """``a / b`` with numpy broadcasting."""
        return self.op("Div", [a, b], name=name)

    def pow(self, a: Operand, b: Operand, *, name: str | None = None) -> Var:
        """``a ** b``."""
        return self.op("Pow", [a, b], name=name)

    def matmul(self, a: Operand, b: Operand, *, name: str | None = None) -> Var:
        """Matrix product (``numpy.matmul`` semantics)."""
        return self.op("MatMul", [a, b], name=name)

    def gemm(self, a: Operand, b: Operand, c: Operand | None = None, *, alpha: float = 1.0, beta: float = 1.0,
             trans_a: bool = False, trans_b: bool = False, name: str | None = None) -> Var:
        """``alpha * A' @ B' + beta * C`` on 2-D ``a``/``b`` (``'`` = transposed when asked)."""
        return self.op("Gemm", [a, b, c], {"alpha": alpha, "beta": beta, "transA": int(trans_a),
                                           "transB": int(trans_b)}, name=name)

    def where(self, condition: Operand, a: Operand, b: Operand, *, name: str | None = None) -> Var:
        """Elements of ``a`` where ``condition`` holds, else of ``b``."""
        return self.op("Where", [condition, a, b], name=name)

    # ------------------------------------------------------------- unary
    def relu(self, x: Operand, *, name: str | None = None) -> Var:
        return self.op("Relu", [x], name=name)

    def sigmoid(self, x: Operand, *, name: str | None = None) -> Var:
        return self.op("Sigmoid", [x], name=name)

    def tanh(self, x: Operand, *, name: str | None = None) -> Var:
        return self.op("Tanh", [x], name=name)

    def exp(self, x: Operand, *, name: str | None = None) -> Var:
        return self.op("Exp", [x], name=name)

    def log(self, x: Operand, *, name: str | None = None) -> Var:
        return self.op("Log", [x], name=name)

    def sqrt(self, x: Operand, *, name: str | None = None) -> Var:
        return self.op("Sqrt", [x], name=name)

    def abs(self, x: Operand, *, name: str | None = None) -> Var:
        return self.op("Abs", [x], name=name)

    def neg(self, x: Operand, *, name: str | None = None) -> Var:
        return self.op("Neg", [x], name=name)

    def erf(self, x: Operand, *, name: str | None = None) -> Var:
        return self.op("Erf", [x], name=name)

    def identity(self, x: Operand, *, name: str | None = None) -> Var:
        return self.op("Identity", [x], name=name)

    def leaky_relu(self, x: Operand, alpha: float = 0.01, *, name: str | None = None) -> Var:
        return self.op("LeakyRelu", [x], {"alpha": alpha}, name=name)

    def gelu(self, x: Operand, *, approximate: str = "none", name: str | None = None) -> Var:
        """GELU (opset >= 20); ``approximate="tanh"`` for the tanh approximation."""
        return self.op("Gelu", [x], {"approximate": approximate}, name=name)

    def clip(self, x: Operand, min: float | None = None, max: float | None = None, *,
             name: str | None = None) -> Var:
        """Clamp ``x`` to ``[min, max]`` (either bound may be omitted)."""
        return self.op("Clip", [x, min, max], name=name)

    def cast(self, x: Operand, dtype: Any, *, name: str | None = None) -> Var:
        """``x`` converted to element type ``dtype`` (numpy dtype, name or DataType)."""
        return self.op("Cast", [x], {"to": int(as_dtype(dtype, "Cast 'to'"))}, name=name)

    # ------------------------------------------------------ convolution
    def conv(self, x: Operand, w: Operand, b: Operand | None = None, *, strides: Sequence[int] | None = None,
             pads: Sequence[int] | None = None, dilations: Sequence[int] | None = None, group: int = 1,
             auto_pad: str | None = None, kernel_shape: Sequence[int] | None = None,
             name: str | None = None) -> Var:
        """N-D convolution: ``x`` [N, C, *spatial], ``w`` [M, C/group, *kernel],
        ``b`` [M]; ``pads`` = begins then ends per spatial axis."""
        return self.op("Conv", [x, w, b], {"strides": strides, "pads": pads, "dilations": dilations,
                                           "group": group, "auto_pad": auto_pad, "kernel_shape": kernel_shape},
                       name=name)

    def conv_transpose(self, x: Operand, w: Operand, b: Operand | None = None, *,
                       strides: Sequence[int] | None = None, pads: Sequence[int] | None = None,
                       dilations: Sequence[int] | None = None, group: int = 1,
                       output_padding: Sequence[int] | None = None, output_shape: Sequence[int] | None = None,
                       auto_pad: str | None = None, kernel_shape: Sequence[int] | None = None,
                       name: str | None = None) -> Var:
        """Transposed convolution: ``w`` [C, M/group, *kernel]."""
        return self.op("ConvTranspose", [x, w, b], {
            "strides": strides, "pads": pads, "dilations": dilations, "group": group,
            "output_padding": output_padding, "output_shape": output_shape, "auto_pad": auto_pad,
            "kernel_shape": kernel_shape}, name=name)

    # ----------------------------------------------------------- pooling
    def max_pool(self, x: Operand, kernel_shape: Sequence[int], *, strides: Sequence[int] | None = None,
                 pads: Sequence[int] | None = None, dilations: Sequence[int] | None = None,
                 ceil_mode: bool = False, auto_pad: str | None = None, name: str | None = None) -> Var:
        return self.op("MaxPool", [x], {"kernel_shape": kernel_shape, "strides": strides, "pads": pads,
                                        "dilations": dilations, "ceil_mode": _flag(ceil_mode),
                                        "auto_pad": auto_pad}, name=name, num_outputs=1)

    def average_pool(self, x: Operand, kernel_shape: Sequence[int], *, strides: Sequence[int] | None = None,
                     pads: Sequence[int] | None = None, ceil_mode: bool = False, count_include_pad: bool = False,
                     auto_pad: str | None = None, name: str | None = None) -> Var:
        return self.op("AveragePool", [x], {"kernel_shape": kernel_shape, "strides": strides, "pads": pads,
                                            "ceil_mode": _flag(ceil_mode),
                                            "count_include_pad": _flag(count_include_pad),
                                            "auto_pad": auto_pad}, name=name)

    def global_average_pool(self, x: Operand, *, name: str | None = None) -> Var:
        return self.op("GlobalAveragePool", [x], name=name)

    def global_max_pool(self, x: Operand, *, name: str | None = None) -> Var:
        return self.op("GlobalMaxPool", [x], name=name)

    # ----------------------------------------------------- normalization
    def batch_norm(self, x: Operand, scale: Operand, bias: Operand, mean: Operand, var: Operand, *,
                   epsilon: float = 1e-5, name: str | None = None) -> Var:
        """Inference-mode batch normalization over channel axis 1."""
        return self.op("BatchNormalization", [x, scale, bias, mean, var], {"epsilon": epsilon},
                       name=name, num_outputs=1)

    def layer_norm(self, x: Operand, scale: Operand, bias: Operand | None = None, *, axis: int = -1,
                   epsilon: float = 1e-5, name: str | None = None) -> Var:
        """Layer normalization over the axes from ``axis`` on (opset >= 17)."""
        return self.op("LayerNormalization", [x, scale, bias], {"axis": axis, "epsilon": epsilon},
                       name=name, num_outputs=1)

    def softmax(self, x: Operand, axis: int = -1, *, name: str | None = None) -> Var:
        return self.op("Softmax", [x], {"axis": axis}, name=name)

    def log_softmax(self, x: Operand, axis: int = -1, *, name: str | None = None) -> Var:
        return self.op("LogSoftmax", [x], {"axis": axis}, name=name)

    # ------------------------------------------------------------ shapes
    def concat(self, values: Sequence[Operand], axis: int, *, name: str | None = None) -> Var:
        """Join ``values`` along ``axis``."""
        if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple)):
            raise BuilderError(f"Concat: values must be a list of values, got {type(values).__name__}")
        return self.op("Concat", list(values), {"axis": axis}, name=name)

    def split(self, x: Operand, sizes: Sequence[int] | None = None, *, axis: int = 0,
              num_outputs: int | None = None, name: str | None = None) -> tuple[Var, ...]:
        """Split ``x`` along ``axis`` into pieces of ``sizes`` or into
        ``num_outputs`` equal pieces."""
        if (sizes is None) == (num_outputs is None):
            raise BuilderError("Split: give exactly one of sizes= or num_outputs=")
        if sizes is not None:
            out = self.op("Split", [x, _ints(sizes)], {"axis": axis}, name=name)
        elif "num_outputs" in find_schema("Split", "", self.opset).attribute_kinds():
            out = self.op("Split", [x], {"axis": axis, "num_outputs": num_outputs}, name=name)
        else:
            out = self.op("Split", [x], {"axis": axis}, name=name, num_outputs=num_outputs)
        return out if isinstance(out, tuple) else (out,)

    def reshape(self, x: Operand, shape: Sequence[int] | Operand, *, allowzero: bool = False,
                name: str | None = None) -> Var:
        """``x`` with a new shape (``-1`` = inferred, ``0`` = copied unless ``allowzero``)."""
        shape_in = shape if not isinstance(shape, (list, tuple)) else _ints(shape)
        attrs = {"allowzero": int(allowzero)} if allowzero else {}
        return self.op("Reshape", [x, shape_in], attrs, name=name)

    def transpose(self, x: Operand, perm: Sequence[int] | None = None, *, name: str | None = None) -> Var:
        """Permute the axes (reverse them when ``perm`` is None)."""
        return self.op("Transpose", [x], {"perm": perm}, name=name)

    def flatten(self, x: Operand, axis: int = 1, *, name: str | None = None) -> Var:
        """2-D view: dims before ``axis`` x dims from ``axis`` on."""
        return self.op("Flatten", [x], {"axis": axis}, name=name)

    def squeeze(self, x: Operand, axes: Sequence[int] | None = None, *, name: str | None = None) -> Var:
        """Drop size-1 axes (all of them when ``axes`` is None)."""
        if self._axes_are_input("Squeeze"):
            return self.op("Squeeze", [x, _ints(axes)], name=name)
        return self.op("Squeeze", [x], {"axes": axes}, name=name)

    def unsqueeze(self, x: Operand, axes: Sequence[int], *, name: str | None = None) -> Var:
        """Insert size-1 axes at ``axes``."""
        if self._axes_are_input("Unsqueeze"):
            return self.op("Unsqueeze", [x, _ints(axes)], name=name)
        return self.op("Unsqueeze", [x], {"axes": axes}, name=name)

    def gather(self, x: Operand, indices: Operand, axis: int = 0, *, name: str | None = None) -> Var:
        """Pick entries of ``x`` along ``axis`` (``numpy.take``)."""
        if isinstance(indices, (int, list, tuple)):
            indices = np.asarray(indices, dtype=np.int64)
        return self.op("Gather", [x, indices], {"axis": axis}, name=name)

    def slice(self, x: Operand, starts: Sequence[int], ends: Sequence[int], axes: Sequence[int] | None = None,
              steps: Sequence[int] | None = None, *, name: str | None = None) -> Var:
        """``x[starts:ends:steps]`` on ``axes`` (all leading axes by default)."""
        return self.op("Slice", [x, _ints(starts), _ints(ends), _ints(axes), _ints(steps)], name=name)

    def pad(self, x: Operand, pads: Sequence[int], *, mode: str = "constant", value: float | None = None,
            name: str | None = None) -> Var:
        """Pad ``x``: ``pads`` = begins then ends per axis."""
        return self.op("Pad", [x, _ints(pads), value], {"mode": mode}, name=name)

    # --------------------------------------------------------- reductions
    def _reduce(self, op_type: str, x: Operand, axes: Sequence[int] | None, keepdims: bool,
                name: str | None) -> Var:
        if self._axes_are_input(op_type):
            return self.op(op_type, [x, _ints(axes)], {"keepdims": int(keepdims)}, name=name)
        return self.op(op_type, [x], {"axes": axes, "keepdims": int(keepdims)}, name=name)

    def reduce_mean(self, x: Operand, axes: Sequence[int] | None = None, *, keepdims: bool = True,
                    name: str | None = None) -> Var:
        """Mean over ``axes`` (all axes when None)."""
        return self._reduce("ReduceMean", x, axes, keepdims, name)

    def reduce_sum(self, x: Operand, axes: Sequence[int] | None = None, *, keepdims: bool = True,
                   name: str | None = None) -> Var:
        """Sum over ``axes`` (all axes when None)."""
        return self._reduce("ReduceSum", x, axes, keepdims, name)

    def reduce_max(self, x: Operand, axes: Sequence[int] | None = None, *, keepdims: bool = True,
                   name: str | None = None) -> Var:
        """Maximum over ``axes`` (all axes when None)."""
        return self._reduce("ReduceMax", x, axes, keepdims, name)
