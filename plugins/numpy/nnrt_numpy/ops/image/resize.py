"""Resize (opsets 10, 11, 13, 18, 19): nearest / linear / cubic resampling.

* 10: inputs ``(X, scales)``, modes nearest/linear, asymmetric coordinates and
  the legacy nearest rounding (truncate when upsampling, ceil when downsampling).
* 11/13: ``roi``/``scales``/``sizes`` inputs, cubic mode, every
  ``coordinate_transformation_mode``, ``nearest_mode``, ``exclude_outside``,
  ``extrapolation_value``.
* 18: ``antialias``, ``axes``, ``keep_aspect_ratio_policy``; drops
  ``tf_half_pixel_for_nn``.
* 19: ``half_pixel_symmetric``.

The resize is separable and runs one axis at a time (see ``_resample``).
Output sizes from scales are ``floor(in * scale)``; coordinate formulas that
need the target length use the fractional ``in * scale``, as the ONNX
reference does.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register

from ._resample import apply_taps, attr_text, filter_taps, nearest_taps, source_coords

_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
_POLICIES = ("stretch", "not_larger", "not_smaller")


def compute_dtype(dt: np.dtype) -> np.dtype:
    """Arithmetic type of the interpolation for input type ``dt``."""
    if dt == np.float64:
        return np.dtype(np.float64)
    if dt.kind == "f" and dt.itemsize <= 4 or str(dt) == "bfloat16":
        return np.dtype(np.float32)
    return np.dtype(np.float64)


def finish(y: np.ndarray, dt: np.dtype) -> np.ndarray:
    """Cast interpolated values back to the input type (integers round and saturate)."""
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return np.clip(np.rint(y), info.min, info.max).astype(dt)
    return y.astype(dt, copy=False)


def resample(
    x: np.ndarray,
    out_shape: Sequence[int],
    scales: Sequence[float],
    axes: Sequence[int],
    *,
    mode: str,
    coord_mode: str,
    nearest_mode: str = "round_prefer_floor",
    cubic_a: float = -0.75,
    exclude_outside: bool = False,
    extrapolation_value: float = 0.0,
    antialias: bool = False,
    roi: dict[int, tuple[float, float]] | None = None,
) -> np.ndarray:
    """Resize ``x`` along ``axes`` to ``out_shape`` (full rank) with per-axis ``scales`` (full rank)."""
    dt = x.dtype
    data = x.astype(compute_dtype(dt), copy=False) if mode != "nearest" or coord_mode == "tf_crop_and_resize" else x
    for ax in axes:
        in_len, out_len, scale = x.shape[ax], int(out_shape[ax]), float(scales[ax])
        r = (roi or {}).get(ax, (0.0, 1.0))
        if out_len == in_len and scale == 1.0 and (coord_mode != "tf_crop_and_resize" or r == (0.0, 1.0)):
            continue
        if out_len == 0 or in_len == 0:
            shape = list(data.shape)
            shape[ax] = out_len
            data = np.zeros(shape, dtype=data.dtype)
            continue
        coords, mask = source_coords(coord_mode, out_len, in_len, scale, r)
        if mode == "nearest":
            idx = nearest_taps(coords, in_len, nearest_mode, downsampling=scale < 1)
            data = apply_taps(data, ax, idx, None)
        else:
            idx, w = filter_taps(coords, in_len, mode, scale, cubic_a, antialias, exclude_outside)
            data = apply_taps(data, ax, idx, w)
        if mask is not None and mask.any():
            shape = [1] * data.ndim
            shape[ax] = out_len
            data = np.where(mask.reshape(shape), np.asarray(extrapolation_value).astype(data.dtype), data)
    return finish(data, dt)


class _ResizeBase(Kernel):
    op_type = "Resize"
    _coord_modes: tuple[str, ...] = (
        "half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize",
    )
    _v18 = False

    def _setup(self, node: NodeInfo) -> None:
        self.mode = attr_text(node.attr("mode", "nearest"))
        if self.mode not in ("nearest", "linear", "cubic"):
            raise self.fail(f"mode must be nearest, linear or cubic, got {self.mode!r}")
        self.coord_mode = attr_text(node.attr("coordinate_transformation_mode", "half_pixel"))
        if self.coord_mode not in self._coord_modes:
            raise self.fail(f"coordinate_transformation_mode {self.coord_mode!r} is not one of {self._coord_modes}")
        self.nearest_mode = attr_text(node.attr("nearest_mode", "round_prefer_floor"))
        if self.nearest_mode not in _NEAREST_MODES:
            raise self.fail(f"nearest_mode must be one of {_NEAREST_MODES}, got {self.nearest_mode!r}")
        self.cubic_a = float(node.attr("cubic_coeff_a", -0.75))
        self.exclude_outside = bool(node.attr("exclude_outside", 0))
        self.extrapolation_value = float(node.attr("extrapolation_value", 0.0))
        self.antialias = bool(node.attr("antialias", 0)) if self._v18 else False
        self.policy = attr_text(node.attr("keep_aspect_ratio_policy", "stretch")) if self._v18 else "stretch"
        if self.policy not in _POLICIES:
            raise self.fail(f"keep_aspect_ratio_policy must be one of {_POLICIES}, got {self.policy!r}")
        axes = node.attr("axes") if self._v18 else None
        self.axes = None if axes is None else [int(a) for a in axes]
        if self.axes is not None and len(set(self.axes)) != len(self.axes):
            raise self.fail(f"axes must not repeat: {self.axes}")

    def __call__(self, x: np.ndarray, roi: np.ndarray | None = None, scales: np.ndarray | None = None,
                 sizes: np.ndarray | None = None) -> Sequence[Any]:
        x = np.asarray(x)
        rank = x.ndim
        if self.axes is None:
            axes = list(range(rank))
        else:
            if any(not -rank <= a < rank for a in self.axes):
                raise self.fail(f"axes {self.axes} out of range for rank {rank}")
            axes = [a % rank for a in self.axes]
            if len(set(axes)) != len(axes):
                raise self.fail(f"axes must not repeat: {self.axes}")
        n = len(axes)
        scales = None if scales is None or np.asarray(scales).size == 0 else np.asarray(scales, dtype=np.float64).ravel()
        sizes = None if sizes is None or np.asarray(sizes).size == 0 else np.asarray(sizes, dtype=np.int64).ravel()
        if (scales is None) == (sizes is None):
            raise self.fail("exactly one of 'scales' and 'sizes' must be given")
        full_scales = [1.0] * rank
        out_shape = list(x.shape)
        if scales is not None:
            if scales.shape[0] != n:
                raise self.fail(f"scales has {scales.shape[0]} entries, expected {n}")
            if np.any(scales <= 0):
                raise self.fail(f"scales must be positive, got {scales.tolist()}")
            for a, s in zip(axes, scales):
                full_scales[a] = float(s)
                out_shape[a] = int(np.floor(x.shape[a] * s))
        else:
            if sizes.shape[0] != n:
                raise self.fail(f"sizes has {sizes.shape[0]} entries, expected {n}")
            if np.any(sizes < 0):
                raise self.fail(f"sizes must be non-negative, got {sizes.tolist()}")
            ratios = [int(s) / x.shape[a] if x.shape[a] else 1.0 for a, s in zip(axes, sizes)]
            if self.policy == "stretch":
                for a, s, r in zip(axes, sizes, ratios):
                    full_scales[a] = r
                    out_shape[a] = int(s)
            else:
                common = min(ratios) if self.policy == "not_larger" else max(ratios)
                for a in axes:
                    full_scales[a] = common
                    out_shape[a] = int(common * x.shape[a] + 0.5)
        roi_map = None
        if self.coord_mode == "tf_crop_and_resize":
            if roi is None or np.asarray(roi).size == 0:
                raise self.fail("tf_crop_and_resize needs a non-empty roi input")
            r = np.asarray(roi, dtype=np.float64).ravel()
            if r.shape[0] == 2 * n:
                roi_map = {a: (float(r[i]), float(r[n + i])) for i, a in enumerate(axes)}
            elif r.shape[0] == 2 * rank:
                roi_map = {a: (float(r[a]), float(r[rank + a])) for a in axes}
            else:
                raise self.fail(f"roi must have {2 * n} entries, got {r.shape[0]}")
        self.check_alloc(out_shape, x.dtype)
        y = resample(
            x, out_shape, full_scales, axes,
            mode=self.mode, coord_mode=self.coord_mode, nearest_mode=self.nearest_mode,
            cubic_a=self.cubic_a, exclude_outside=self.exclude_outside,
            extrapolation_value=self.extrapolation_value, antialias=self.antialias, roi=roi_map,
        )
        return (y,)


@register
class Resize10(Kernel):
    """Resize-10: ``(X, scales)``; nearest or linear with asymmetric coordinates."""

    op_type = "Resize"
    since_version = 10

    def _setup(self, node: NodeInfo) -> None:
        self.mode = attr_text(node.attr("mode", "nearest"))
        if self.mode not in ("nearest", "linear"):
            raise self.fail(f"mode must be nearest or linear in Resize-10, got {self.mode!r}")

    def __call__(self, x: np.ndarray, scales: np.ndarray) -> Sequence[Any]:
        return (upsample_legacy(self, np.asarray(x), np.asarray(scales, dtype=np.float64).ravel(), self.mode, False),)


def upsample_legacy(k: Kernel, x: np.ndarray, scales: np.ndarray, mode: str, up_only: bool) -> np.ndarray:
    """Resize-10 / Upsample semantics (asymmetric coordinates, legacy nearest rounding)."""
    if scales.shape[0] != x.ndim:
        raise k.fail(f"scales has {scales.shape[0]} entries, input rank is {x.ndim}")
    if np.any(scales <= 0) or (up_only and np.any(scales < 1)):
        raise k.fail(f"scales must be {'>= 1' if up_only else 'positive'}, got {scales.tolist()}")
    out_shape = [int(np.floor(d * s)) for d, s in zip(x.shape, scales)]
    k.check_alloc(out_shape, x.dtype)
    return resample(x, out_shape, scales.tolist(), list(range(x.ndim)), mode=mode,
                    coord_mode="asymmetric", nearest_mode="simple")


@register
class Resize11(_ResizeBase):
    since_version = 11


@register
class Resize13(_ResizeBase):
    since_version = 13


@register
class Resize18(_ResizeBase):
    since_version = 18
    _coord_modes = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize")
    _v18 = True


@register
class Resize19(_ResizeBase):
    since_version = 19
    _coord_modes = (
        "half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize",
    )
    _v18 = True
