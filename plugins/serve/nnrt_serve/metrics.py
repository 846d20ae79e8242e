"""Prometheus metrics of a server (its own registry, served at ``/metrics``)."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client import CONTENT_TYPE_LATEST

from nnrt_serve.batcher import BatchStats
from nnrt_serve.repository import ServedModel

__all__ = ["ServerMetrics", "CONTENT_TYPE_LATEST"]

_SECONDS = (.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30)
_ROWS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class ServerMetrics:
    """Requests, failures, queue and compute time, batch sizes, per model
    (compute time also per the backends the model's partitions run on)."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.requests = Counter("nnrt_serve_requests", "Inference requests received", ["model", "protocol"],
                                registry=r)
        self.failures = Counter("nnrt_serve_request_failures", "Inference requests answered with an error",
                                ["model", "protocol", "status"], registry=r)
        self.request_seconds = Histogram("nnrt_serve_request_seconds", "Inference request time in the server "
                                         "(decode to encode)", ["model", "protocol"], buckets=_SECONDS, registry=r)
        self.queue_seconds = Histogram("nnrt_serve_queue_seconds", "Time a request waited in its model's queue",
                                       ["model"], buckets=_SECONDS, registry=r)
        self.compute_seconds = Histogram("nnrt_serve_compute_seconds", "Time of one execution (Session.run of a "
                                         "batch), labelled with the backends of the model's partitions",
                                         ["model", "backends"], buckets=_SECONDS, registry=r)
        self.batch_rows = Histogram("nnrt_serve_batch_rows", "Rows per execution", ["model"], buckets=_ROWS,
                                    registry=r)
        self.batch_requests = Histogram("nnrt_serve_batch_requests", "Requests per execution", ["model"],
                                        buckets=_ROWS, registry=r)
        self.queue_depth = Gauge("nnrt_serve_queue_depth", "Requests waiting per model", ["model"], registry=r)
        self.ready = Gauge("nnrt_serve_model_ready", "1 when the model is ready", ["model"], registry=r)
        self.partitions = Gauge("nnrt_serve_model_partitions", "Partitions of the model's session per backend",
                                ["model", "backend"], registry=r)
        self.load_seconds = Gauge("nnrt_serve_model_load_seconds", "Time to compile or load the model",
                                  ["model"], registry=r)
        self._backends: dict[str, str] = {}
        #: (model, protocol) -> (requests counter, request_seconds histogram) children, and the
        #: per-model children of the execution metrics: ``labels()`` looked up once, not at every request
        self._answer_children: dict[tuple[str, str], tuple] = {}
        self._execution_children: dict[str, tuple] = {}

    def model_loaded(self, model: ServedModel) -> None:
        self.ready.labels(model.name).set(1 if model.ready else 0)
        self.load_seconds.labels(model.name).set(model.load_seconds)
        if model.session is not None:
            counts: dict[str, int] = {}
            for p in model.session.partitions:
                counts[p.backend] = counts.get(p.backend, 0) + 1
            for backend, n in counts.items():
                self.partitions.labels(model.name, backend).set(n)
            self._backends[model.name] = "+".join(sorted(counts)) or "none"

    def executed(self, model: str, stats: BatchStats) -> None:
        """One execution of ``model`` (the batcher's observer)."""
        children = self._execution_children.get(model)
        if children is None:
            children = self._execution_children[model] = (
                self.queue_seconds.labels(model), self.compute_seconds.labels(model, self._backends.get(model, "none")),
                self.batch_rows.labels(model), self.batch_requests.labels(model))
        queue, compute, rows, requests = children
        for q in stats.queue_seconds:
            queue.observe(q)
        compute.observe(stats.compute_seconds)
        rows.observe(stats.rows)
        requests.observe(stats.requests)

    def answered(self, model: str, protocol: str, status: int, seconds: float) -> None:
        children = self._answer_children.get((model, protocol))
        if children is None:
            children = self._answer_children[(model, protocol)] = (self.requests.labels(model, protocol),
                                                                    self.request_seconds.labels(model, protocol))
        children[0].inc()
        children[1].observe(seconds)
        if status >= 400:
            self.failures.labels(model, protocol, str(status)).inc()

    def text(self) -> bytes:
        return generate_latest(self.registry)
