"""The inputs measured selection times candidate plans on
(:mod:`nnrt_core.compiler.measure`): the config's ``measure_feeds``
(:mod:`nnrt_core.feed_sets`), else synthetic feeds of the graph inputs'
shapes, the free dimensions taken as each of ``FREE_DIM_SIZES`` in turn."""
from __future__ import annotations

from typing import Iterator

import numpy as np

from nnrt_core.config import ScheduleConfig
from nnrt_core.errors import ConfigError
from nnrt_core.feed_sets import MAX_FEED_BYTES
from nnrt_core.ir import Graph
from nnrt_core.ir.types import TensorType

__all__ = ["FREE_DIM_SIZES", "MAX_FEED_BYTES", "feed_bytes", "feed_trials", "has_free_dims", "measured_bytes",
           "measurement_feeds"]

#: free input dimensions tried, in order, until some candidate plan runs (a model may need more
#: than 1 along one: audio longer than its first convolution's window, a sequence over a kernel)
FREE_DIM_SIZES = (1, 64, 1024)

#: one trial: (the free size, or None for the config's measure_feeds; the feed sets of one run)
Trial = tuple[int | None, list[dict[str, np.ndarray]]]


def measurement_feeds(graph: Graph, seed: int = 0, free: int = 1) -> dict[str, np.ndarray]:
    """Inputs to time plans with: the graph inputs' static shapes (a free
    dimension taken as ``free``; ``input_shapes`` fixes them at load), floats from a
    standard normal, integers and booleans zero (valid as indices and masks)."""
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    for v in graph.inputs:
        if not isinstance(v.type, TensorType) or v.type.shape is None:
            raise ConfigError(f"scheduler 'measured': input {v.name!r} has no known rank ({v.type}); "
                              "give input_shapes (or measure_feeds) or choose a scheduler that does not measure")
        shape = tuple(d if isinstance(d, int) else free for d in v.type.shape)
        dtype = v.type.dtype.numpy
        if dtype.kind == "f":
            feeds[v.name] = rng.standard_normal(shape).astype(dtype)
        else:
            feeds[v.name] = np.zeros(shape, dtype)
    return feeds


def feed_bytes(graph: Graph, free: int = 1) -> int:
    """Bytes :func:`measurement_feeds` would allocate (free dimensions as ``free``; 0 for untyped inputs)."""
    total = 0
    for v in graph.inputs:
        if isinstance(v.type, TensorType) and v.type.shape is not None:
            n = 1
            for d in v.type.shape:
                n *= d if isinstance(d, int) else free
            try:
                total += n * v.type.dtype.numpy.itemsize
            except TypeError:  # no numpy equivalent: measurement_feeds reports it
                continue
    return total


def has_free_dims(graph: Graph) -> bool:
    return any(isinstance(v.type, TensorType) and v.type.shape is not None
               and any(not isinstance(d, int) for d in v.type.shape) for v in graph.inputs)


def measured_bytes(graph: Graph, config: ScheduleConfig) -> int:
    """Bytes of the first trial's inputs: the config's feeds, else the synthetic ones with free dimensions 1."""
    return config.measure_feeds.nbytes if config.measure_feeds is not None else feed_bytes(graph)


def feed_trials(graph: Graph, config: ScheduleConfig) -> Iterator[Trial]:
    """The inputs to try, in order, until some plan runs: the config's
    ``measure_feeds`` alone when given; else the synthetic feeds with the free
    dimensions taken as each of ``FREE_DIM_SIZES`` (the first only for a graph
    without free dimensions; no size whose feeds are over ``MAX_FEED_BYTES``)."""
    if config.measure_feeds is not None:
        yield None, [dict(s) for s in config.measure_feeds.sets]
        return
    for free in FREE_DIM_SIZES if has_free_dims(graph) else FREE_DIM_SIZES[:1]:
        if free != FREE_DIM_SIZES[0] and feed_bytes(graph, free) > MAX_FEED_BYTES:
            return
        yield free, [measurement_feeds(graph, free=free)]
