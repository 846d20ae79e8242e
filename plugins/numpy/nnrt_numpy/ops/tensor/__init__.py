"""Operator kernels: tensor.  Import each op module explicitly (it registers itself)."""
from __future__ import annotations

# from . import <module>  -- one line per op module
from . import cast, center_crop_pad, concat, constant, depth_space, expand, eyelike, gather_elements, gather_nd, onehot, pad, reverse_sequence, scatter, select, slice, split, unique, flatten, gather, identity, reshape, shape, squeeze, transpose
