"""Placement: the scheduler contract, the cost model and partitioning."""
from __future__ import annotations

from typing import TYPE_CHECKING

from nnrt_core.lazy_names import lazy_names

if TYPE_CHECKING:
    from nnrt_core.placement.context import (NodePlacement, PartitionKey, PlacementContext, PlacementEvent,
                                             PlacementResult, with_backup)
    from nnrt_core.placement.cost_model import (DEFAULT_POWER_W, PARTITION_OVERHEAD_SECONDS, CostModel,
                                                link_copy_seconds, value_nbytes)
    from nnrt_core.placement.partitioning import (IslandMove, PartitionPlan, merge_islands, partition_graph,
                                                  partition_neighbours)
    from nnrt_core.placement.scheduler import PlanCandidate, Scheduler

__all__ = ["PlanCandidate", "CostModel", "DEFAULT_POWER_W", "IslandMove", "NodePlacement", "PARTITION_OVERHEAD_SECONDS",
           "PartitionKey", "PartitionPlan", "PlacementContext", "PlacementEvent", "PlacementResult", "Scheduler",
           "link_copy_seconds", "merge_islands", "partition_graph", "partition_neighbours", "value_nbytes", "with_backup"]

#: name -> the module defining it, imported on first use (PEP 562), so that
#: importing one module of this package does not import them all
_HOME = {
    'NodePlacement': 'nnrt_core.placement.context',
    'PartitionKey': 'nnrt_core.placement.context',
    'PlacementContext': 'nnrt_core.placement.context',
    'PlacementEvent': 'nnrt_core.placement.context',
    'PlacementResult': 'nnrt_core.placement.context',
    'with_backup': 'nnrt_core.placement.context',
    'DEFAULT_POWER_W': 'nnrt_core.placement.cost_model',
    'PARTITION_OVERHEAD_SECONDS': 'nnrt_core.placement.cost_model',
    'CostModel': 'nnrt_core.placement.cost_model',
    'link_copy_seconds': 'nnrt_core.placement.cost_model',
    'value_nbytes': 'nnrt_core.placement.cost_model',
    'IslandMove': 'nnrt_core.placement.partitioning',
    'PartitionPlan': 'nnrt_core.placement.partitioning',
    'merge_islands': 'nnrt_core.placement.partitioning',
    'partition_graph': 'nnrt_core.placement.partitioning',
    'partition_neighbours': 'nnrt_core.placement.partitioning',
    'PlanCandidate': 'nnrt_core.placement.scheduler',
    'Scheduler': 'nnrt_core.placement.scheduler',
}

__getattr__, __dir__ = lazy_names(__name__, _HOME)
