"""Placement: the scheduler contract, the cost model and partitioning."""
from __future__ import annotations

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
