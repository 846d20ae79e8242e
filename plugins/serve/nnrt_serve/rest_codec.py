"""The REST body of an inference request and answer: JSON tensors and
Triton's binary tensor extension (a JSON header of
``Inference-Header-Content-Length`` bytes, then each binary tensor's bytes in
the order of the inputs that give ``parameters.binary_data_size``)."""
from __future__ import annotations

import json
import zlib
from typing import Any

import numpy as np

from nnrt_serve.errors import BadRequest, PayloadTooLarge
from nnrt_serve.handlers import InferInput, InferRequest, InferResult
from nnrt_serve.tensors import datatype_of, from_json_data, from_raw, to_json_data

__all__ = ["HEADER_LENGTH", "decode_request", "encode_result", "decompress"]

HEADER_LENGTH = "inference-header-content-length"


def decompress(body: bytes, encoding: str | None, limit: int) -> bytes:
    """``body`` without its ``Content-Encoding`` (gzip or deflate), refused past ``limit`` bytes."""
    if not encoding or encoding == "identity":
        return body
    wbits = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}.get(encoding.strip().lower())
    if wbits is None:
        raise BadRequest(f"unsupported Content-Encoding {encoding!r}; expected gzip, deflate or identity")
    d = zlib.decompressobj(wbits)
    try:
        out = d.decompress(body, limit + 1)
    except zlib.error as e:
        raise BadRequest(f"the {encoding} body does not decompress: {e}") from None
    if len(out) > limit or d.unconsumed_tail:
        raise PayloadTooLarge(f"the decompressed request body is over the limit of {limit} bytes")
    return out


def _parse_header(body: bytes, header_length: str | None) -> tuple[dict[str, Any], memoryview]:
    if header_length is None:
        head, rest = body, memoryview(b"")
    else:
        try:
            n = int(header_length)
        except ValueError:
            n = -1
        if not 0 <= n <= len(body):
            raise BadRequest(f"Inference-Header-Content-Length {header_length!r} must be an integer between 0 "
                             f"and the body's {len(body)} bytes")
        head, rest = body[:n], memoryview(body)[n:]
    try:
        doc = json.loads(head)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BadRequest(f"the request is not valid JSON: {e}") from None
    if not isinstance(doc, dict):
        raise BadRequest(f"the request must be a JSON object, got {type(doc).__name__}")
    return doc, rest


def _params(obj: dict[str, Any], where: str) -> dict[str, Any]:
    p = obj.get("parameters") or {}
    if not isinstance(p, dict):
        raise BadRequest(f"{where}: 'parameters' must be an object, got {p!r}")
    return p


def _decode_input(t: Any, binary: memoryview, offset: int, limit: int) -> tuple[InferInput, int]:
    if not isinstance(t, dict) or not isinstance(t.get("name"), str):
        raise BadRequest(f"every input must be an object with a 'name', got {t!r:.200}")
    name, datatype, shape = t["name"], t.get("datatype"), t.get("shape")
    size = _params(t, f"input {name!r}").get("binary_data_size")
    if size is None:
        return InferInput(name, datatype, tuple(shape or ()), from_json_data(name, datatype, shape,
                                                                             t.get("data"), limit)), offset
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise BadRequest(f"input {name!r}: binary_data_size must be an integer >= 0, got {size!r}")
    if offset + size > len(binary):
        raise BadRequest(f"input {name!r}: binary_data_size {size} but only {len(binary) - offset} bytes of "
                         "binary data are left after the JSON header")
    arr = from_raw(name, datatype, shape, binary[offset:offset + size], limit)
    return InferInput(name, datatype, tuple(shape), arr), offset + size


def decode_request(body: bytes, header_length: str | None, model: str, version: str | None,
                   limit: int) -> InferRequest:
    """The request in ``body``; every tensor is checked against ``limit`` bytes before it is built."""
    doc, binary = _parse_header(body, header_length)
    inputs = doc.get("inputs")
    if not isinstance(inputs, list) or not inputs:
        raise BadRequest("the request needs 'inputs': a non-empty list of tensors")
    decoded, offset = [], 0
    for t in inputs:
        item, offset = _decode_input(t, binary, offset, limit)
        decoded.append(item)
    if offset != len(binary):
        raise BadRequest(f"{len(binary) - offset} bytes of binary data after the JSON header are not claimed by "
                         "any input's binary_data_size")
    outputs = doc.get("outputs") or []
    if not isinstance(outputs, list) or not all(isinstance(o, dict) for o in outputs):
        raise BadRequest("'outputs' must be a list of objects with a 'name'")
    for o in outputs:
        if "classification" in _params(o, f"output {o.get('name')!r}"):
            raise BadRequest(f"output {o.get('name')!r}: the classification extension is not supported")
    rid = doc.get("id")
    if rid is not None and not isinstance(rid, str):
        raise BadRequest(f"'id' must be a string, got {rid!r}")
    return InferRequest(model, version, decoded, rid, _params(doc, "the request"), outputs)


def _wants_binary(params: dict[str, Any], default: bool) -> bool:
    b = params.get("binary_data")
    return default if b is None else bool(b)


def encode_result(result: InferResult, request_parameters: dict[str, Any]) -> tuple[bytes, int | None]:
    """(body, JSON header length or None when every output is JSON)."""
    default = bool(request_parameters.get("binary_data_output", False))
    outputs, blobs = [], []
    for name, arr, params in result.outputs:
        entry: dict[str, Any] = {"name": name, "datatype": datatype_of(arr.dtype), "shape": list(arr.shape)}
        if _wants_binary(params, default):
            raw = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<")).tobytes()
            entry["parameters"] = {"binary_data_size": len(raw)}
            blobs.append(raw)
        else:
            entry["data"] = to_json_data(arr)
        outputs.append(entry)
    doc: dict[str, Any] = {"model_name": result.model, "model_version": result.version, "outputs": outputs}
    if result.id is not None:
        doc["id"] = result.id
    head = json.dumps(doc, separators=(",", ":")).encode()
    if not blobs:
        return head, None
    return b"".join([head, *blobs]), len(head)
