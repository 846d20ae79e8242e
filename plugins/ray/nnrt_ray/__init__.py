"""nnrt on Ray: batch inference over Ray Data with nnrt sessions as actors.

* :class:`NnrtPredictor` — the callable class for ``Dataset.map_batches``;
* :func:`ship` — compile once on the driver, load the offline file warm in every actor;
* :func:`device_resources` — the Ray custom resources a session's device backends need;
* :func:`run_batch` / :func:`map_dataset` — the job behind ``nnrt batch``.

See docs/ray.md."""
from __future__ import annotations

from nnrt_ray.cluster import connect, local_device_resources
from nnrt_ray.errors import ErrorSink, start_error_sink
from nnrt_ray.job import BatchReport, map_dataset, run_batch
from nnrt_ray.predictor import ON_ERROR, NnrtPredictor
from nnrt_ray.rows import BadRow
from nnrt_ray.shipping import ShippedSession, device_resources, ship

__all__ = ["NnrtPredictor", "ShippedSession", "ship", "device_resources", "run_batch", "map_dataset",
           "BatchReport", "BadRow", "ErrorSink", "start_error_sink", "connect", "local_device_resources", "ON_ERROR"]
