"""Free input dimensions (``frontends/tflite/dynamic.py``): the column-wise reads of the
shape signatures and operator lists agree with the one-table reads, and a corrupt file
is still a ``ModelLoadError``."""
from __future__ import annotations

import struct

import numpy as np
import pytest

pytest.importorskip("tflite")

from tflite_models import TFLiteWriter  # noqa: E402

from nnrt_core import ScheduleConfig, Session  # noqa: E402
from nnrt_core.errors import ModelLoadError  # noqa: E402
from nnrt_core.frontends.tflite.dynamic import signatures  # noqa: E402
from nnrt_core.frontends.tflite.load import read_flat_model  # noqa: E402
from nnrt_core.frontends.tflite.schema import BULK_OPERATORS  # noqa: E402
from nnrt_core.frontends.tflite.table import SUBGRAPH  # noqa: E402

_SHAPE_SIGNATURE = 18  # vtable offset of Tensor.shape_signature


def _relu_chain(n_ops: int) -> bytes:
    """x (signature [-1, 4], declared [1, 4]) -> n_ops RELUs / NEGs, every tensor with a free batch."""
    w = TFLiteWriter()
    x = w.input("x", [1, 4])
    w.tensors[x]["signature"] = [-1, 4]
    cur = x
    for k in range(n_ops):
        y = w.tensor(f"t{k}", [1, 4])
        w.tensors[y]["signature"] = [-1, 4]
        w.op("RELU" if k % 2 else "NEG", [cur], [y])
        cur = y
    w.outputs = [cur]
    return w.build()


def _expected(x: np.ndarray, n_ops: int) -> np.ndarray:
    for k in range(n_ops):
        x = np.maximum(x, 0) if k % 2 else -x
    return x


@pytest.mark.parametrize("n_ops", [5, BULK_OPERATORS + 3])  # one operator at a time; column-wise
def test_free_batch_through_many_operators(n_ops):
    x = np.random.default_rng(n_ops).normal(size=(3, 4)).astype(np.float32)
    sess = Session(_relu_chain(n_ops), ScheduleConfig(backends=["numpy"], input_shapes={"x": [3, 4]}))
    (y,) = sess.run({"x": x}).values()
    np.testing.assert_array_equal(y, _expected(x, n_ops))


def test_column_wise_signatures_match_one_table_reads():
    flat = read_flat_model(_relu_chain(12))
    sg = flat.subgraph(0)
    n = sg.vector_position(SUBGRAPH.tensors)[1]
    one_by_one = signatures(sg, range(n))
    bulk = signatures(sg, range(n), flat.buf)
    assert bulk == one_by_one and bulk[0] == (-1, 4) and len(bulk) == n


def _shape_signature_field(data: bytes, tensor: int) -> int:
    """Position of tensor ``tensor``'s shape_signature uoffset in ``data``."""
    flat = read_flat_model(data)
    tab = flat.subgraph(0).table_at(SUBGRAPH.tensors, tensor)
    vt = tab.pos - struct.unpack_from("<i", data, tab.pos)[0]
    return tab.pos + struct.unpack_from("<H", data, vt + _SHAPE_SIGNATURE)[0]


@pytest.mark.parametrize("n_ops", [12, BULK_OPERATORS + 3])
def test_a_shape_signature_outside_the_file_is_a_model_load_error(n_ops):
    data = bytearray(_relu_chain(n_ops))
    at = _shape_signature_field(bytes(data), 5)
    struct.pack_into("<I", data, at, len(data) * 4)  # the vector's offset points past the end
    with pytest.raises(ModelLoadError, match="corrupt: shape signatures"):
        Session(bytes(data), ScheduleConfig(backends=["numpy"]))


def test_a_shape_signature_longer_than_the_file_is_a_model_load_error():
    data = bytearray(_relu_chain(12))
    at = _shape_signature_field(bytes(data), 7)
    vec = at + struct.unpack_from("<I", data, at)[0]
    struct.pack_into("<I", data, vec, 1 << 28)  # its length word: far more int32s than the file holds
    with pytest.raises(ModelLoadError, match="corrupt: shape signatures"):
        Session(bytes(data), ScheduleConfig(backends=["numpy"]))
