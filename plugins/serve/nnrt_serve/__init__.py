"""nnrt serve: the Open Inference Protocol (KServe v2, what Triton's clients
speak) over REST and gRPC for a repository of nnrt models, with dynamic
batching, deadlines, bounded queues and Prometheus metrics.  See
docs/serving.md."""
from __future__ import annotations

from nnrt_serve.errors import ServeError
from nnrt_serve.handlers import Handlers, InferRequest, InferResult
from nnrt_serve.repository import ModelRepository, ServedModel
from nnrt_serve.settings import ServingSettings

__all__ = ["Handlers", "InferRequest", "InferResult", "ModelRepository", "ServedModel", "ServeError",
           "ServingSettings"]
