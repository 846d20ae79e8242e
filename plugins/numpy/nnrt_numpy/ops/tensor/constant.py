"""Constant (every attribute form) and ConstantOfShape."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register
from ._util import int_list


@register
class Constant(Kernel):
    op_type = "Constant"
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        forms = {k: v for k, v in node.attrs.items() if k.startswith(("value", "sparse_value"))}
        if len(forms) != 1:
            raise self.fail("exactly one of value, value_float(s), value_int(s), value_string(s), "
                            f"sparse_value must be set (got {sorted(forms) or 'none'})")
        (name, v), = forms.items()
        if name == "value":
            self.value = np.asarray(v)
        elif name == "value_float":
            self.value = np.array(v, dtype=np.float32)
        elif name == "value_floats":
            self.value = np.array(v, dtype=np.float32).reshape(-1)
        elif name == "value_int":
            self.value = np.array(v, dtype=np.int64)
        elif name == "value_ints":
            self.value = np.array(v, dtype=np.int64).reshape(-1)
        elif name == "value_string":
            self.value = np.array(v.decode() if isinstance(v, bytes) else v, dtype=object)
        elif name == "value_strings":
            self.value = np.array([s.decode() if isinstance(s, bytes) else s for s in v], dtype=object)
        elif name == "sparse_value" and hasattr(v, "toarray"):
            self.value = np.asarray(v.toarray())
        else:
            raise self.fail(f"unsupported attribute {name}")
        self.value.flags.writeable = False

    def __call__(self) -> tuple[np.ndarray]:
        return (self.value,)


@register
class ConstantOfShape(Kernel):
    op_type = "ConstantOfShape"
    since_version = 9

    def _setup(self, node: NodeInfo) -> None:
        v = node.attr("value")
        v = np.zeros(1, dtype=np.float32) if v is None else np.asarray(v)
        if v.size != 1:
            raise self.fail("value must be a one-element tensor")
        self.value = v.reshape(())

    def __call__(self, shape: np.ndarray) -> tuple[np.ndarray]:
        dims = int_list(shape)
        if any(d < 0 for d in dims):
            raise self.fail(f"shape {dims} has negative dimensions")
        self.check_alloc(dims, self.value.dtype)
        return (np.full(dims, self.value, dtype=self.value.dtype),)
