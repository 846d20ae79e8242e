"""Device-preference policies in the spirit of ONNX Runtime's EP selection
policies: ``prefer_npu`` and ``prefer_cpu``.

They are the priority scheduler with the candidate backends re-ordered by
device type (``Backend.device_type`` / the device's ``DeviceInfo.type``):
each node goes to the first backend of the preferred kind that supports it,
then to the other kinds in their configured priority order, then to the
backup.  (``max_performance`` and ``min_power`` are cost-based, see
:mod:`nnrt_schedulers.cost`.)
"""
from __future__ import annotations

from typing import ClassVar

from nnrt_core.plugin_api import Backend
from nnrt_core.plugin_api import hookimpl
from nnrt_core.plugin_api import PlacementContext, PlacementResult, Scheduler

__all__ = ["DevicePreferenceScheduler", "PreferNpuScheduler", "PreferCpuScheduler"]


class DevicePreferenceScheduler(Scheduler):
    """Priority placement with backends of ``preferred`` device types first."""

    name = "device_preference"
    #: device types in order of preference; types not listed keep priority order after them
    preferred: ClassVar[tuple[str, ...]] = ()

    def order(self, ctx: PlacementContext) -> list[Backend]:
        """Candidate backends (selected, then backup) in preference order."""
        rank = {t: i for i, t in enumerate(self.preferred)}
        selected = sorted(ctx.backends, key=lambda b: rank.get(_device_type(b, ctx), len(rank)))
        if ctx.backup is not None and all(b is not ctx.backup for b in selected):
            selected.append(ctx.backup)
        return selected

    def _place(self, ctx: PlacementContext) -> PlacementResult:
        order = self.order(ctx)
        out: dict[str, str] = {}
        reasons: dict[str, str] = {}
        for node in ctx.graph.nodes:
            pinned = ctx.pins.get(node.name)
            if pinned is not None:
                out[node.name] = pinned
                continue
            out[node.name] = next(b.name for b in order if ctx.capabilities[b.name].supports(node.name))
            first = order[0].name
            if out[node.name] != first:
                reasons[node.name] = (f"{self.name}: {first} rejected it; next preferred backend"
                                      if not ctx.capabilities[first].supports(node.name)
                                      else f"{self.name}")
            else:
                reasons[node.name] = f"{self.name}: preferred {_device_type(order[0], ctx)} backend"
        return PlacementResult(out, reasons)


def _device_type(b: Backend, ctx: PlacementContext) -> str:
    try:
        return b.find_device(ctx.config.devices.get(b.name)).type
    except Exception:  # a backend that cannot list devices: its declared type
        return b.device_type


class PreferNpuScheduler(DevicePreferenceScheduler):
    name = "prefer_npu"
    description = "policy: NPU backends first, then GPU, then CPU (priority order within a kind)"
    preferred = ("npu", "gpu", "cpu")


class PreferCpuScheduler(DevicePreferenceScheduler):
    name = "prefer_cpu"
    description = "policy: CPU backends first, then the others (priority order within a kind)"
    preferred = ("cpu",)


@hookimpl
def nnrt_schedulers():
    return [PreferNpuScheduler, PreferCpuScheduler]
