"""The protocol over gRPC: ``inference.GRPCInferenceService`` (grpc.aio),
from the stubs generated from ``protocol/grpc_predict_v2.proto``.  Errors
are the gRPC status of :class:`~nnrt_serve.errors.ServeError` with its message."""
from __future__ import annotations

import math
from typing import Any

import grpc
import numpy as np

from nnrt_serve.auth import expected_bearer, require_bearer
from nnrt_serve.errors import BadRequest, PayloadTooLarge, as_serve_error
from nnrt_serve.handlers import Handlers, InferInput, InferRequest, InferResult
from nnrt_serve.protocol import grpc_predict_v2_pb2 as pb
from nnrt_serve.protocol import grpc_predict_v2_pb2_grpc as pb_grpc
from nnrt_serve.tensors import GRPC_CONTENTS, check_shape, datatype_of, dtype_of, from_raw

__all__ = ["InferenceServicer", "add_to_server", "decode_infer_request", "encode_infer_result"]


def _param_value(p: pb.InferParameter) -> Any:
    which = p.WhichOneof("parameter_choice")
    return getattr(p, which) if which else None


def _params(m: Any) -> dict[str, Any]:
    return {k: _param_value(v) for k, v in m.items()}


def _from_contents(t: Any, limit: int) -> np.ndarray:
    dt = dtype_of(t.name, t.datatype)
    shape = check_shape(t.name, list(t.shape), dt.itemsize, limit)
    field = GRPC_CONTENTS.get(t.datatype)
    if field is None:
        raise BadRequest(f"tensor {t.name!r}: datatype {t.datatype} travels only in raw_input_contents")
    values = getattr(t.contents, field)
    if len(values) != math.prod(shape):
        raise BadRequest(f"tensor {t.name!r}: {len(values)} values in contents.{field}, but shape {list(shape)} "
                         f"needs {math.prod(shape)}")
    try:
        return np.array(values, dtype=dt.newbyteorder("=")).reshape(shape)
    except (ValueError, OverflowError) as e:  # e.g. 300 in int_contents for an INT8 tensor
        raise BadRequest(f"tensor {t.name!r}: contents.{field} are not {t.datatype} values ({e})") from None


def decode_infer_request(request: pb.ModelInferRequest, limit: int, timeout: float | None) -> InferRequest:
    raw = request.raw_input_contents
    if raw and len(raw) != len(request.inputs):
        raise BadRequest(f"{len(raw)} raw_input_contents for {len(request.inputs)} inputs: give one per input")
    inputs = []
    for i, t in enumerate(request.inputs):
        arr = from_raw(t.name, t.datatype, list(t.shape), raw[i], limit) if raw else _from_contents(t, limit)
        inputs.append(InferInput(t.name, t.datatype, tuple(t.shape), arr))
    if not inputs:
        raise BadRequest("the request needs inputs")
    outputs = [{"name": o.name, "parameters": _params(o.parameters)} for o in request.outputs]
    for o in outputs:
        if "classification" in o["parameters"]:
            raise BadRequest(f"output {o['name']!r}: the classification extension is not supported")
    return InferRequest(request.model_name, request.model_version or None, inputs, request.id or None,
                        _params(request.parameters), outputs, timeout)


def encode_infer_result(result: InferResult) -> pb.ModelInferResponse:
    resp = pb.ModelInferResponse(model_name=result.model, model_version=result.version, id=result.id or "")
    for name, arr, _ in result.outputs:
        resp.outputs.add(name=name, datatype=datatype_of(arr.dtype), shape=list(arr.shape))
        resp.raw_output_contents.append(np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<")).tobytes())
    return resp


class InferenceServicer(pb_grpc.GRPCInferenceServiceServicer):
    """Each RPC runs the shared :class:`Handlers`; a failure aborts with its status and message."""

    def __init__(self, handlers: Handlers, token: str | None = None) -> None:
        self.handlers, self.token = handlers, token
        self._bearer = expected_bearer(token)

    async def _call(self, context: grpc.aio.ServicerContext, fn: Any, *args: Any) -> Any:
        try:
            if self._bearer is not None:
                given = dict(context.invocation_metadata() or ()).get("authorization", "")
                require_bearer(str(given), self._bearer, "the metadata 'authorization: Bearer <token>'")
            out = fn(*args)
            return await out if hasattr(out, "__await__") else out
        except Exception as e:
            err = as_serve_error(e)
            await context.abort(grpc.StatusCode[err.grpc_code], str(err))

    async def ServerLive(self, request: Any, context: Any) -> pb.ServerLiveResponse:
        return pb.ServerLiveResponse(live=self.handlers.server_live())

    async def ServerReady(self, request: Any, context: Any) -> pb.ServerReadyResponse:
        return pb.ServerReadyResponse(ready=self.handlers.server_ready())

    async def ServerMetadata(self, request: Any, context: Any) -> pb.ServerMetadataResponse:
        return pb.ServerMetadataResponse(**await self._call(context, self.handlers.server_metadata))

    async def ModelReady(self, request: Any, context: Any) -> pb.ModelReadyResponse:
        ok = await self._call(context, self.handlers.model_ready, request.name, request.version or None)
        return pb.ModelReadyResponse(ready=ok)

    async def ModelMetadata(self, request: Any, context: Any) -> pb.ModelMetadataResponse:
        meta = await self._call(context, self.handlers.model_metadata, request.name, request.version or None)
        tensors = lambda ts: [pb.ModelMetadataResponse.TensorMetadata(**t) for t in ts]  # noqa: E731
        return pb.ModelMetadataResponse(name=meta["name"], versions=meta["versions"], platform=meta["platform"],
                                        inputs=tensors(meta["inputs"]), outputs=tensors(meta["outputs"]))

    async def ModelInfer(self, request: pb.ModelInferRequest, context: Any) -> pb.ModelInferResponse:
        async def infer() -> pb.ModelInferResponse:
            limit = self.handlers.tensor_limit(request.model_name)
            try:
                req = decode_infer_request(request, limit, context.time_remaining())
            except Exception as e:
                raise self.handlers.refused(request.model_name, "grpc", e) from None
            return encode_infer_result(await self.handlers.infer(req, "grpc"))
        return await self._call(context, infer)


def add_to_server(handlers: Handlers, server: grpc.aio.Server, token: str | None = None) -> InferenceServicer:
    servicer = InferenceServicer(handlers, token)
    pb_grpc.add_GRPCInferenceServiceServicer_to_server(servicer, server)
    return servicer


def grpc_options(max_request_bytes: int) -> list[tuple[str, int]]:
    if max_request_bytes <= 0:
        raise PayloadTooLarge("max_request_bytes must be positive")
    return [("grpc.max_receive_message_length", max_request_bytes),
            ("grpc.max_send_message_length", max(max_request_bytes, 64 << 20))]
